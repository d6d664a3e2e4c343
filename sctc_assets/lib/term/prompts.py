"""Prompt templates of the regional term task (paper Table 1(a), Tables 7–8), in both scripts.

Row order follows the upstream prompt files: row r asks about term `r % n_terms` in trial `r // n_terms`.
"""

from __future__ import annotations

from typing import Iterable

import pandas as pd

from sctc_assets.lib.sctc_upstream import TERM_COLUMNS, TERMS_FILE
from sctc_assets.lib.term.terms import LANGS, expected_alternatives, other_region_alternatives, parse_terms
from sctc_assets.lib.upstream_source import UpstreamSource
from sctc_assets.lib.varieties import MAINLAND, SIMPLIFIED, TAIWAN, TRADITIONAL

PROMPT_VARIANTS = (1, 2, 3)
PAPER_TRIALS = 15
# Backend settings a model's `benchmarks: term:` registry entry may override for this benchmark: the answer length
# (the prompt asks for one word, so a short limit costs no label while it bounds a rambling answer).
GENERATION_SETTINGS = ("max_new_tokens", "max_tokens")

TEMPLATES: dict[tuple[str, int], str] = {
    (SIMPLIFIED.code, 1): "定义为'{definition}'的是什么，请用一个词回答？",
    (SIMPLIFIED.code, 2): "请问'{definition}'是指什么？请用一个词回答",
    (SIMPLIFIED.code, 3): "请用一个词回答，什么被定义为'{definition}'？",
    (TRADITIONAL.code, 1): "定義為'{definition}'的是什麼，請用一個詞回答？",
    (TRADITIONAL.code, 2): "請問'{definition}'是指什麼？請用一個詞回答",
    (TRADITIONAL.code, 3): "請用一個詞回答，什麼被定義為'{definition}'？",
}

# The `regional_terms` columns each prompting script reads: its own script's definition, its region's term (the
# correct answer) and the other region's (a misaligned one).
DEFINITION_COLUMN = {row.code: f"definition_{row.script}" for row in (SIMPLIFIED, TRADITIONAL)}
GT_COLUMN = {SIMPLIFIED.code: f"term_{MAINLAND.name}", TRADITIONAL.code: f"term_{TAIWAN.name}"}
OTHER_COLUMN = {SIMPLIFIED.code: f"term_{TAIWAN.name}", TRADITIONAL.code: f"term_{MAINLAND.name}"}


def render(lang: str, variant: int, definition: str) -> str:
    try:
        template = TEMPLATES[(lang, variant)]
    except KeyError:
        raise ValueError(f"no term prompt template for lang={lang!r}, prompt_variant={variant!r}") from None
    return template.format(definition=definition)


def build_prompts(
    terms: pd.DataFrame,
    *,
    langs: Iterable[str] = LANGS,
    variants: Iterable[int] = PROMPT_VARIANTS,
    trials: int = PAPER_TRIALS,
) -> pd.DataFrame:
    """Every (lang, variant, trial, term) prompt with the answers that count as correct and as misaligned."""
    records = terms.sort_values("position").to_dict("records")
    n_terms = len(records)
    rows = []
    for lang in langs:
        for variant in variants:
            for trial in range(trials):
                for term in records:
                    rows.append(
                        {
                            "lang": lang,
                            "prompt_variant": int(variant),
                            "trial": trial,
                            "term_id": term["term_id"],
                            "row": trial * n_terms + term["position"],
                            "gt": term[GT_COLUMN[lang]],
                            "other_region_term": term[OTHER_COLUMN[lang]],
                            "expected": expected_alternatives(term, lang),
                            "other_region": other_region_alternatives(term, lang),
                            "prompt": render(lang, variant, term[DEFINITION_COLUMN[lang]]),
                        }
                    )
    return pd.DataFrame(rows)


def run_settings(
    trials: int | None, variants: list[int] | None, model_settings: dict | None
) -> tuple[int, list[int]]:
    """Trials and prompt variants for one model: explicit config, else the registry entry, else the paper's."""
    model_settings = model_settings or {}
    chosen_trials = int(trials if trials is not None else model_settings.get("trials", PAPER_TRIALS))
    chosen_variants = list(variants if variants is not None else model_settings.get("prompt_variants", PROMPT_VARIANTS))
    if not 1 <= chosen_trials <= PAPER_TRIALS:
        raise ValueError(f"trials must be between 1 and {PAPER_TRIALS}, got {chosen_trials}")
    unknown = sorted(set(chosen_variants) - set(PROMPT_VARIANTS))
    if unknown or not chosen_variants:
        raise ValueError(f"prompt variants must be a non-empty subset of {PROMPT_VARIANTS}, got {chosen_variants}")
    return chosen_trials, sorted(set(int(v) for v in chosen_variants))


def generation_overrides(model_settings: dict | None) -> dict:
    """The backend settings the registry's `benchmarks: term:` entry overrides (see `GENERATION_SETTINGS`)."""
    model_settings = model_settings or {}
    overrides = {name: model_settings[name] for name in GENERATION_SETTINGS if name in model_settings}
    for name, value in overrides.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"benchmarks.term.{name} must be a positive integer, got {value!r}")
    return overrides


def upstream_term_prompts(source: UpstreamSource) -> pd.DataFrame:
    """Every term prompt of the upstream terms, as `regional_terms` → `term_prompts` build them."""
    terms = parse_terms(source.read_csv(TERMS_FILE, TERM_COLUMNS), source_name=TERMS_FILE)
    return build_prompts(terms, langs=LANGS, variants=PROMPT_VARIANTS, trials=PAPER_TRIALS)
