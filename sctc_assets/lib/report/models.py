"""Model order, groups and kinds as the report shows them."""

from __future__ import annotations

from typing import Iterable, Mapping

from sctc_assets.lib.model_registry import ModelEntry

# SC-TC-Bench's order (fig_2.py), in the groups its Figure 2 separates with dashed lines: Simplified-oriented,
# Traditional-oriented, then the rest.
PAPER_GROUPS: tuple[tuple[str, ...], ...] = (
    ("paper-qwen", "paper-baichuan2", "paper-chatglm2"),
    ("paper-breeze", "paper-taiwan-llm"),
    ("paper-ds", "paper-gpt4o", "paper-gpt4", "paper-gpt3.5", "paper-llama3-70b", "paper-llama3-8b"),
)
PAPER_ORDER: tuple[str, ...] = tuple(model for group in PAPER_GROUPS for model in group)
REPLAY_BACKENDS = {"replay": "SC-TC-Bench", "tsb_replay": "Pro study"}  # whose published answers


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


def is_replay(entry: ModelEntry | None) -> bool:
    return entry is not None and entry.backend in REPLAY_BACKENDS


def kind(entry: ModelEntry | None) -> str:
    """`replay (<study>)` for published answers, `live (<backend>)` for models this platform asked."""
    if entry is None:
        return "not in the registry"
    if entry.backend in REPLAY_BACKENDS:
        return f"replay ({REPLAY_BACKENDS[entry.backend]})"
    return f"live ({entry.backend})"


def kinds_note(models: Iterable[str], registry: Mapping[str, ModelEntry]) -> str:
    """"3 replay, 1 live (transformers): qwen…" — what the data of a section is."""
    replay = [model for model in models if is_replay(registry.get(model))]
    live = [model for model in models if model not in replay]
    parts = []
    if replay:
        parts.append(f"{len(replay)} replay model(s) (published answers)")
    if live:
        parts.append(f"{len(live)} live model(s) asked through this platform ({', '.join(live)})")
    return "; ".join(parts) or "no models"
