"""Varieties from the reviewer's self-declared region, the review text the length measures use, and each
review's rating class, length bin and script composition."""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from sctc_assets.lib.reviews.scripts import character_count, composition, token_count
from sctc_assets.lib.reviews.source import TEXT_FIELDS, ReviewDataError, is_empty
from sctc_assets.lib.varieties import MAINLAND, TAIWAN

# The reviews benchmark names its two varieties by region (the paper's order: Taiwan first).
VARIETIES = (TAIWAN.code, MAINLAND.code)
DEFAULT_VARIETY_MAP = {code: code for code in VARIETIES}
BIN_WIDTH = 10
VARIETY_COLUMNS = ["review_id", "hotel_id", "nationality", "variety", "score", "rating_class", "title", "positive",
                   "negative", "review_time", "characters", "tokens", "length_bin", "script_composition"]


def variety_map(mapping: Mapping[str, str] | None) -> dict[str, str]:
    """Region code (matched case-insensitively) → `tw` or `cn`."""
    mapping = dict(mapping or DEFAULT_VARIETY_MAP)
    wrong = {code: variety for code, variety in mapping.items() if variety not in VARIETIES}
    if wrong:
        raise ReviewDataError(f"variety mapping {wrong}: each region code must map to one of {', '.join(VARIETIES)}")
    return {str(code).strip().lower(): variety for code, variety in mapping.items()}


def review_text(reviews: pd.DataFrame) -> pd.Series:
    """Title, positive and negative text on separate lines (Appendix E), the text whose length is measured."""
    columns = [reviews[field].to_numpy(dtype=object) for field in TEXT_FIELDS]
    return pd.Series(["\n".join(part for part in parts if part) for parts in zip(*columns)], index=reviews.index,
                     dtype=object)


def rating_class(scores: pd.Series) -> pd.Series:
    """Section 3.1's three classes: 1–3 negative, 4–7 neutral, 8–10 positive."""
    return pd.Series(np.select([scores <= 3, scores <= 7], ["negative", "neutral"], "positive"), index=scores.index)


def length_bin(tokens: pd.Series, width: int = BIN_WIDTH) -> pd.Series:
    """Bin b holds reviews of b·width+1 … (b+1)·width tokens: with width 10, 1–10 is bin 0 and 491–500 bin 49."""
    return (tokens - 1) // width


def review_varieties(reviews: pd.DataFrame, mapping: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Non-empty reviews whose region maps to a variety, with rating class, lengths and script composition."""
    codes = variety_map(mapping)
    variety = reviews["nationality"].str.lower().map(codes)
    kept = reviews[~is_empty(reviews) & variety.notna()].copy()
    kept["variety"] = variety[kept.index].astype(object)
    kept["rating_class"] = rating_class(kept["score"])
    text = review_text(kept)
    kept["characters"] = text.map(character_count).astype("int64")
    kept["tokens"] = text.map(token_count).astype("int64")
    kept["length_bin"] = length_bin(kept["tokens"])
    kept["script_composition"] = text.map(composition).astype(object)
    return kept[VARIETY_COLUMNS].reset_index(drop=True)
