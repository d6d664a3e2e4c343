"""The provider family of a registry entry, so that a run with two judges can say when both come from one family
(the sovereignty paper's limitation 6.7: a single-family judge shares its family's blind spots)."""

from __future__ import annotations

from typing import Any, Mapping

from sctc_assets.lib.backend_catalog import traits

# The provider family of a model, from its registry entry: a known prefix of the model's name (a routed name such as
# "anthropic/claude-…" by its vendor part), else the backend of a provider's own API. Two judges of one family
# share their training and their blind spots (the paper's limitation 6.7).
_FAMILIES = (("gpt", "openai"), ("o1", "openai"), ("o3", "openai"), ("o4", "openai"), ("chatgpt", "openai"),
             ("openai", "openai"), ("claude", "anthropic"), ("anthropic", "anthropic"), ("gemini", "google"),
             ("gemma", "google"), ("google", "google"), ("qwen", "alibaba"), ("qwq", "alibaba"),
             ("alibaba", "alibaba"), ("deepseek", "deepseek"), ("llama", "meta"), ("meta", "meta"),
             ("mistral", "mistral"), ("mixtral", "mistral"), ("glm", "zhipu"), ("zhipu", "zhipu"),
             ("z-ai", "zhipu"), ("kimi", "moonshot"), ("moonshot", "moonshot"), ("grok", "xai"), ("x-ai", "xai"),
             ("ernie", "baidu"), ("doubao", "bytedance"), ("minimax", "minimax"), ("yi-", "01.ai"),
             ("phi", "microsoft"), ("command", "cohere"))
# A provider's own API, told by the backend's trait (its batch API names the provider); an OpenAI-compatible API
# may serve any model, so it tells no family by itself.
_PROVIDER_APIS = {"anthropic": "anthropic", "gemini": "google"}


def provider_family(backend: str, settings: Mapping[str, Any]) -> str | None:
    """The provider family of a registry entry (backend and settings), or None when its name tells none."""
    name = str(settings.get("model") or settings.get("name") or settings.get("upstream_name") or "").lower()
    vendor, _, model = name.rpartition("/")
    for part in (vendor, model):
        for prefix, family in _FAMILIES:
            if part.startswith(prefix):
                return family
    return _PROVIDER_APIS.get(traits(backend).batch_api or "")


def same_family_warning(judges: Mapping[str, tuple[str, Mapping[str, Any]]]) -> str | None:
    """One line when two of the judges (key → backend and settings) are of the same provider family."""
    families: dict[str, list[str]] = {}
    for key, (backend, settings) in judges.items():
        family = provider_family(backend, settings)
        if family is not None:
            families.setdefault(family, []).append(key)
    shared = {family: keys for family, keys in families.items() if len(keys) > 1}
    if not shared:
        return None
    named = "; ".join(f"{', '.join(keys)} ({family})" for family, keys in shared.items())
    return (f"warning: the judges {named} are of the same provider family: their agreement says little about "
            "a judge's bias (choose judges from different families)")
