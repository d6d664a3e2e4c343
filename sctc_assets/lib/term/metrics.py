"""Metric tables of the regional term task, computed from the long label table.

Label table columns: model, lang, prompt_variant, term_id, trial, label_source, label, outcome. A refusal is
labelled incorrect (as the paper counts it) and counted on its own as `n_refusal` (included in `n_incorrect`).
Every count column is an integer; an empty input gives an empty table with the columns.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sctc_assets.lib import stats
from sctc_assets.lib.varieties import SIMPLIFIED, TRADITIONAL

RATE_COLUMNS = ["model", "lang", "prompt_variant", "label_source", "subset", "n",
                "pct_correct", "pct_misaligned", "pct_incorrect", "n_correct", "n_misaligned", "n_incorrect",
                "n_refusal"]
SUBSET_ALL = "all"
SUBSET_NO_GPT = "no_gpt_definitions"
RATE_KEYS = ["model", "lang", "prompt_variant", "label_source"]


def subset_term_ids(terms: pd.DataFrame) -> dict[str, set[int]]:
    """`all`, and `no_gpt_definitions` (Figure 5: terms whose definition did not come from GPT-4)."""
    return {
        SUBSET_ALL: set(terms["term_id"]),
        SUBSET_NO_GPT: set(terms.loc[terms["definition_source"] != "gpt", "term_id"]),
    }


def _label_counts(labels: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    counts = labels.groupby(keys + ["label"]).size().unstack("label", fill_value=0)
    for label in ("correct", "misaligned", "incorrect"):
        if label not in counts.columns:
            counts[label] = 0
    counts = counts[["correct", "misaligned", "incorrect"]]
    # Tables written before the `outcome` column have no refusals to count.
    refused = (labels["outcome"] == "refusal").fillna(False).astype(int) if "outcome" in labels.columns \
        else pd.Series(0, index=labels.index)
    counts["refusal"] = refused.groupby([labels[key] for key in keys]).sum().reindex(counts.index, fill_value=0)
    counts = counts.astype("int64").reset_index()
    counts.columns.name = None
    counts["n"] = counts[["correct", "misaligned", "incorrect"]].sum(axis=1)
    return counts


def empty_rates() -> pd.DataFrame:
    """The rate table of no labels, with its columns typed."""
    return pd.DataFrame({column: pd.Series(dtype="int64" if column.startswith("n") or column == "prompt_variant"
                                           else "float64" if column.startswith("pct_") else object)
                         for column in RATE_COLUMNS})


def choice_rates(labels: pd.DataFrame, subsets: dict[str, set[int]]) -> pd.DataFrame:
    """Percentages (0–100) of correct, misaligned and incorrect labels per model, lang, variant, source, subset."""
    frames = []
    for subset, term_ids in subsets.items():
        selected = labels[labels["term_id"].isin(term_ids)]
        if selected.empty:
            continue
        counts = _label_counts(selected, RATE_KEYS)
        counts["subset"] = subset
        for label in ("correct", "misaligned", "incorrect"):
            counts[f"pct_{label}"] = counts[label] / counts["n"] * 100
            counts[f"n_{label}"] = counts[label]
        counts["n_refusal"] = counts["refusal"]
        frames.append(counts)
    if not frames:
        return empty_rates()
    rates = pd.concat(frames, ignore_index=True)
    return rates[RATE_COLUMNS].sort_values(RATE_KEYS + ["subset"]).reset_index(drop=True)


def choice_tests(rates: pd.DataFrame) -> pd.DataFrame:
    """Simplified vs Traditional tests on the correct and the misaligned share, BH-corrected across models.

    Input: the rate table (with its counts). Per model, prompt variant, label source, subset and measure: Welch's
    t-test on the 0/1 outcomes (the paper's t-test), the pooled two-proportion z-test, Wilson 95 % intervals, the
    difference in percentage points and Cohen's h. BH adjustment runs over the models of each
    (variant, source, subset, measure) family, separately for each test.
    """
    keys = ["model", "prompt_variant", "label_source", "subset"]
    rows = []
    for group, frame in (rates.groupby(keys) if not rates.empty else ()):
        by_lang = frame.set_index("lang")
        if not {SIMPLIFIED.code, TRADITIONAL.code} <= set(by_lang.index):
            continue
        s, t = by_lang.loc[SIMPLIFIED.code], by_lang.loc[TRADITIONAL.code]
        for measure in ("correct", "misaligned"):
            k_s, n_s, k_t, n_t = int(s[f"n_{measure}"]), int(s["n"]), int(t[f"n_{measure}"]), int(t["n"])
            p_s, p_t = k_s / n_s, k_t / n_t
            t_stat, t_p = stats.binary_ttest(k_s, n_s, k_t, n_t)
            z_stat, z_p = stats.two_proportion_ztest(k_s, n_s, k_t, n_t)
            low_s, high_s = stats.wilson_ci(k_s, n_s)
            low_t, high_t = stats.wilson_ci(k_t, n_t)
            rows.append({
                **dict(zip(keys, group)), "measure": measure,
                "n_s": n_s, "k_s": k_s, "pct_s": p_s * 100, "ci_low_s": low_s * 100, "ci_high_s": high_s * 100,
                "n_t": n_t, "k_t": k_t, "pct_t": p_t * 100, "ci_low_t": low_t * 100, "ci_high_t": high_t * 100,
                "diff_pct_points": (p_s - p_t) * 100, "cohens_h": stats.cohens_h(p_s, p_t),
                "t_stat": t_stat, "t_p": t_p, "z_stat": z_stat, "z_p": z_p,
            })
    columns = keys + ["measure", "n_s", "k_s", "pct_s", "ci_low_s", "ci_high_s", "n_t", "k_t", "pct_t",
                      "ci_low_t", "ci_high_t", "diff_pct_points", "cohens_h", "t_stat", "t_p", "z_stat", "z_p",
                      "t_p_bh", "z_p_bh", "sig_t_bh", "sig_z_bh"]
    if not rows:
        return pd.DataFrame(columns=columns)
    tests = pd.DataFrame(rows)
    family = ["prompt_variant", "label_source", "subset", "measure"]
    for test in ("t", "z"):
        tests[f"{test}_p_bh"] = np.nan
        for _, index in tests.groupby(family).groups.items():
            tests.loc[index, f"{test}_p_bh"] = stats.bh_adjust(tests.loc[index, f"{test}_p"])
        tests[f"sig_{test}_bh"] = [stats.sig_stars(p) for p in tests[f"{test}_p_bh"]]
    return tests[columns].sort_values(family + ["model"]).reset_index(drop=True)


def variant_correlations(rates: pd.DataFrame) -> pd.DataFrame:
    """Pearson correlations of the rates across prompt variants and subsets (paper Appendix B.1 and A.8).

    Each point is one (model, lang) bar of the figure; only pairs present on both sides count. `pearson_r` uses
    the exact rates; `pearson_r_printed` the rates rounded to 2 decimals as the authors' scripts print them,
    which is what the paper's coefficients were computed from (0.997 vs 0.996 for Figure 5's incorrect share).
    """
    rows = []
    measures = ("pct_correct", "pct_misaligned", "pct_incorrect")
    for label_source, frame in rates.groupby("label_source"):
        index = ["model", "lang"]
        base = frame[(frame["prompt_variant"] == 1) & (frame["subset"] == SUBSET_ALL)]
        comparisons = [
            (f"variant_1_vs_{variant}", frame[(frame["prompt_variant"] == variant) & (frame["subset"] == SUBSET_ALL)])
            for variant in sorted(set(frame["prompt_variant"]) - {1})
        ]
        comparisons.append(("all_vs_no_gpt_definitions",
                            frame[(frame["prompt_variant"] == 1) & (frame["subset"] == SUBSET_NO_GPT)]))
        for comparison, other in comparisons:
            for row in stats.paired_correlations(base, other, index, measures, printed_decimals=2):
                rows.append({"label_source": label_source, "comparison": comparison, **row})
    return pd.DataFrame(rows, columns=["label_source", "comparison", "measure", "n_points", "pearson_r", "p_value",
                                       "pearson_r_printed"])


def misaligned_threshold(n_trials: int, per_15: int = 3) -> int:
    """The paper's "misaligned in at least 3 of 15 trials", scaled to other trial counts (rounded up)."""
    return max(1, -(-per_15 * n_trials // 15))


def misalignment_by_term(labels: pd.DataFrame, terms: pd.DataFrame) -> pd.DataFrame:
    """Per term, model, lang, variant and label source: label counts over trials and the ≥3-of-15 flag."""
    keys = ["model", "lang", "prompt_variant", "label_source", "term_id"]
    counts = _label_counts(labels, keys).rename(
        columns={"correct": "n_correct", "misaligned": "n_misaligned", "incorrect": "n_incorrect", "n": "n_trials",
                 "refusal": "n_refusal"}
    )
    counts["misaligned_threshold"] = [misaligned_threshold(n) for n in counts["n_trials"]]
    counts["misaligned_term"] = counts["n_misaligned"] >= counts["misaligned_threshold"]
    counts["ever_misaligned"] = counts["n_misaligned"] >= 1
    names = terms[["term_id", "term_mainland", "term_taiwan", "category"]]
    counts = counts.merge(names, on="term_id", how="left")
    counts["counts"] = (counts["n_correct"].astype(str) + "," + counts["n_misaligned"].astype(str) + ","
                        + counts["n_incorrect"].astype(str))
    return counts.sort_values(keys).reset_index(drop=True)


def misalignment_summary(by_term: pd.DataFrame, *, majority: float = 0.5) -> pd.DataFrame:
    """Section 3.2.1 numbers: misaligned terms per model (mean, population and sample SD across models).

    Also counts the terms misaligned by at least `majority` of the models (Section 3.2.2, Table 18's candidates).
    """
    rows = []
    for (lang, variant, source), frame in by_term.groupby(["lang", "prompt_variant", "label_source"]):
        per_model = frame.groupby("model").agg(misaligned=("misaligned_term", "sum"),
                                               ever=("ever_misaligned", "sum"))
        n_models = len(per_model)
        votes = frame.groupby("term_id")["misaligned_term"].sum()
        needed = math.ceil(majority * n_models)
        for rule, column in (("at_least_threshold", "misaligned"), ("at_least_once", "ever")):
            values = per_model[column].to_numpy(dtype=float)
            rows.append({
                "lang": lang, "prompt_variant": variant, "label_source": source, "rule": rule,
                "n_models": n_models, "mean_terms": values.mean(), "sd_population": values.std(ddof=0),
                "sd_sample": values.std(ddof=1) if n_models > 1 else math.nan,
                "min_terms": int(values.min()), "max_terms": int(values.max()),
                "per_model": ", ".join(f"{model}={int(count)}" for model, count in per_model[column].items()),
                "majority_models_needed": needed,
                "n_majority_terms": int((votes >= needed).sum()) if rule == "at_least_threshold" else None,
            })
    # `n_majority_terms` exists for the threshold rule only: a nullable count.
    return pd.DataFrame(rows).astype({"n_majority_terms": "Int64"}) if rows else pd.DataFrame()


def majority_misaligned_terms(by_term: pd.DataFrame, *, majority: float = 0.5) -> pd.DataFrame:
    """Terms misaligned (≥ threshold) by at least `majority` of the models, per lang, variant and source."""
    frames = []
    for keys, frame in by_term.groupby(["lang", "prompt_variant", "label_source"]):
        n_models = frame["model"].nunique()
        votes = frame.groupby(["term_id", "term_mainland", "term_taiwan"])["misaligned_term"].sum().reset_index(
            name="n_models_misaligned")
        votes = votes[votes["n_models_misaligned"] >= math.ceil(majority * n_models)]
        votes[["lang", "prompt_variant", "label_source"]] = list(keys)
        votes["n_models"] = n_models
        frames.append(votes)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


