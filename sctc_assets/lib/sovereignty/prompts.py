"""The benchmark's prompts in the three prompting languages, and the per-model run settings."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import pandas as pd

from sctc_assets.lib.conversion import convert
from sctc_assets.lib.sovereignty.upstream import MAIN_PROMPT_SET, TSBRoots, prompt_items
from sctc_assets.lib.varieties import ENGLISH, SIMPLIFIED, TRADITIONAL

# Prompting language → the Pro study's language key (which red-flag list and which result block).
PRO_LANG = {TRADITIONAL.code: "zh", SIMPLIFIED.code: "zh", ENGLISH.code: "en"}
LANGS = tuple(PRO_LANG)
# Script only (not tw2sp's Mainland phrasing): the Simplified prompt differs from the Traditional one in nothing but
# the script, which is the variable the paper's limitation 6.6 asks about.
SIMPLIFIED_CONFIG = SIMPLIFIED.opencc_config
PROMPT_COLUMNS = ["prompt_set", "prompt_id", "category", "lang", "prompt"]
# One answer: a model, a prompting language, a prompt, a sample index and a condition (the system prompt or persona
# it was asked under, `lib/sovereignty/conditions.py`; `none`, the paper's design, sends no system prompt).
ITEM_KEYS = ["model", "lang", "prompt_set", "prompt_id", "sample", "condition"]
BASELINE_CONDITION = "none"
PAPER_SAMPLES = 1
# Settings a benchmark run may override in the model's backend (`benchmarks: sovereignty:` in the registry).
GENERATION_SETTINGS = ("temperature", "max_new_tokens", "max_tokens")


def prompt_table(items_by_set: Mapping[str, Sequence[Mapping[str, str]]]) -> pd.DataFrame:
    """One row per prompt set, prompt and language; the Simplified one is the Traditional prompt converted with OpenCC.
    An item's optional `source` (file and position) names it when its id is used twice in a set."""
    rows = []
    seen: dict[tuple[str, str], str] = {}
    for prompt_set, items in items_by_set.items():
        for index, item in enumerate(items):
            where = item.get("source") or f"prompt set {prompt_set!r}, item {index}"
            key = (prompt_set, item["prompt_id"])
            if key in seen:
                raise ValueError(f"{where}: duplicate prompt id {item['prompt_id']!r} (first in {seen[key]})")
            seen[key] = where
            # A custom prompt file may give its own Simplified text (`prompt_zh_hans`); else OpenCC converts.
            texts = {TRADITIONAL.code: item["prompt_zh"],
                     SIMPLIFIED.code: item.get("prompt_zh_hans") or convert(item["prompt_zh"], SIMPLIFIED_CONFIG),
                     ENGLISH.code: item["prompt_en"]}
            rows += [{"prompt_set": prompt_set, "prompt_id": item["prompt_id"], "category": item["category"],
                      "lang": lang, "prompt": texts[lang]} for lang in LANGS]
    return pd.DataFrame(rows, columns=PROMPT_COLUMNS)


def with_condition(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with a `condition` column: tables written before conditions existed hold the baseline only."""
    return frame if "condition" in frame.columns else frame.assign(condition=BASELINE_CONDITION)


def run_settings(samples: int | None, temperature: float | None,
                 model_settings: Mapping[str, Any] | None) -> tuple[int, dict[str, Any]]:
    """Samples per prompt and backend overrides: explicit config, else the registry's `benchmarks.sovereignty`."""
    model_settings = dict(model_settings or {})
    chosen = int(samples if samples is not None else model_settings.get("samples", PAPER_SAMPLES))
    if chosen < 1:
        raise ValueError(f"samples per prompt must be at least 1, got {chosen}")
    overrides = {name: model_settings[name] for name in GENERATION_SETTINGS if name in model_settings}
    if temperature is not None:
        overrides["temperature"] = temperature
    return chosen, overrides


def upstream_prompt_table(roots: TSBRoots, prompt_sets: Sequence[str] = ()) -> pd.DataFrame:
    """The main prompt set and `prompt_sets`, as `sovereignty_prompts` builds them."""
    chosen = list(dict.fromkeys([MAIN_PROMPT_SET, *prompt_sets]))
    return prompt_table({name: prompt_items(roots, name) for name in chosen})
