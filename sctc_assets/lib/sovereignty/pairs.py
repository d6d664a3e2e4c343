"""The language pairs the sovereignty benchmark compares and each language's score read off the pair rows: what
`sctc run`'s summary needs, without the statistics of `metrics`."""

from __future__ import annotations

import pandas as pd

from sctc_assets.lib.sovereignty.prompts import BASELINE_CONDITION, with_condition
from sctc_assets.lib.varieties import ENGLISH, SIMPLIFIED, TRADITIONAL

# (a, b): LBS = Score_a − Score_b; McNemar b = pass in a and fail in b, c = the reverse. The first is the paper's.
COMPARISONS = ((TRADITIONAL.code, ENGLISH.code), (SIMPLIFIED.code, ENGLISH.code), (SIMPLIFIED.code, TRADITIONAL.code))
# Every score, pair and test is per condition too (`lib/sovereignty/conditions.py`); `none` is the paper's design.
GROUP_KEYS = ["model", "scoring_rule", "prompt_set", "condition"]


def language_scores(summary: pd.DataFrame) -> pd.DataFrame:
    """Score per model, rule, prompt set and language, read off the pair rows (each language once)."""
    sides = [summary[GROUP_KEYS + [f"lang_{side}", f"n_{side}", f"passed_{side}", f"score_{side}"]]
             .set_axis(GROUP_KEYS + ["lang", "n", "passed", "score"], axis=1) for side in ("a", "b")]
    return pd.concat(sides, ignore_index=True).drop_duplicates(GROUP_KEYS + ["lang"]).reset_index(drop=True)


def baseline(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of the baseline condition `none` (the paper's design): what the published tables are made of."""
    frame = with_condition(frame)
    return frame[frame["condition"] == BASELINE_CONDITION]
