"""Paired comparisons of one model's predictions on the reviews of the pair's two varieties (the paper's: Taiwan
(tw) and Mainland (cn)).

Every comparison keeps only the pairs in which both predictions are valid (Appendix D) and reports accuracy (%)
and MSE per side, Δ = second − first (the paper's cn − tw), McNemar's test on correctness (exact binomial p, χ²
alongside), and a paired t-test and a Wilcoxon signed-rank test on the squared errors. Each row also tests its
own pairs' true scores (paired t-test), the confound check of Section 5.

Analyses: `length` (Tables 1–2: short, long, all), `charset` (Table 9: all pairs, pairs whose reviews use only
their variety's script, and only that script plus English letters), `translation` (Table 3: each review against
its OpenCC conversion into the other variety) and `confound` (the true scores of every pair). `charset` and
`translation` exist for a pair of Chinese varieties only (they ask for each variety's script, and OpenCC).

Per-side columns end in the varieties' suffixes (`acc_tw`, `acc_cn` for the paper's pair; `metric_columns`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sctc_assets.lib import stats
from sctc_assets.lib.reviews.pairing import LENGTH_GROUPS, pair_of
from sctc_assets.lib.reviews.prompts import FORMATS
from sctc_assets.lib.reviews.scripts import ENGLISH, SHARED, SIMPLIFIED, TRADITIONAL, composition_elements
from sctc_assets.lib.reviews.varieties import VarietyPair, variety_pair
from sctc_assets.lib.varieties import MAINLAND, TAIWAN

PRIMARY_SCRIPT = {TAIWAN.code: TRADITIONAL, MAINLAND.code: SIMPLIFIED}
# `all` as in the length analysis (the paper's Table 9 writes "All").
CHARSETS = ("all", "Chinese", "Chinese+English")
PAPER_SUFFIXES = variety_pair().suffixes


def metric_columns(suffixes: tuple[str, str] = PAPER_SUFFIXES) -> list[str]:
    """The metric table's columns, per-side ones named by the pair's suffixes."""
    a, b = suffixes
    return [
        "format", "analysis", "subset", "n_pairs", "n_excluded",
        f"acc_{a}", f"acc_{b}", "delta_acc", f"only_{a}_correct", f"only_{b}_correct", "mcnemar_chi2", "mcnemar_p",
        "sig_acc", f"mse_{a}", f"mse_{b}", "delta_mse", "ttest_t", "ttest_p", "sig_mse", "wilcoxon_w", "wilcoxon_p",
        "sig_wilcoxon", f"true_mean_{a}", f"true_mean_{b}", "true_t", "true_p",
    ]


def count_columns(suffixes: tuple[str, str] = PAPER_SUFFIXES) -> tuple[str, ...]:
    """Counts are integers; nullable where a row has none to give (no valid pair, the confound check)."""
    return ("n_pairs", "n_excluded", *(f"only_{suffix}_correct" for suffix in suffixes))


METRIC_COLUMNS = metric_columns()
COUNT_COLUMNS = count_columns()


def compare(truth_a, pred_a, truth_b, pred_b, suffixes: tuple[str, str] = PAPER_SUFFIXES) -> dict:
    """The paired statistics of one set of pairs (Δ = b − a); predictions that are NaN (invalid) drop their pair."""
    a, b = suffixes
    truth_a, pred_a, truth_b, pred_b = (np.asarray(values, dtype=float)
                                        for values in (truth_a, pred_a, truth_b, pred_b))
    valid = ~np.isnan(pred_a) & ~np.isnan(pred_b)
    truth_a, pred_a, truth_b, pred_b = truth_a[valid], pred_a[valid], truth_b[valid], pred_b[valid]
    row = {"n_pairs": int(valid.sum()), "n_excluded": int((~valid).sum()),
           **true_score_check(truth_a, truth_b, suffixes)}
    if not row["n_pairs"]:
        return row
    correct_a, correct_b = pred_a == truth_a, pred_b == truth_b
    error_a, error_b = (pred_a - truth_a) ** 2, (pred_b - truth_b) ** 2
    only_a, only_b = int((correct_a & ~correct_b).sum()), int((correct_b & ~correct_a).sum())
    chi2, _, mcnemar_p = stats.mcnemar(only_a, only_b)
    t, t_p = stats.paired_ttest(error_b, error_a)
    w, w_p = stats.wilcoxon_signed_rank(error_b, error_a)
    row.update({
        f"acc_{a}": 100 * correct_a.mean(), f"acc_{b}": 100 * correct_b.mean(),
        "delta_acc": 100 * (correct_b.mean() - correct_a.mean()), f"only_{a}_correct": only_a,
        f"only_{b}_correct": only_b, "mcnemar_chi2": chi2, "mcnemar_p": mcnemar_p,
        "sig_acc": stats.sig_stars(mcnemar_p, no_ns=True),
        f"mse_{a}": error_a.mean(), f"mse_{b}": error_b.mean(), "delta_mse": error_b.mean() - error_a.mean(),
        "ttest_t": t, "ttest_p": t_p, "sig_mse": stats.sig_stars(t_p, no_ns=True),
        "wilcoxon_w": w, "wilcoxon_p": w_p, "sig_wilcoxon": stats.sig_stars(w_p, no_ns=True),
    })
    return row


def true_score_check(truth_a, truth_b, suffixes: tuple[str, str] = PAPER_SUFFIXES) -> dict:
    """Whether the two sides' true scores differ (paired t-test, b − a): a difference would confound the gap."""
    a, b = suffixes
    truth_a, truth_b = np.asarray(truth_a, dtype=float), np.asarray(truth_b, dtype=float)
    t, p = stats.paired_ttest(truth_b, truth_a)
    return {f"true_mean_{a}": float(truth_a.mean()) if len(truth_a) else math.nan,
            f"true_mean_{b}": float(truth_b.mean()) if len(truth_b) else math.nan, "true_t": t, "true_p": p}


def charset_mask(compositions_a: pd.Series, compositions_b: pd.Series, charset: str,
                 pair: VarietyPair | None = None) -> pd.Series:
    """Pairs whose two reviews both use only their variety's script (Shared Chinese counts as either), plus
    English letters for `Chinese+English` (which then must contain some); a Chinese pair's analysis."""
    if charset == "all":
        return pd.Series(True, index=compositions_a.index)

    def allowed(labels: pd.Series, variety: str) -> pd.Series:
        scripts = (PRIMARY_SCRIPT[variety], SHARED)
        wanted = ({frozenset({script}) for script in scripts} if charset == "Chinese"
                  else {frozenset({script, ENGLISH}) for script in scripts})
        return labels.map(lambda label: composition_elements(label) in wanted)

    first, second = (pair or variety_pair()).codes
    return allowed(compositions_a, first) & allowed(compositions_b, second)


def _predictions_by_review(predictions: pd.DataFrame, version: str) -> pd.Series:
    chosen = predictions[predictions["version"] == version]
    return chosen.set_index("review_id")["prediction"].astype("Float64").astype(float)


def format_metrics(fmt: str, predictions: pd.DataFrame, pairs: pd.DataFrame, compositions: pd.Series) -> list[dict]:
    """All analyses of one format. `predictions` holds that format's rows (`review_id`, `version`, `prediction`,
    NaN when invalid); pairs without a prediction on both sides (a reduced run) are not part of any analysis."""
    pair = pair_of(pairs)
    a, b = suffixes = pair.suffixes
    original = _predictions_by_review(predictions, "original")
    asked = pairs[pairs[f"review_id_{a}"].isin(original.index) & pairs[f"review_id_{b}"].isin(original.index)]
    pred_a, pred_b = asked[f"review_id_{a}"].map(original), asked[f"review_id_{b}"].map(original)
    rows = []

    def add(analysis: str, subset: str, mask: pd.Series) -> None:
        rows.append({"format": fmt, "analysis": analysis, "subset": subset,
                     **compare(asked.loc[mask, f"score_{a}"], pred_a[mask], asked.loc[mask, f"score_{b}"],
                               pred_b[mask], suffixes)})

    for group in LENGTH_GROUPS:
        add("length", group, asked["length_group"] == group if group != "all" else pd.Series(True, index=asked.index))
    for charset in CHARSETS if pair.chinese else ():
        add("charset", charset, charset_mask(asked[f"review_id_{a}"].map(compositions),
                                             asked[f"review_id_{b}"].map(compositions), charset, pair))
    converted = _predictions_by_review(predictions, "converted")
    if not converted.empty:
        for origin, other in ((pair.first, pair.second), (pair.second, pair.first)):
            ids = asked[f"review_id_{origin.suffix}"]
            truth = asked[f"score_{origin.suffix}"]
            texts = {origin.code: ids.map(original), other.code: ids.map(converted)}
            rows.append({"format": fmt, "analysis": "translation", "subset": f"original {origin.code}",
                         **compare(truth, texts[pair.first.code], truth, texts[pair.second.code], suffixes)})
    return rows


def review_metrics(predictions: pd.DataFrame, pairs: pd.DataFrame, varieties: pd.DataFrame) -> pd.DataFrame:
    """The metric table of one model: every analysis of every format it has predictions for, then the
    confound check over all pairs."""
    compositions = varieties.set_index("review_id")["script_composition"]
    a, b = suffixes = pair_of(pairs).suffixes
    rows = []
    for fmt in FORMATS if not predictions.empty else ():
        chosen = predictions[predictions["format"] == fmt]
        if not chosen.empty:
            rows += format_metrics(fmt, chosen, pairs, compositions)
    # The confound check looks at true scores only: no prediction, so no pair is excluded.
    rows.append({"format": "", "analysis": "confound", "subset": "all pairs", "n_pairs": len(pairs), "n_excluded": 0,
                 **true_score_check(pairs[f"score_{a}"], pairs[f"score_{b}"], suffixes)})
    table = pd.DataFrame(rows).reindex(columns=metric_columns(suffixes))
    return table.astype({column: "Int64" for column in count_columns(suffixes)})
