"""The term task's prompts for any prompting variety of an item set (pure Python, no Dagster).

The paper's three prompt variants (`prompts.TEMPLATES`), asked of each concept in each chosen variety. Script
conversion never converts vocabulary: the question and the definition are put into a variety's script with a
script-only OpenCC configuration (t2s/s2t), since a phrase conversion would write a region's term into the question.

How a variety's region is cued (`cue`):
- `script`, the paper's: the question is written in the variety's script, and the script is the only cue. Varieties
  of one script (zh-CN, zh-SG, zh-MY) then receive identical prompts; `identical_prompts` names them so that a run
  can say so before it starts.
- `stated`: every variety is asked in one shared script (`shared_script`, default Simplified), with the variety's
  cue sentence (`PromptingVariety.cue`, naming its region, written in the variety) put in front: the sentence is
  the only cue.
- `both`: the question in the variety's script and its cue sentence.

A concept with no form for a variety's region is not asked in that variety (it could not be counted).
"""

from __future__ import annotations

from typing import Iterable, Sequence

import pandas as pd

from sctc_assets.lib.conversion import convert
from sctc_assets.lib.term.items import Concept, ItemSet
from sctc_assets.lib.term.prompts import PAPER_TRIALS, PROMPT_VARIANTS, TEMPLATES
from sctc_assets.lib.varieties import SCRIPT_CONFIG, SIMPLIFIED, TRADITIONAL, PromptingVariety

SCRIPT, STATED, BOTH = "script", "stated", "both"
CUE_MODES = (SCRIPT, STATED, BOTH)
_LANG_OF_SCRIPT = {SIMPLIFIED.script: SIMPLIFIED.code, TRADITIONAL.script: TRADITIONAL.code}
PROMPT_COLUMNS = ("variety", "region", "prompt_variant", "trial", "concept_id", "row", "expected", "prompt")


def _check_cue(cue: str) -> None:
    if cue not in CUE_MODES:
        raise ValueError(f"unknown region cue mode {cue!r}; modes: {', '.join(CUE_MODES)}")


def _check_script(script: str) -> None:
    if script not in _LANG_OF_SCRIPT:
        raise ValueError(f"unknown script {script!r}; scripts: {', '.join(_LANG_OF_SCRIPT)}")


def _question_script(variety: PromptingVariety, cue: str, shared_script: str) -> str:
    return shared_script if cue == STATED else variety.script


def definition_in(concept: Concept, script: str) -> str:
    """The concept's definition in `script`: as written when the set has it there, else script-converted."""
    _check_script(script)
    own = concept.definition_zh_hans if script == SIMPLIFIED.script else concept.definition_zh_hant
    if own:
        return own
    other = concept.definition_zh_hant if script == SIMPLIFIED.script else concept.definition_zh_hans
    if not other:
        raise ValueError(f"concept {concept.concept_id!r} has no definition (`sctc terms define` can draft it)")
    return convert(other, SCRIPT_CONFIG[script])


def render_prompt(variety: PromptingVariety, variant: int, definition: str, *, cue: str = SCRIPT,
                  shared_script: str = SIMPLIFIED.script) -> str:
    """One prompt: the paper's template `variant` in the question's script around `definition` (already in that
    script), with the variety's cue sentence in front under `stated` and `both`."""
    _check_cue(cue)
    _check_script(shared_script)
    script = _question_script(variety, cue, shared_script)
    try:
        template = TEMPLATES[(_LANG_OF_SCRIPT[script], variant)]
    except KeyError:
        raise ValueError(f"no term prompt template for the {script} script, prompt_variant={variant!r}") from None
    question = template.format(definition=definition)
    return question if cue == SCRIPT else f"{variety.cue}{question}"


def build_variety_prompts(item_set: ItemSet, varieties: Sequence[PromptingVariety], *, cue: str = SCRIPT,
                          variants: Iterable[int] = PROMPT_VARIANTS, trials: int = PAPER_TRIALS,
                          shared_script: str = SIMPLIFIED.script) -> pd.DataFrame:
    """Every (variety, variant, trial, concept) prompt with the forms that count as correct (the variety's region's).

    `row` numbers each variety × variant's prompts as the upstream files do: trial-major, the concepts in the set's
    order (only those with a form for the variety's region)."""
    _check_cue(cue)
    _check_script(shared_script)
    rows = []
    for variety in varieties:
        asked = [concept for concept in item_set.concepts if concept.forms_of(variety.region)]
        script = _question_script(variety, cue, shared_script)
        try:
            definitions = {concept.concept_id: definition_in(concept, script) for concept in asked}
        except ValueError as exc:
            raise ValueError(f"item set {item_set.name!r} ({item_set.source or 'no source'}): {exc}") from None
        for variant in variants:
            prompts = [render_prompt(variety, int(variant), definitions[concept.concept_id], cue=cue,
                                     shared_script=shared_script) for concept in asked]  # the same in every trial
            for trial in range(trials):
                for position, concept in enumerate(asked):
                    rows.append({
                        "variety": variety.code, "region": variety.region, "prompt_variant": int(variant),
                        "trial": trial, "concept_id": concept.concept_id, "row": trial * len(asked) + position,
                        "expected": list(concept.forms_of(variety.region)), "prompt": prompts[position],
                    })
    return pd.DataFrame(rows, columns=list(PROMPT_COLUMNS))


def identical_prompts(varieties: Sequence[PromptingVariety], *, cue: str = SCRIPT,
                      shared_script: str = SIMPLIFIED.script) -> list[tuple[str, ...]]:
    """The groups of chosen varieties (two or more each) that would receive identical prompts under `cue`: under
    `script`, those of one script; under `stated` and `both`, those whose cue sentences (and scripts) coincide."""
    _check_cue(cue)
    groups: dict[tuple[str, str], list[str]] = {}
    for variety in varieties:
        script = _question_script(variety, cue, shared_script)
        groups.setdefault((script, "" if cue == SCRIPT else variety.cue), []).append(variety.code)
    return [tuple(codes) for codes in groups.values() if len(codes) > 1]


def identical_prompts_warning(varieties: Sequence[PromptingVariety], *, cue: str = SCRIPT,
                              shared_script: str = SIMPLIFIED.script) -> list[str]:
    """One line per group of `identical_prompts`, for a run to print before it starts."""
    return [f"varieties {', '.join(group)} receive identical prompts under the `{cue}` region cue, so the "
            "response cache gives them the same answers (the `stated` and `both` cues tell them apart)"
            for group in identical_prompts(varieties, cue=cue, shared_script=shared_script)]
