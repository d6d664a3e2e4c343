"""The paper's pairing (Section 3.1): one review of each variety of the declared pair (the paper's: Taiwan and
Mainland) of the same hotel, the same 3-class rating and the same 10-token length bin; reviews over 500 tokens are
left out.

Two reviews can pair exactly when they share that cell, so the largest set of pairs takes the smaller side's count
from every cell. Which reviews of a fuller side get paired is decided by a seeded hash of each review's id: the
choice is the same for the same seed whatever the input's row order, and one cell's choice never depends on another
cell. The whole pairing is a few sorts and one merge, so it stays fast and linear in memory on large exports.

The pair table's per-side columns end in each variety's suffix (`review_id_tw`, `score_cn` for the paper's pair),
the first variety's first; `pair_columns` names them and `varieties.pair_of_columns` reads the pair back.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sctc_assets.lib.reviews.source import is_empty
from sctc_assets.lib.reviews.varieties import VarietyPair, pair_of_columns, variety_pair

CELL = ["hotel_id", "rating_class", "length_bin"]
MAX_TOKENS = 500
SHORT_BELOW = 50  # characters: short is 1–49, long 50+ (Section 4)
LENGTH_GROUPS = ("short", "long", "all")
SIDE_STEMS = ("review_id", "score", "tokens", "characters")
UNPAIRED_REASONS = ("empty", "unknown_variety", "over_token_limit", "no_counterpart_in_cell", "surplus_in_cell")
_NEEDED = ["review_id", "variety", "score", "tokens", "characters", *CELL]


def pair_columns(pair: VarietyPair) -> list[str]:
    """The pair table's columns: `review_id_<a>, review_id_<b>, score_<a>, …` by the pair's suffixes."""
    return ["pair_id", "hotel_id", "rating_class", "length_bin",
            *(f"{stem}_{suffix}" for stem in SIDE_STEMS for suffix in pair.suffixes), "length_group"]


PAIR_COLUMNS = pair_columns(variety_pair())


def pair_of(pairs: pd.DataFrame) -> VarietyPair:
    """The pair a pair table was written for."""
    return pair_of_columns(pairs.columns, "review_id")


def seeded_draws(review_ids: pd.Series, seed: int) -> np.ndarray:
    """A 64-bit SipHash of each id under a key made from `seed`: a fixed pseudo-random order of the reviews."""
    if not 0 <= seed < 16**16:
        raise ValueError(f"pairing seed must be a non-negative integer below 16**16, got {seed}")
    return pd.util.hash_array(review_ids.astype(str).to_numpy(dtype=object), hash_key=f"{seed:016x}", categorize=False)


def length_group(characters_a: pd.Series, characters_b: pd.Series) -> np.ndarray:
    """A pair is short when its two reviews average under 50 characters, so every pair has one group."""
    return np.where((characters_a + characters_b) / 2 < SHORT_BELOW, "short", "long")


def pair_reviews(reviews: pd.DataFrame, *, seed: int = 0, max_tokens: int = MAX_TOKENS,
                 pair: VarietyPair | None = None) -> pd.DataFrame:
    """The maximum set of aligned pairs among `reviews` (columns of `review_varieties`) of the two varieties of
    `pair` (default the paper's), numbered in a seeded random order so that the first N pairs are a random sample
    of them."""
    pair = pair or variety_pair()
    a, b = pair.suffixes
    missing = [column for column in _NEEDED if column not in reviews.columns]
    if missing:
        raise ValueError(f"pairing needs column(s) {', '.join(missing)}")
    eligible = reviews.loc[reviews["tokens"] <= max_tokens, _NEEDED]
    eligible = eligible.assign(draw=seeded_draws(eligible["review_id"], seed))
    eligible = eligible.sort_values([*CELL, "variety", "draw", "review_id"], kind="stable")
    eligible["rank"] = eligible.groupby([*CELL, "variety"], sort=False, observed=True).cumcount()
    first, second = (eligible[eligible["variety"] == code].drop(columns="variety") for code in pair.codes)
    pairs = first.merge(second, on=[*CELL, "rank"], suffixes=(f"_{a}", f"_{b}"))
    pairs = pairs.sort_values([f"draw_{a}", f"review_id_{a}"], kind="stable").reset_index(drop=True)
    pairs["pair_id"] = np.arange(len(pairs), dtype="int64")
    pairs["length_group"] = length_group(pairs[f"characters_{a}"], pairs[f"characters_{b}"])
    return pairs[pair_columns(pair)]


def _isin(values: pd.Series, pool: pd.Series) -> np.ndarray:
    # Arrow-backed string columns test membership row by row in Python; object arrays use a hash table.
    return pd.Series(values.to_numpy(dtype=object), dtype=object).isin(pool.to_numpy(dtype=object)).to_numpy()


def unpaired_reviews(raw: pd.DataFrame, varieties: pd.DataFrame, pairs: pd.DataFrame, *,
                     max_tokens: int = MAX_TOKENS) -> pd.DataFrame:
    """Every input review left out of the pairs, with why: `empty` (no title, positive or negative text),
    `unknown_variety` (region not in the mapping), `over_token_limit`, `no_counterpart_in_cell` (no review of the
    other variety shares its hotel, rating class and length bin) or `surplus_in_cell` (its side of the cell had
    more reviews than the other)."""
    dropped = raw.loc[~_isin(raw["review_id"], varieties["review_id"]), ["review_id"]].copy()
    dropped["variety"] = None
    dropped["reason"] = np.where(is_empty(raw.loc[dropped.index]), "empty", "unknown_variety")
    paired = pd.concat([pairs[f"review_id_{suffix}"] for suffix in pair_of(pairs).suffixes])
    left = varieties.loc[~_isin(varieties["review_id"], paired), ["review_id", "variety", "tokens", *CELL]]
    eligible = varieties[varieties["tokens"] <= max_tokens]
    both = eligible.groupby(CELL, observed=True)["variety"].nunique()
    mixed_cells = both[both == 2].index
    in_mixed = pd.MultiIndex.from_frame(left[CELL]).isin(mixed_cells) if len(left) else np.array([], dtype=bool)
    left["reason"] = np.select([left["tokens"] > max_tokens, in_mixed],
                               ["over_token_limit", "surplus_in_cell"], "no_counterpart_in_cell")
    return pd.concat([dropped, left[["review_id", "variety", "reason"]]], ignore_index=True)


def unpaired_counts(unpaired: pd.DataFrame) -> dict[str, dict[str, int]]:
    """{reason: {variety or "unknown": count}} in the order of `UNPAIRED_REASONS`."""
    counts = unpaired.assign(variety=unpaired["variety"].fillna("unknown")).groupby(["reason", "variety"]).size()
    return {reason: {variety: int(n) for variety, n in counts[reason].items()}
            for reason in UNPAIRED_REASONS if reason in counts.index.get_level_values(0)}
