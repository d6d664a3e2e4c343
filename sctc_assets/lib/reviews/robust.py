"""Paired intervals for the review benchmark's ΔAcc and ΔMSE (second − first variety of the pair; the paper's
cn − tw), over the pairs whose two predictions
are valid: the paired-t interval of the per-pair differences and a seeded percentile bootstrap over pairs; the
paper's tests (McNemar exact for accuracy, paired t for MSE) BH-adjusted across models × formats; power."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sctc_assets.lib import power, robust, stats
from sctc_assets.lib.reviews.metrics import _predictions_by_review
from sctc_assets.lib.reviews.pairing import pair_of


def paired_differences(predictions: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """Per asked pair with both predictions valid (original texts): correctness and squared error per side, `_a`
    the pair's first variety and `_b` its second."""
    a, b = pair_of(pairs).suffixes
    original = _predictions_by_review(predictions, "original")
    asked = pairs[pairs[f"review_id_{a}"].isin(original.index) & pairs[f"review_id_{b}"].isin(original.index)]
    pred_a = asked[f"review_id_{a}"].map(original).to_numpy(float)
    pred_b = asked[f"review_id_{b}"].map(original).to_numpy(float)
    valid = ~np.isnan(pred_a) & ~np.isnan(pred_b)
    truth_a, truth_b = asked[f"score_{a}"].to_numpy(float)[valid], asked[f"score_{b}"].to_numpy(float)[valid]
    pred_a, pred_b = pred_a[valid], pred_b[valid]
    return pd.DataFrame({"correct_a": (pred_a == truth_a).astype(float), "correct_b": (pred_b == truth_b).astype(float),
                         "sq_error_a": (pred_a - truth_a) ** 2, "sq_error_b": (pred_b - truth_b) ** 2})


def paired_cis(differences: pd.DataFrame, *, effect_acc: float = 5.0) -> list[dict]:
    rows = []
    for measure, scale, first, second in (("delta_acc", 100.0, "correct_b", "correct_a"),
                                          ("delta_mse", 1.0, "sq_error_b", "sq_error_a")):
        x, y = differences[first].to_numpy() * scale, differences[second].to_numpy() * scale
        paired = robust.paired_by_unit(x, y)
        diff = x - y
        low, high, _ = robust.bootstrap_ci(diff, lambda idx: float(diff[idx].mean())) if len(diff) else (np.nan,) * 3
        if measure == "delta_acc":
            only_a = int(((differences["correct_a"] == 1) & (differences["correct_b"] == 0)).sum())
            only_b = int(((differences["correct_b"] == 1) & (differences["correct_a"] == 0)).sum())
            # no pairs with two answers (every call failed): no test, not McNemar's p = 1 of 0 vs 0
            paper_p = stats.mcnemar(only_a, only_b)[2] if len(differences) else np.nan
            paper_test = "McNemar exact"
        else:
            paper_p, paper_test = paired["paired_t_p"], "paired t"
        rows.append({"measure": measure, "n_pairs": paired["n_units"], "estimate": paired["diff"],
                     "ci_low": paired["ci_low"], "ci_high": paired["ci_high"], "ci_method": "paired t (95 %)",
                     "bootstrap_ci_low": low, "bootstrap_ci_high": high,
                     "bootstrap_method": f"percentile bootstrap over pairs ({robust.BOOTSTRAP_REPLICATES}, seed "
                                         f"{robust.BOOTSTRAP_SEED})",
                     "paper_test": paper_test, "paper_p": paper_p, "wilcoxon_p": paired["wilcoxon_p"],
                     "mde_paired": power.mde_paired(paired["n_units"], paired["sd_diff"]),
                     "pairs_needed": (power.units_needed_paired(effect_acc, paired["sd_diff"])
                                      if measure == "delta_acc" else np.nan)})
    return rows


def with_bh(table: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    if table.empty:
        return table
    table = table.copy()
    table["paper_p_bh"] = np.nan
    for _, index in table.groupby("measure").groups.items():
        table.loc[index, "paper_p_bh"] = stats.bh_adjust(table.loc[index, "paper_p"])
    table["paper_significant"] = [robust.survives(p, alpha) for p in table["paper_p_bh"]]
    table["ci_excludes_0"] = [None if np.isnan(low) else bool(low > 0 or high < 0)
                              for low, high in zip(table["ci_low"], table["ci_high"])]
    table["survives"] = [None if paper is not True else bool(ci)
                         for paper, ci in zip(table["paper_significant"], table["ci_excludes_0"])]
    return table
