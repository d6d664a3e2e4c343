"""Model order, groups and kinds as the report shows them."""

from __future__ import annotations

from typing import Iterable, Mapping

from sctc_assets.lib.backend_catalog import traits
from sctc_assets.lib.model_registry import ModelEntry

# SC-TC-Bench's order (fig_2.py), in the groups its Figure 2 separates with dashed lines: Simplified-oriented,
# Traditional-oriented, then the rest.
PAPER_GROUPS: tuple[tuple[str, ...], ...] = (
    ("paper-qwen", "paper-baichuan2", "paper-chatglm2"),
    ("paper-breeze", "paper-taiwan-llm"),
    ("paper-ds", "paper-gpt4o", "paper-gpt4", "paper-gpt3.5", "paper-llama3-70b", "paper-llama3-8b"),
)
PAPER_ORDER: tuple[str, ...] = tuple(model for group in PAPER_GROUPS for model in group)


def ordered(models: Iterable[str]) -> list[str]:
    """The paper's models in the paper's order, then every other model alphabetically."""
    present = list(dict.fromkeys(models))
    paper = [model for model in PAPER_ORDER if model in present]
    return paper + sorted(model for model in present if model not in PAPER_ORDER)


def groups(models: Iterable[str]) -> list[list[str]]:
    """The ordered models split into the paper's groups, the other models forming a last group."""
    present = set(models)
    result = [[model for model in group if model in present] for group in PAPER_GROUPS]
    result.append([model for model in ordered(present) if model not in PAPER_ORDER])
    return [group for group in result if group]


def _backend(entry: ModelEntry | None, stored: str | None) -> str | None:
    """What answered: the backend stored with the model's answers, else (answers stored before it was recorded)
    its entry in today's registry."""
    return stored or (entry.backend if entry is not None else None)


def is_replay(entry: ModelEntry | None, stored: str | None = None) -> bool:
    return traits(_backend(entry, stored)).replays is not None


def kind(entry: ModelEntry | None, stored: str | None = None) -> str:
    """`replay (<study>)` for published answers, `live (<backend>)` for models this platform asked; `stored`, the
    backend recorded with the answers, wins over today's registry, which another `--registry` may lack."""
    backend = _backend(entry, stored)
    if backend is None:
        return "not in the registry"
    study = traits(backend).replays  # whose published answers, as the backend's class names them
    if study is not None:
        return f"replay ({study})"
    return f"live ({backend})"


def kinds_note(models: Iterable[str], registry: Mapping[str, ModelEntry],
               stored: Mapping[str, str] | None = None) -> str:
    """"3 replay, 1 live (transformers): qwen…" — what the data of a section is."""
    stored = stored or {}
    replay = [model for model in models if is_replay(registry.get(model), stored.get(model))]
    live = [model for model in models if model not in replay]
    parts = []
    if replay:
        parts.append(f"{len(replay)} replay model(s) (published answers)")
    if live:
        parts.append(f"{len(live)} live model(s) asked through this platform ({', '.join(live)})")
    return "; ".join(parts) or "no models"
