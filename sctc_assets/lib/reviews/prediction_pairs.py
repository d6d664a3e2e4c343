"""One model's predictions pair by pair (the input of Figures 3–4's comparison and of the per-pair scatter): per
format and asked pair, the two reviews' stars and the two predictions on the texts as written."""

from __future__ import annotations

import pandas as pd

from sctc_assets.lib.reviews.metrics import _predictions_by_review
from sctc_assets.lib.reviews.pairing import pair_of
from sctc_assets.lib.reviews.prompts import FORMATS


def prediction_pair_columns(a: str, b: str) -> list[str]:
    return ["model", "format", "pair_id", "length_group", f"review_id_{a}", f"review_id_{b}", f"score_{a}",
            f"score_{b}", f"prediction_{a}", f"prediction_{b}", "both_valid"]


def prediction_pairs(model: str, predictions: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """One row per format × asked pair (both reviews asked, as written): stars and predictions of each side
    (null where invalid) and whether both are valid (the pairs every comparison keeps)."""
    a, b = pair_of(pairs).suffixes
    frames = []
    for fmt in FORMATS:
        chosen = predictions[predictions["format"] == fmt] if not predictions.empty else predictions
        if chosen.empty:
            continue
        original = _predictions_by_review(chosen, "original")
        asked = pairs[pairs[f"review_id_{a}"].isin(original.index) & pairs[f"review_id_{b}"].isin(original.index)]
        frame = asked[["pair_id", "length_group", f"review_id_{a}", f"review_id_{b}", f"score_{a}",
                       f"score_{b}"]].copy()
        frame.insert(0, "format", fmt)
        frame.insert(0, "model", model)
        for side in (a, b):
            frame[f"prediction_{side}"] = pd.array(asked[f"review_id_{side}"].map(original).round(), dtype="Int64")
        frame["both_valid"] = frame[f"prediction_{a}"].notna() & frame[f"prediction_{b}"].notna()
        frames.append(frame)
    columns = prediction_pair_columns(a, b)
    if not frames:
        return pd.DataFrame(columns=columns).astype({"pair_id": "int64", f"score_{a}": "int64", f"score_{b}": "int64",
                                                     f"prediction_{a}": "Int64", f"prediction_{b}": "Int64",
                                                     "both_valid": "bool"})
    table = pd.concat(frames, ignore_index=True)[columns]
    for column in ("pair_id", f"score_{a}", f"score_{b}"):
        table[column] = table[column].astype("int64")
    return table.sort_values(["format", "pair_id"]).reset_index(drop=True)
