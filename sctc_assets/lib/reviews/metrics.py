"""Paired comparisons of one model's predictions on Taiwan (tw) and Mainland (cn) reviews.

Every comparison keeps only the pairs in which both predictions are valid (Appendix D) and reports accuracy (%)
and MSE per side, Δ = cn − tw, McNemar's test on correctness (exact binomial p, χ² alongside), and a paired t-test
and a Wilcoxon signed-rank test on the squared errors. Each row also tests its own pairs' true scores (paired
t-test), the confound check of Section 5.

Analyses: `length` (Tables 1–2: short, long, all), `charset` (Table 9: all pairs, pairs whose reviews use only
their variety's script, and only that script plus English letters), `translation` (Table 3: each review against
its OpenCC conversion into the other variety) and `confound` (the true scores of every pair).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sctc_assets.lib import stats
from sctc_assets.lib.reviews.pairing import LENGTH_GROUPS
from sctc_assets.lib.reviews.prompts import FORMATS
from sctc_assets.lib.reviews.scripts import ENGLISH, SHARED, SIMPLIFIED, TRADITIONAL, composition_elements
from sctc_assets.lib.varieties import MAINLAND, TAIWAN

PRIMARY_SCRIPT = {TAIWAN.code: TRADITIONAL, MAINLAND.code: SIMPLIFIED}
# `all` as in the length analysis (the paper's Table 9 writes "All").
CHARSETS = ("all", "Chinese", "Chinese+English")
METRIC_COLUMNS = [
    "format", "analysis", "subset", "n_pairs", "n_excluded",
    "acc_tw", "acc_cn", "delta_acc", "only_tw_correct", "only_cn_correct", "mcnemar_chi2", "mcnemar_p", "sig_acc",
    "mse_tw", "mse_cn", "delta_mse", "ttest_t", "ttest_p", "sig_mse", "wilcoxon_w", "wilcoxon_p", "sig_wilcoxon",
    "true_mean_tw", "true_mean_cn", "true_t", "true_p",
]
# Counts are integers; nullable where a row has none to give (no valid pair, the confound check).
COUNT_COLUMNS = ("n_pairs", "n_excluded", "only_tw_correct", "only_cn_correct")


def compare(truth_tw, pred_tw, truth_cn, pred_cn) -> dict:
    """The paired statistics of one set of pairs; predictions that are NaN (invalid) drop their pair."""
    truth_tw, pred_tw, truth_cn, pred_cn = (np.asarray(values, dtype=float)
                                            for values in (truth_tw, pred_tw, truth_cn, pred_cn))
    valid = ~np.isnan(pred_tw) & ~np.isnan(pred_cn)
    truth_tw, pred_tw, truth_cn, pred_cn = truth_tw[valid], pred_tw[valid], truth_cn[valid], pred_cn[valid]
    row = {"n_pairs": int(valid.sum()), "n_excluded": int((~valid).sum()), **true_score_check(truth_tw, truth_cn)}
    if not row["n_pairs"]:
        return row
    correct_tw, correct_cn = pred_tw == truth_tw, pred_cn == truth_cn
    error_tw, error_cn = (pred_tw - truth_tw) ** 2, (pred_cn - truth_cn) ** 2
    only_tw, only_cn = int((correct_tw & ~correct_cn).sum()), int((correct_cn & ~correct_tw).sum())
    chi2, _, mcnemar_p = stats.mcnemar(only_tw, only_cn)
    t, t_p = stats.paired_ttest(error_cn, error_tw)
    w, w_p = stats.wilcoxon_signed_rank(error_cn, error_tw)
    row.update(
        acc_tw=100 * correct_tw.mean(), acc_cn=100 * correct_cn.mean(),
        delta_acc=100 * (correct_cn.mean() - correct_tw.mean()), only_tw_correct=only_tw, only_cn_correct=only_cn,
        mcnemar_chi2=chi2, mcnemar_p=mcnemar_p, sig_acc=stats.sig_stars(mcnemar_p, no_ns=True),
        mse_tw=error_tw.mean(), mse_cn=error_cn.mean(), delta_mse=error_cn.mean() - error_tw.mean(),
        ttest_t=t, ttest_p=t_p, sig_mse=stats.sig_stars(t_p, no_ns=True),
        wilcoxon_w=w, wilcoxon_p=w_p, sig_wilcoxon=stats.sig_stars(w_p, no_ns=True),
    )
    return row


def true_score_check(truth_tw, truth_cn) -> dict:
    """Whether the two sides' true scores differ (paired t-test, cn − tw): a difference would confound the gap."""
    truth_tw, truth_cn = np.asarray(truth_tw, dtype=float), np.asarray(truth_cn, dtype=float)
    t, p = stats.paired_ttest(truth_cn, truth_tw)
    return {"true_mean_tw": float(truth_tw.mean()) if len(truth_tw) else math.nan,
            "true_mean_cn": float(truth_cn.mean()) if len(truth_cn) else math.nan, "true_t": t, "true_p": p}


def charset_mask(compositions_tw: pd.Series, compositions_cn: pd.Series, charset: str) -> pd.Series:
    """Pairs whose two reviews both use only their variety's script (Shared Chinese counts as either), plus
    English letters for `Chinese+English` (which then must contain some)."""
    if charset == "all":
        return pd.Series(True, index=compositions_tw.index)

    def allowed(labels: pd.Series, variety: str) -> pd.Series:
        scripts = (PRIMARY_SCRIPT[variety], SHARED)
        wanted = ({frozenset({script}) for script in scripts} if charset == "Chinese"
                  else {frozenset({script, ENGLISH}) for script in scripts})
        return labels.map(lambda label: composition_elements(label) in wanted)

    return allowed(compositions_tw, "tw") & allowed(compositions_cn, "cn")


def _predictions_by_review(predictions: pd.DataFrame, version: str) -> pd.Series:
    chosen = predictions[predictions["version"] == version]
    return chosen.set_index("review_id")["prediction"].astype("Float64").astype(float)


def format_metrics(fmt: str, predictions: pd.DataFrame, pairs: pd.DataFrame, compositions: pd.Series) -> list[dict]:
    """All analyses of one format. `predictions` holds that format's rows (`review_id`, `version`, `prediction`,
    NaN when invalid); pairs without a prediction on both sides (a reduced run) are not part of any analysis."""
    original = _predictions_by_review(predictions, "original")
    asked = pairs[pairs["review_id_tw"].isin(original.index) & pairs["review_id_cn"].isin(original.index)]
    pred_tw, pred_cn = asked["review_id_tw"].map(original), asked["review_id_cn"].map(original)
    rows = []

    def add(analysis: str, subset: str, mask: pd.Series) -> None:
        rows.append({"format": fmt, "analysis": analysis, "subset": subset,
                     **compare(asked.loc[mask, "score_tw"], pred_tw[mask], asked.loc[mask, "score_cn"], pred_cn[mask])})

    for group in LENGTH_GROUPS:
        add("length", group, asked["length_group"] == group if group != "all" else pd.Series(True, index=asked.index))
    for charset in CHARSETS:
        add("charset", charset, charset_mask(asked["review_id_tw"].map(compositions),
                                             asked["review_id_cn"].map(compositions), charset))
    converted = _predictions_by_review(predictions, "converted")
    if not converted.empty:
        for origin, other in (("tw", "cn"), ("cn", "tw")):
            ids = asked[f"review_id_{origin}"]
            truth = asked[f"score_{origin}"]
            texts = {origin: ids.map(original), other: ids.map(converted)}
            rows.append({"format": fmt, "analysis": "translation", "subset": f"original {origin}",
                         **compare(truth, texts["tw"], truth, texts["cn"])})
    return rows


def review_metrics(predictions: pd.DataFrame, pairs: pd.DataFrame, varieties: pd.DataFrame) -> pd.DataFrame:
    """The metric table of one model: every analysis of every format it has predictions for, then the
    confound check over all pairs."""
    compositions = varieties.set_index("review_id")["script_composition"]
    rows = []
    for fmt in FORMATS if not predictions.empty else ():
        chosen = predictions[predictions["format"] == fmt]
        if not chosen.empty:
            rows += format_metrics(fmt, chosen, pairs, compositions)
    # The confound check looks at true scores only: no prediction, so no pair is excluded.
    rows.append({"format": "", "analysis": "confound", "subset": "all pairs", "n_pairs": len(pairs), "n_excluded": 0,
                 **true_score_check(pairs["score_tw"], pairs["score_cn"])})
    table = pd.DataFrame(rows).reindex(columns=METRIC_COLUMNS)
    return table.astype({column: "Int64" for column in COUNT_COLUMNS})
