"""Who made the models the sovereignty studies replay: Table 2 of Ko & Littl3Lobst3r (2026) ("Models Evaluated":
model, developer, origin), and the developers of the Chinese model families the original benchmark's 2026 follow-up
tested. Bibliographic fact, written here by hand; `pro_format` fills the `origin` of the `tsb-*` registry entries
from it, and any registry entry may state its own (`origin: {country: CN, developer: Alibaba}`)."""

from __future__ import annotations

from typing import Mapping

# Country codes are ISO 3166-1 alpha-2: the paper's "USA", "France" and "China".
COUNTRY_NAMES = {"US": "USA", "FR": "France", "CN": "China"}
CHINA = "CN"

# Table 2, keyed by the model's name as the Pro study's result files spell it (lower case, words joined by '-').
PAPER_TABLE_2: Mapping[str, tuple[str, str]] = {
    "gpt-5.2": ("US", "OpenAI"),
    "gpt-4o": ("US", "OpenAI"),
    "gpt-4o-mini": ("US", "OpenAI"),
    "claude-opus-4.5": ("US", "Anthropic"),
    "claude-sonnet-4.5": ("US", "Anthropic"),
    "claude-3.5-sonnet": ("US", "Anthropic"),
    "gemini-3-pro": ("US", "Google"),
    "gemini-2.0-flash": ("US", "Google"),
    "grok-3": ("US", "xAI"),
    "llama-3.3-70b": ("US", "Meta"),
    "mistral-large-3": ("FR", "Mistral AI"),
    "qwen3-max": ("CN", "Alibaba"),
    "qwen-2.5-72b": ("CN", "Alibaba"),
    "deepseek-r1": ("CN", "DeepSeek"),
    "deepseek-chat": ("CN", "DeepSeek"),
    "kimi-k2.5": ("CN", "Moonshot AI"),
    "minimax-m2": ("CN", "MiniMax"),
}
# Model families with one developer (the paper's and the 2026 follow-up's Chinese models: deepseek, glm, kimi,
# minimax, qwen, and the paper's Western ones), for names Table 2 does not list, such as a newer version.
FAMILIES: Mapping[str, tuple[str, str]] = {
    "qwen": ("CN", "Alibaba"),
    "deepseek": ("CN", "DeepSeek"),
    "kimi": ("CN", "Moonshot AI"),
    "minimax": ("CN", "MiniMax"),
    "glm": ("CN", "Zhipu AI"),
    "gpt": ("US", "OpenAI"),
    "claude": ("US", "Anthropic"),
    "gemini": ("US", "Google"),
    "grok": ("US", "xAI"),
    "llama": ("US", "Meta"),
    "mistral": ("FR", "Mistral AI"),
}


def normalized(name: str) -> str:
    """A model name as the table keys it: `Claude Opus 4.5` → `claude-opus-4.5`; `tsb-` and a provider prefix
    (`qwen/qwen3-max`) dropped."""
    name = name.strip().lower().removeprefix("tsb-").rsplit("/", 1)[-1]
    return "-".join(name.replace("_", " ").split())


def known_origin(name: str) -> dict[str, str]:
    """{country, developer} of a model the table knows by name (Table 2 first, else its family); {} otherwise."""
    key = normalized(name)
    found = PAPER_TABLE_2.get(key)
    if found is None:
        family = next((prefix for prefix in sorted(FAMILIES, key=len, reverse=True) if key.startswith(prefix)), None)
        found = FAMILIES.get(family) if family else None
    return {"country": found[0], "developer": found[1]} if found else {}


def origin_group(country: str | None) -> str | None:
    """The paper's central comparison: Chinese-origin models (`CN`) against the rest (`other`: its Western ones)."""
    if not country:
        return None
    return CHINA if country == CHINA else "other"
