"""Bootstrap intervals for Score, LBS, C and QAC over prompts (and samples within a prompt), seeded; whether the
paper's McNemar result survives (exact p, BH across models, the LBS interval excluding 0); and the power of the
design run (prompts × samples)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sctc_assets.lib import power, robust, stats
from sctc_assets.lib.sovereignty.pairs import COMPARISONS, GROUP_KEYS, with_condition

METRICS = ("score_a", "score_b", "lbs", "consistency", "qac")
CI_METHOD = "percentile bootstrap over prompts, then samples within each prompt ({replicates} replicates, seed {seed})"


def _metrics(pass_a: np.ndarray, pass_b: np.ndarray) -> dict[str, float]:
    score_a, score_b = float(pass_a.mean()), float(pass_b.mean())
    consistency = float((pass_a == pass_b).mean())
    return {"score_a": score_a, "score_b": score_b, "lbs": score_a - score_b, "consistency": consistency,
            "qac": consistency * min(score_a, score_b)}


def bootstrap_pair(first: pd.DataFrame, second: pd.DataFrame, *, replicates: int = robust.BOOTSTRAP_REPLICATES,
                   seed: int = robust.BOOTSTRAP_SEED) -> list[dict]:
    """One row per metric: the estimate on the answers paired by (prompt, sample) and its two-stage bootstrap
    95 % interval (prompts resampled, then each drawn prompt's samples)."""
    pairs = first.merge(second, on=["prompt_id", "sample"], suffixes=("_a", "_b"))
    if pairs.empty:
        return []
    by_prompt = [(group["passed_a"].astype(bool).to_numpy(), group["passed_b"].astype(bool).to_numpy())
                 for _, group in pairs.groupby("prompt_id", sort=True)]
    estimate = _metrics(pairs["passed_a"].astype(bool).to_numpy(), pairs["passed_b"].astype(bool).to_numpy())
    rng = np.random.default_rng(seed)
    draws = {metric: [] for metric in METRICS}
    for _ in range(replicates):
        chosen = rng.integers(0, len(by_prompt), size=len(by_prompt))
        a_parts, b_parts = [], []
        for index in chosen:
            a, b = by_prompt[index]
            samples = rng.integers(0, len(a), size=len(a))
            a_parts.append(a[samples])
            b_parts.append(b[samples])
        for metric, value in _metrics(np.concatenate(a_parts), np.concatenate(b_parts)).items():
            draws[metric].append(value)
    per_prompt_diff = np.array([a.mean() - b.mean() for a, b in by_prompt])
    samples = float(np.mean([len(a) for a, _ in by_prompt]))
    successes = [int(a.sum()) for a, _ in by_prompt] + [int(b.sum()) for _, b in by_prompt]
    trials = [len(a) for a, _ in by_prompt] * 2
    icc = robust.icc_anova(successes, trials)
    sd = float(per_prompt_diff.std(ddof=1)) if len(per_prompt_diff) > 1 else math.nan
    rows = []
    for metric in METRICS:
        low, high = np.quantile(draws[metric], [0.025, 0.975])
        rows.append({"metric": metric, "estimate": estimate[metric], "ci_low": float(low), "ci_high": float(high),
                     "ci_method": CI_METHOD.format(replicates=replicates, seed=seed),
                     "n_prompts": len(by_prompt), "samples_per_prompt": samples, "icc_prompt": icc,
                     "mde_lbs_paired": power.mde_paired(len(by_prompt), sd),
                     "mde_lbs_clustered": power.mde_two_proportions(len(by_prompt), samples, icc,
                                                                    max(estimate["score_a"], estimate["score_b"], 0.5)),
                     "prompts_needed_for_0.2": power.units_needed_paired(0.2, sd)})
    return rows


def bootstrap_table(results: pd.DataFrame, **kwargs) -> pd.DataFrame:
    rows = []
    for keys, group in with_condition(results).groupby(GROUP_KEYS, sort=True):
        by_lang = dict(tuple(group.groupby("lang")))
        for lang_a, lang_b in COMPARISONS:
            if lang_a in by_lang and lang_b in by_lang:
                for row in bootstrap_pair(by_lang[lang_a], by_lang[lang_b], **kwargs):
                    rows.append({**dict(zip(GROUP_KEYS, keys)), "lang_a": lang_a, "lang_b": lang_b, **row})
    return pd.DataFrame(rows)


def significance_robustness(summary: pd.DataFrame, bootstrap: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Per model, rule, prompt set and pair: the paper's McNemar χ² p (uncorrected, as reported) against the exact
    McNemar p BH-adjusted across models and the bootstrap interval of LBS."""
    if summary.empty:
        return pd.DataFrame()
    table = with_condition(summary)[GROUP_KEYS + ["lang_a", "lang_b", "lbs", "mcnemar_b", "mcnemar_c", "p_chi2",
                                                  "p_exact"]].copy()
    table["p_exact_bh"] = np.nan
    for _, index in table.groupby(["scoring_rule", "prompt_set", "condition", "lang_a", "lang_b"]).groups.items():
        table.loc[index, "p_exact_bh"] = stats.bh_adjust(table.loc[index, "p_exact"])
    lbs = with_condition(bootstrap[bootstrap["metric"] == "lbs"]) if not bootstrap.empty else pd.DataFrame(
        columns=GROUP_KEYS + ["lang_a", "lang_b", "ci_low", "ci_high", "ci_method"])
    table = table.merge(lbs[GROUP_KEYS + ["lang_a", "lang_b", "ci_low", "ci_high", "ci_method"]],
                        on=GROUP_KEYS + ["lang_a", "lang_b"], how="left")
    table["paper_significant"] = [robust.survives(p, alpha) for p in table["p_chi2"]]
    table["exact_bh_significant"] = [robust.survives(p, alpha) for p in table["p_exact_bh"]]
    table["lbs_ci_excludes_0"] = [None if math.isnan(low) else bool(low > 0 or high < 0)
                                  for low, high in zip(table["ci_low"].fillna(math.nan), table["ci_high"].fillna(math.nan))]
    table["survives"] = [None if paper is not True else bool(exact and ci)
                         for paper, exact, ci in zip(table["paper_significant"], table["exact_bh_significant"],
                                                     table["lbs_ci_excludes_0"])]
    return table
