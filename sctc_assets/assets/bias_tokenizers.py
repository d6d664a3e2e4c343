"""The tokenizer a model's bias-factor tables count with (`term_bias_factors`, `name_bias_factors`)."""

from __future__ import annotations

from typing import Callable, Optional

from sctc_assets.backends.replay import ReplayBackend
from sctc_assets.lib.cost_estimate import registry_counter
from sctc_assets.lib.name import tokenization as tk
from sctc_assets.lib.paths import default_tokenizers_path
from sctc_assets.resources.model_registry import ModelRegistryResource
from sctc_assets.resources.upstream import SCTCUpstreamResource


def model_tokenizer(model: str, models: ModelRegistryResource,
                    upstream: SCTCUpstreamResource) -> tuple[str, Optional[Callable[[str], list]], str]:
    """(label, encode, why not): a paper model's tokenizer from the tokenizer registry (the entries naming its
    upstream name in `paper_models`, those with files on this machine or a package index before the Hugging Face
    hub's), else the backend's own offline tokenizer (`token_counter()`); `encode` None with the reason where none
    is known or can be loaded here. Loaded once per process (`lib.cost_estimate.registry_counter`); a hub entry fails
    at once where the hub is off ($HF_HUB_OFFLINE) and its files are not cached."""
    backend = models.backend(model, open_upstream=upstream.open)
    if isinstance(backend, ReplayBackend):
        registry = tk.load_registry(default_tokenizers_path())
        found = sorted((entry for entry in registry.values() if backend.upstream_name in entry.paper_models),
                       key=lambda entry: "hub" in (entry.settings.get("file") or {}))
        if not found:
            return "", None, f"the tokenizer registry has no entry for paper model {backend.upstream_name}"
        reasons = []
        for entry in found:
            counter, why = registry_counter(entry)
            if counter is not None:
                return entry.key, lambda text: list(counter.encode(text)), ""
            reasons.append(f"{entry.key} cannot be loaded here: {why}")
        return "", None, "; ".join(reasons)
    counter = backend.token_counter() if hasattr(backend, "token_counter") else None
    if counter is None or counter.encode is None:
        return "", None, f"the {backend.backend_name} backend knows no tokenizer offline"
    return counter.name, lambda text: list(counter.encode(text)), ""
