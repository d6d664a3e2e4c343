"""The pairing: property tests against an independent maximum-matching oracle, determinism, and the report of
reviews left unpaired."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_bipartite_matching

from sctc_assets.lib.reviews.pairing import pair_reviews, unpaired_counts, unpaired_reviews
from sctc_assets.lib.reviews.source import SHIPPED_REVIEWS, canonical_reviews, read_file
from sctc_assets.lib.reviews.varieties import length_bin, rating_class, review_varieties

# Scores and lengths on either side of every boundary (3|4 and 7|8 stars, 10|11 and 20|21 tokens, the 500-token
# limit), few enough that cells fill up and the matching matters.
review = st.tuples(st.sampled_from(["h1", "h2"]), st.sampled_from(["tw", "cn"]),
                   st.sampled_from([1, 3, 4, 7, 8, 10]), st.sampled_from([1, 10, 11, 20, 21, 499, 500, 501]))


def _frame(rows: list[tuple[str, str, int, int]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["hotel_id", "variety", "score", "tokens"])
    frame.insert(0, "review_id", [f"r{index}" for index in range(len(frame))])
    frame["rating_class"] = rating_class(frame["score"])
    frame["length_bin"] = length_bin(frame["tokens"])
    frame["characters"] = frame["tokens"]
    return frame


def _compatible(a: pd.Series, b: pd.Series) -> bool:
    """The paper's rule written out directly: same hotel, same 1–3/4–7/8–10 class, same ten-token bin."""
    def rating(score: int) -> int:
        return 0 if score <= 3 else 1 if score <= 7 else 2

    return (a.hotel_id == b.hotel_id and rating(a.score) == rating(b.score)
            and (a.tokens - 1) // 10 == (b.tokens - 1) // 10 and a.tokens <= 500 and b.tokens <= 500)


def _maximum_matching(frame: pd.DataFrame) -> int:
    tw, cn = frame[frame.variety == "tw"], frame[frame.variety == "cn"]
    edges = [[1 if _compatible(a, b) else 0 for b in cn.itertuples()] for a in tw.itertuples()]
    if not len(tw) or not len(cn):
        return 0
    matched = maximum_bipartite_matching(csr_matrix(np.array(edges, dtype=np.int8)), perm_type="column")
    return int((matched >= 0).sum())


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.lists(review, max_size=5), st.lists(review, min_size=20, max_size=80)), st.integers(0, 2**32))
def test_pairs_are_aligned_disjoint_within_the_limit_and_maximal(rows, seed):
    frame = _frame(rows)
    pairs = pair_reviews(frame, seed=seed)
    by_id = frame.set_index("review_id")
    tw, cn = by_id.loc[pairs.review_id_tw], by_id.loc[pairs.review_id_cn]
    assert (tw.variety == "tw").all() and (cn.variety == "cn").all()
    for column in ("hotel_id", "rating_class", "length_bin"):
        assert (tw[column].to_numpy() == cn[column].to_numpy()).all()
        assert (pairs[column].to_numpy() == tw[column].to_numpy()).all()
    used = pd.concat([pairs.review_id_tw, pairs.review_id_cn])
    assert used.is_unique
    assert (tw.tokens <= 500).all() and (cn.tokens <= 500).all()
    assert len(pairs) == _maximum_matching(frame)
    assert pairs.pair_id.tolist() == list(range(len(pairs)))


@settings(max_examples=50, deadline=None)
@given(st.lists(review, min_size=1, max_size=60), st.integers(0, 2**32), st.randoms(use_true_random=False))
def test_the_pairs_depend_on_the_seed_not_on_the_row_order(rows, seed, random):
    frame = _frame(rows)
    order = list(range(len(frame)))
    random.shuffle(order)
    pd.testing.assert_frame_equal(pair_reviews(frame, seed=seed), pair_reviews(frame.iloc[order], seed=seed))


def test_different_seeds_choose_different_reviews_from_a_crowded_cell():
    frame = _frame([("h1", "tw", 9, 12)] * 20 + [("h1", "cn", 9, 15)] * 3)
    choices = {tuple(sorted(pair_reviews(frame, seed=seed).review_id_tw)) for seed in range(10)}
    assert len(choices) > 1
    assert all(len(choice) == 3 for choice in choices)


def test_every_review_is_paired_or_has_one_reason():
    raw = pd.DataFrame({
        "review_id": [f"r{i}" for i in range(9)], "hotel_id": ["h1"] * 8 + ["h2"],
        "nationality": ["tw", "tw", "cn", "hk", "tw", "tw", "cn", "cn", "tw"],
        "score": [9, 9, 10, 9, 9, 2, 5, 9, 9],
        "title": ["好", "讚", "好", "好", "", "差", "还行", "好" * 30, "好"],
        "positive": [""] * 9, "negative": [""] * 9, "review_time": [None] * 9,
    })
    raw.loc[4, "title"] = ""  # r4: empty
    raw.loc[8, "title"] = "好" * 501  # r8: too long
    varieties = review_varieties(raw)
    pairs = pair_reviews(varieties, seed=1)
    unpaired = unpaired_reviews(raw, varieties, pairs).set_index("review_id")["reason"]
    paired = set(pairs.review_id_tw) | set(pairs.review_id_cn)
    assert len(pairs) == 1 and paired & set(unpaired.index) == set() and paired | set(unpaired.index) == set(raw.review_id)
    surplus = ({"r0", "r1"} - paired).pop()
    assert unpaired.to_dict() == {"r3": "unknown_variety", "r4": "empty", "r8": "over_token_limit",
                                  surplus: "surplus_in_cell", "r5": "no_counterpart_in_cell",
                                  "r6": "no_counterpart_in_cell", "r7": "no_counterpart_in_cell"}


def test_the_shipped_set_gives_twelve_pairs_and_one_of_each_unpaired_reason(tmp_path):
    raw = canonical_reviews(*read_file(str(SHIPPED_REVIEWS), tmp_path))
    varieties = review_varieties(raw)
    pairs = pair_reviews(varieties)
    assert len(pairs) == 12
    assert pairs.rating_class.value_counts().to_dict() == {"positive": 6, "neutral": 3, "negative": 3}
    assert pairs.length_group.value_counts().to_dict() == {"short": 6, "long": 6}
    assert unpaired_counts(unpaired_reviews(raw, varieties, pairs)) == {
        "empty": {"unknown": 1}, "unknown_variety": {"unknown": 3}, "over_token_limit": {"tw": 1},
        "no_counterpart_in_cell": {"cn": 1, "tw": 1}, "surplus_in_cell": {"tw": 1}}
