"""Simplified vs Traditional with the term as the unit: per-term rates paired across the two prompting scripts
(paired t and Wilcoxon over the terms) and a trial-level logistic GEE clustered by term, next to the paper's
trial-level Welch t-test; all BH-adjusted across the models of each family.

Input: `term_misalignment_by_term` (per model, lang, variant, label source, term: label counts over the trials).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sctc_assets.lib import robust, stats
from sctc_assets.lib.varieties import SIMPLIFIED, TRADITIONAL

FAMILY = ["prompt_variant", "label_source", "measure"]
KEYS = ["model", "prompt_variant", "label_source"]
TESTS = ("paper_t", "paired_t", "wilcoxon", "gee")


def _trial_outcomes(block: pd.DataFrame, measure: str) -> tuple[np.ndarray, np.ndarray]:
    """0/1 outcomes of every trial and their term, rebuilt from the per-term counts."""
    successes, trials = block[f"n_{measure}"].to_numpy(int), block["n_trials"].to_numpy(int)
    outcome = np.concatenate([np.r_[np.ones(k), np.zeros(n - k)] for k, n in zip(successes, trials)]) \
        if len(trials) else np.array([])
    terms = np.repeat(block["term_id"].to_numpy(), trials)
    return outcome, terms


def term_level_tests(by_term: pd.DataFrame) -> pd.DataFrame:
    """Per model, variant, label source and measure (correct, misaligned): S and T rates (percent), S − T with a
    95 % paired-t CI over terms, the paper's trial-level Welch t-test, the paired t and Wilcoxon tests across
    terms, the term-clustered logistic GEE (S vs T), the ICC of each script's trials within terms and the
    design effect, each p-value BH-adjusted across the models of its family."""
    rows = []
    for keys, frame in by_term.groupby(KEYS):
        langs = dict(tuple(frame.groupby("lang")))
        if not {SIMPLIFIED.code, TRADITIONAL.code} <= set(langs):
            continue
        s, t = (langs[lang].set_index("term_id").sort_index() for lang in (SIMPLIFIED.code, TRADITIONAL.code))
        common = s.index.intersection(t.index)
        s, t = s.loc[common], t.loc[common]
        for measure in ("correct", "misaligned"):
            rate_s = s[f"n_{measure}"] / s["n_trials"]
            rate_t = t[f"n_{measure}"] / t["n_trials"]
            paired = robust.paired_by_unit(rate_s * 100, rate_t * 100)
            k_s, n_s, k_t, n_t = (int(s[f"n_{measure}"].sum()), int(s["n_trials"].sum()),
                                  int(t[f"n_{measure}"].sum()), int(t["n_trials"].sum()))
            _, paper_p = stats.binary_ttest(k_s, n_s, k_t, n_t)
            out_s, terms_s = _trial_outcomes(s.reset_index(), measure)
            out_t, terms_t = _trial_outcomes(t.reset_index(), measure)
            gee = robust.gee_binary_effect(np.r_[out_s, out_t], np.r_[np.ones(len(out_s)), np.zeros(len(out_t))],
                                           np.r_[terms_s, terms_t])
            icc_s = robust.icc_anova(s[f"n_{measure}"], s["n_trials"])
            icc_t = robust.icc_anova(t[f"n_{measure}"], t["n_trials"])
            trials = float(s["n_trials"].mean())
            rows.append({
                **dict(zip(KEYS, keys)), "measure": measure, "n_terms": paired["n_units"],
                "trials_per_term": trials, "pct_s": 100 * k_s / n_s, "pct_t": 100 * k_t / n_t,
                "diff_pct_points": paired["diff"], "ci_low": paired["ci_low"], "ci_high": paired["ci_high"],
                "ci_method": "paired t over terms (95 %)", "sd_term_diff": paired["sd_diff"],
                "paper_t_p": paper_p, "paired_t": paired["paired_t"], "paired_t_p": paired["paired_t_p"],
                "wilcoxon": paired["wilcoxon"], "wilcoxon_p": paired["wilcoxon_p"],
                "gee_log_or": gee["gee_log_or"], "gee_se": gee["gee_se"], "gee_p": gee["gee_p"],
                "gee_within_corr": gee["gee_within_corr"], "icc_s": icc_s, "icc_t": icc_t,
                "design_effect": robust.design_effect(trials, np.nanmean([icc_s, icc_t])
                                                      if not (np.isnan(icc_s) and np.isnan(icc_t)) else np.nan),
            })
    if not rows:
        return pd.DataFrame()
    table = pd.DataFrame(rows)
    for test in TESTS:
        table[f"{test}_p_bh"] = np.nan
        for _, index in table.groupby(FAMILY).groups.items():
            table.loc[index, f"{test}_p_bh"] = stats.bh_adjust(table.loc[index, f"{test}_p"])
    return table.sort_values(FAMILY + ["model"]).reset_index(drop=True)


def significance_robustness(tests: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """For every model: is the paper's trial-level result (Welch t, BH) significant, and does it stay so when the
    term is the unit (paired t, Wilcoxon, GEE; each BH-adjusted the same way)?"""
    if tests.empty:
        return pd.DataFrame()
    columns = KEYS + ["measure", "diff_pct_points", "ci_low", "ci_high", "ci_method"]
    table = tests[columns].copy()
    table["paper_significant"] = [robust.survives(p, alpha) for p in tests["paper_t_p_bh"]]
    for test in ("paired_t", "wilcoxon", "gee"):
        table[f"{test}_significant"] = [robust.survives(p, alpha) for p in tests[f"{test}_p_bh"]]
    unit = table[["paired_t_significant", "wilcoxon_significant", "gee_significant"]]
    table["survives"] = np.where(table["paper_significant"] == True,  # noqa: E712  (None stays undecided)
                                 unit.eq(True).all(axis=1), None)
    table["verdict"] = [
        "not significant in the paper's test" if paper is not True
        else "survives every term-level test" if all(value is True for value in row)
        else "does not survive: " + ", ".join(name for name, value in zip(("paired t", "Wilcoxon", "GEE"), row)
                                               if value is not True)
        for paper, row in zip(table["paper_significant"], unit.itertuples(index=False))]
    return table
