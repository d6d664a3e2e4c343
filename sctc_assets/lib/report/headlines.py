"""Each per-model table's headline numbers as flat `name → float`, for the asset metadata that Dagster's Plots tab
charts across materializations (one model partition's numbers per materialization)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from sctc_assets.lib.varieties import ENGLISH, TRADITIONAL

PREFERENCE = ("upstream", "judge", "rules")


def _put(found: dict[str, float], name: str, value: Any) -> None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return
    if not math.isnan(number):
        found[name] = round(number, 6)


def _preferred(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    present = set(frame[column]) if column in frame else set()
    source = next((source for source in PREFERENCE if source in present), None)
    return frame[frame[column] == source] if source else frame.iloc[0:0]


def term_headlines(rates: pd.DataFrame) -> dict[str, float]:
    """`pct_correct_<lang>`, `pct_misaligned_<lang>`, `pct_incorrect_<lang>`: prompt variant 1, all terms, the
    authors' labels where present, else a judge's, else the rules'."""
    found: dict[str, float] = {}
    if rates.empty:
        return found
    chosen = _preferred(rates[(rates["prompt_variant"] == 1) & (rates["subset"] == "all")], "label_source")
    for row in chosen.to_dict("records"):
        for measure in ("correct", "misaligned", "incorrect"):
            _put(found, f"pct_{measure}_{row['lang']}", row[f"pct_{measure}"])
    return found


def name_headlines(rates: pd.DataFrame) -> dict[str, float]:
    """`mainland_rate_<lang>` and `valid_rate_<lang>` (0–1) of the main experiment."""
    found: dict[str, float] = {}
    if rates.empty:
        return found
    chosen = _preferred(rates[rates["experiment"] == "main"], "extraction_source")
    for row in chosen.to_dict("records"):
        _put(found, f"valid_rate_{row['lang']}", row["valid_rate"])
        if row["n_valid"]:
            _put(found, f"mainland_rate_{row['lang']}", row["mainland_rate"])
    return found


def sovereignty_headlines(summary: pd.DataFrame) -> dict[str, float]:
    """Per scoring rule on the stage-1 prompts (baseline condition): `<rule>_score_<lang>`, and `<rule>_lbs` /
    `<rule>_qac` of the paper's pair (Traditional Chinese vs English)."""
    found: dict[str, float] = {}
    if summary.empty:
        return found
    summary = summary[summary["condition"] == "none"] if "condition" in summary.columns else summary
    stage = summary[summary["prompt_set"] == "stage1_sovereignty"]
    for row in stage.to_dict("records"):
        rule = row["scoring_rule"]
        for side in ("a", "b"):
            _put(found, f"{rule}_score_{row[f'lang_{side}']}", row[f"score_{side}"])
        if (row["lang_a"], row["lang_b"]) == (TRADITIONAL.code, ENGLISH.code):
            _put(found, f"{rule}_lbs", row["lbs"])
            _put(found, f"{rule}_qac", row["qac"])
    return found


def review_headlines(metrics: pd.DataFrame) -> dict[str, float]:
    """`delta_acc_<format>` (percentage points) and `delta_mse_<format>`, second − first variety of the pair (the
    paper's cn − tw) over all valid pairs."""
    found: dict[str, float] = {}
    if metrics.empty:
        return found
    overall = metrics[(metrics["analysis"] == "length") & (metrics["subset"] == "all")]
    for row in overall.to_dict("records"):
        _put(found, f"delta_acc_{row['format']}", row["delta_acc"])
        _put(found, f"delta_mse_{row['format']}", row["delta_mse"])
    return found
