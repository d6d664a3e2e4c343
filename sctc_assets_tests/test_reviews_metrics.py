"""The paired metrics against values worked out by hand on a seven-pair table (one pair has an invalid answer)."""

from __future__ import annotations

import itertools
import math

import pandas as pd
import pytest
from scipy import stats as scipy_stats

from sctc_assets.lib.reviews.metrics import METRIC_COLUMNS, review_metrics

# pair: true tw, answer tw, true cn, answer cn, length group, composition tw, composition cn
TABLE = [
    (9, 9, 10, 8, "short", "Only Traditional", "Only Simplified"),
    (8, 5, 8, 8, "short", "Only Shared Chinese", "Only Shared Chinese"),
    (2, 3, 3, 3, "short", "Traditional + English", "Simplified + English"),
    (6, 6, 5, 10, "long", "Traditional + Emoji", "Only Simplified"),
    (10, 6, 9, 9, "long", "Only Traditional", "Traditional + Simplified"),
    (7, None, 7, 7, "short", "Only Traditional", "Only Simplified"),   # invalid: excluded on both sides
    (4, 10, 4, 4, "long", "Only Traditional", "Only Simplified"),
]
# Answers to the OpenCC-converted Taiwan reviews (Mainland ones: the same as their originals).
CONVERTED_TW = [9, 8, None, 5, 10, 7, 4]


def _inputs():
    pairs = pd.DataFrame([{"pair_id": i, "review_id_tw": f"t{i}", "review_id_cn": f"c{i}", "score_tw": row[0],
                           "score_cn": row[2], "length_group": row[4]} for i, row in enumerate(TABLE)])
    varieties = pd.DataFrame([{"review_id": f"{side}{i}", "script_composition": row[5 if side == "t" else 6]}
                              for i, row in enumerate(TABLE) for side in "tc"])
    predictions = []
    for fmt in ("structured", "plain"):
        for i, row in enumerate(TABLE):
            predictions += [
                {"format": fmt, "review_id": f"t{i}", "version": "original", "prediction": row[1]},
                {"format": fmt, "review_id": f"c{i}", "version": "original", "prediction": row[3]},
                {"format": fmt, "review_id": f"t{i}", "version": "converted", "prediction": CONVERTED_TW[i]},
                {"format": fmt, "review_id": f"c{i}", "version": "converted", "prediction": row[3]},
            ]
    frame = pd.DataFrame(predictions)
    frame["prediction"] = frame["prediction"].astype("Int64")
    return frame, pairs, varieties


@pytest.fixture(scope="module")
def table():
    return review_metrics(*_inputs())


def _row(table, analysis, subset, fmt="structured"):
    found = table[(table.format == fmt) & (table.analysis == analysis) & (table.subset == subset)]
    assert len(found) == 1
    return found.iloc[0]


def test_accuracy_mse_and_their_tests_by_hand(table):
    row = _row(table, "length", "all")
    assert list(table.columns) == METRIC_COLUMNS
    assert (row.n_pairs, row.n_excluded) == (6, 1)
    # correct: tw in pairs 0 and 3 (2/6), cn in pairs 1, 2, 4 and 6 (4/6)
    assert row.acc_tw == pytest.approx(100 * 2 / 6) and row.acc_cn == pytest.approx(100 * 4 / 6)
    assert row.delta_acc == pytest.approx(100 * 2 / 6)
    assert (row.only_tw_correct, row.only_cn_correct) == (2, 4)
    # McNemar: exact two-sided binomial p = 2·P(X ≤ 2 | 6, ½) = 2·(1 + 6 + 15)/64; χ² = (2 − 4)²/6
    assert row.mcnemar_p == pytest.approx(44 / 64) and row.mcnemar_chi2 == pytest.approx(4 / 6)
    # squared errors tw 0, 9, 1, 0, 16, 36 and cn 4, 0, 0, 25, 0, 0
    assert row.mse_tw == pytest.approx(62 / 6) and row.mse_cn == pytest.approx(29 / 6)
    assert row.delta_mse == pytest.approx(-33 / 6)
    differences = [4, -9, -1, 25, -16, -36]
    mean = sum(differences) / 6
    sd = math.sqrt(sum((d - mean) ** 2 for d in differences) / 5)
    t = mean / (sd / math.sqrt(6))
    assert row.ttest_t == pytest.approx(t) and row.ttest_p == pytest.approx(2 * scipy_stats.t.sf(abs(t), 5))
    # Wilcoxon: |d| ranks 1 (−1), 2 (+4), 3 (−9), 4 (−16), 5 (+25), 6 (−36): W+ = 7, W− = 14; exact p counts the
    # sign patterns whose positive rank sum is at most 7
    assert row.wilcoxon_w == 7
    at_most = sum(1 for k in range(7) for subset in itertools.combinations(range(1, 7), k) if sum(subset) <= 7)
    assert row.wilcoxon_p == pytest.approx(2 * at_most / 64)
    assert (row.sig_acc, row.sig_mse, row.sig_wilcoxon) == ("", "", "")
    # true scores: tw 9 8 2 6 10 4, cn 10 8 3 5 9 4 → differences 1 0 1 −1 −1 0, mean 0
    assert (row.true_mean_tw, row.true_mean_cn, row.true_t, row.true_p) == (6.5, 6.5, 0.0, 1.0)


def test_length_groups_and_character_sets_select_their_pairs(table):
    short = _row(table, "length", "short")
    assert (short.n_pairs, short.n_excluded, short.acc_tw, short.acc_cn) == (3, 1, pytest.approx(100 / 3),
                                                                            pytest.approx(200 / 3))
    long = _row(table, "length", "long")
    assert (long.n_pairs, long.n_excluded) == (3, 0)
    assert long.mse_tw == pytest.approx((0 + 16 + 36) / 3) and long.mse_cn == pytest.approx(25 / 3)
    # Chinese only: pairs 0, 1 (shared characters count as either script) and 6; pair 5 is invalid
    chinese = _row(table, "charset", "Chinese")
    assert (chinese.n_pairs, chinese.n_excluded) == (3, 1)
    assert chinese.acc_tw == pytest.approx(100 / 3) and chinese.acc_cn == pytest.approx(200 / 3)
    mixed = _row(table, "charset", "Chinese+English")
    assert (mixed.n_pairs, mixed.acc_tw, mixed.acc_cn, mixed.mse_tw, mixed.mse_cn) == (1, 0.0, 100.0, 1.0, 0.0)
    assert _row(table, "charset", "all").n_pairs == 6


def test_the_translation_control_compares_each_review_with_its_conversion(table):
    tw = _row(table, "translation", "original tw")
    # valid originals and conversions: pairs 0, 1, 3, 4, 6; truth 9 8 6 10 4, original 9 5 6 6 10, converted 9 8 5 10 4
    assert (tw.n_pairs, tw.n_excluded) == (5, 2)
    assert tw.acc_tw == pytest.approx(40.0) and tw.acc_cn == pytest.approx(80.0)
    assert tw.mse_tw == pytest.approx((0 + 9 + 0 + 16 + 36) / 5) and tw.mse_cn == pytest.approx(1 / 5)
    assert (tw.only_tw_correct, tw.only_cn_correct) == (1, 3)  # pair 3 only as written; 1, 4, 6 only converted
    cn = _row(table, "translation", "original cn")
    assert (cn.n_pairs, cn.delta_acc, cn.delta_mse, cn.mcnemar_p, cn.ttest_p) == (7, 0.0, 0.0, 1.0, 1.0)


def test_every_format_is_analysed_and_the_confound_check_covers_every_pair(table):
    assert list(table.format.unique()) == ["structured", "plain", ""]
    pd.testing.assert_frame_equal(
        table[table.format == "plain"].drop(columns="format").reset_index(drop=True),
        table[table.format == "structured"].drop(columns="format").reset_index(drop=True))
    confound = _row(table, "confound", "all pairs", fmt="")
    assert confound.n_pairs == 7 and confound.true_mean_tw == pytest.approx(46 / 7)
    t, p = scipy_stats.ttest_rel([10, 8, 3, 5, 9, 7, 4], [9, 8, 2, 6, 10, 7, 4])
    assert (confound.true_t, confound.true_p) == (pytest.approx(t), pytest.approx(p))


def test_no_predictions_leave_only_the_confound_check():
    _, pairs, varieties = _inputs()
    table = review_metrics(pd.DataFrame(), pairs, varieties)
    assert table.analysis.tolist() == ["confound"]


def test_the_paired_tests_decide_their_degenerate_cases():
    from sctc_assets.lib import stats

    assert stats.paired_ttest([1, 2, 3], [1, 2, 3]) == (0.0, 1.0)
    assert stats.paired_ttest([2, 3, 4], [1, 2, 3]) == (math.inf, 0.0)
    assert all(math.isnan(value) for value in stats.paired_ttest([1], [2]))
    assert stats.wilcoxon_signed_rank([1, 2], [1, 2]) == (0.0, 1.0)
    assert all(math.isnan(value) for value in stats.wilcoxon_signed_rank([], []))
    with pytest.raises(ValueError, match="differ in length"):
        stats.paired_ttest([1, 2], [1])
