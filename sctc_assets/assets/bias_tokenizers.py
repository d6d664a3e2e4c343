"""The tokenizer a model's bias-factor tables count with (`term_bias_factors`, `name_bias_factors`)."""

from __future__ import annotations

from typing import Callable, Optional

from sctc_assets.backends.replay import ReplayBackend
from sctc_assets.lib.name import tokenization as tk
from sctc_assets.lib.paths import default_tokenizers_path
from sctc_assets.resources.model_registry import ModelRegistryResource
from sctc_assets.resources.upstream import SCTCUpstreamResource


def model_tokenizer(model: str, models: ModelRegistryResource,
                    upstream: SCTCUpstreamResource) -> tuple[str, Optional[Callable[[str], list]], str]:
    """(label, encode, why not): a paper model's tokenizer from the tokenizer registry (the entry naming its
    upstream name in `paper_models`), else the backend's own offline tokenizer (`token_counter()`); `encode` None
    with the reason where neither is known or it cannot be loaded here."""
    backend = models.backend(model, open_upstream=upstream.open)
    if isinstance(backend, ReplayBackend):
        registry = tk.load_registry(default_tokenizers_path())
        found = [entry for entry in registry.values() if backend.upstream_name in entry.paper_models]
        if not found:
            return "", None, f"the tokenizer registry has no entry for paper model {backend.upstream_name}"
        try:
            return found[0].key, tk.load_tokenizer(found[0], tk.default_files_dir()), ""
        except tk.TokenizerUnavailable as exc:
            return "", None, f"{found[0].key} cannot be loaded here: {exc}"
    counter = backend.token_counter() if hasattr(backend, "token_counter") else None
    if counter is None or counter.encode is None:
        return "", None, f"the {backend.backend_name} backend knows no tokenizer offline"
    return counter.name, lambda text: list(counter.encode(text)), ""
