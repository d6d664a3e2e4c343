"""The paper's central comparison as a test: pass rates of Chinese-origin models against the others, per scoring
rule, prompt set and prompting language, and the language gap (LBS) between the groups, with the model as the unit.

A model's answers are not independent of one another (one model wrote them all), so the unit of the test is the
model: each model's pass rate counts once, and the statistic is the difference of the two groups' mean rates.
The primary p-value is a permutation test over models: the origin labels are reassigned among the models, the group
sizes kept, and p is the share of relabellings whose difference is at least as far from 0 as the one observed
(two-sided). It is exact (every relabelling) when there are at most `EXACT_LIMIT` of them, Monte Carlo otherwise
(`MONTE_CARLO_DRAWS` seeded draws, p = (1 + hits) / (1 + draws)). It holds with any number of models, which matters
here: the paper has 17 models, 6 of them Chinese.

Beside it, a logistic GEE (statsmodels; exchangeable working correlation, the model as the cluster) on the answers,
with its robust (sandwich) Wald p. With so few clusters the sandwich standard errors are too small (they are
consistent only as the number of clusters grows), and a group that passes nothing separates perfectly, so `p_gee`
is given for comparison only, and is empty where the fit fails.
"""

from __future__ import annotations

import itertools
import math
import warnings
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from sctc_assets.lib.frames import empty_table
from sctc_assets.lib.sovereignty.origin import CHINA, origin_group
from sctc_assets.lib.sovereignty.pairs import COMPARISONS, baseline, language_scores

EXACT_LIMIT = 50_000
MONTE_CARLO_DRAWS = 20_000
PERMUTATION_SEED = 20260205
# Differences this close to the observed one count as equal (floating point).
TOLERANCE = 1e-12
GROUPS = (CHINA, "other")
ORIGIN_TEST_COLUMNS = ["scoring_rule", "prompt_set", "comparison", "lang_a", "lang_b", "group_a", "group_b",
                       "n_models_a", "n_models_b", "models_a", "models_b", "rate_a", "rate_b", "difference",
                       "p_permutation", "permutations", "p_gee", "method"]
ORIGIN_TEST_DTYPES = {"n_models_a": "int64", "n_models_b": "int64", "rate_a": "float64", "rate_b": "float64",
                      "difference": "float64", "p_permutation": "float64", "p_gee": "float64"}


def permutation_test(values_a: Sequence[float], values_b: Sequence[float], *, seed: int = PERMUTATION_SEED,
                     exact_limit: int = EXACT_LIMIT, draws: int = MONTE_CARLO_DRAWS) -> tuple[float, float, str]:
    """(mean(a) − mean(b), two-sided p, how): the models' labels permuted, the group sizes kept."""
    a, b = np.asarray(values_a, dtype=float), np.asarray(values_b, dtype=float)
    if len(a) == 0 or len(b) == 0:
        return math.nan, math.nan, "no test: a group has no model"
    pooled = np.concatenate([a, b])
    observed = float(a.mean() - b.mean())
    total, size = pooled.sum(), len(a)
    count = math.comb(len(pooled), size)

    def difference(chosen: np.ndarray) -> float:
        first = pooled[chosen].sum()
        return first / size - (total - first) / (len(pooled) - size)

    if count <= exact_limit:
        hits = sum(abs(difference(np.array(chosen))) >= abs(observed) - TOLERANCE
                   for chosen in itertools.combinations(range(len(pooled)), size))
        return observed, hits / count, f"exact ({count} relabellings)"
    rng = np.random.default_rng(seed)
    hits = sum(abs(difference(rng.permutation(len(pooled))[:size])) >= abs(observed) - TOLERANCE
               for _ in range(draws))
    return observed, (1 + hits) / (1 + draws), f"Monte Carlo ({draws} relabellings of {count}, seed {seed})"


def gee_p(rows: pd.DataFrame, formula: str, term: str) -> float:
    """The robust Wald p of `term` in a logistic GEE clustered by model; NaN when the fit fails or separates."""
    import statsmodels.api as sm
    import statsmodels.formula.api as smf

    if rows["model"].nunique() < 3 or rows["passed"].nunique() < 2:
        return math.nan
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = smf.gee(formula, "model", rows, family=sm.families.Binomial(),
                          cov_struct=sm.cov_struct.Exchangeable()).fit()
            p = float(fit.pvalues[term])  # computed lazily: a degenerate fit warns here
    except Exception:  # noqa: BLE001: singular or separated fits have no p-value to give
        return math.nan
    return p if math.isfinite(p) else math.nan


def _answers(scores: pd.DataFrame) -> pd.DataFrame:
    """One row per answer (passed 0/1) from the per-language counts, for the GEE."""
    rows = []
    for record in scores.to_dict("records"):
        passed, n = int(record["passed"]), int(record["n"])
        rows += [{"model": record["model"], "lang": record["lang"], "cn": int(record["group"] == CHINA),
                  "passed": int(index < passed)} for index in range(n)]
    return pd.DataFrame(rows, columns=["model", "lang", "cn", "passed"])


def _row(rule: str, prompt_set: str, comparison: str, lang_a: str, lang_b: str, by_group: Mapping[str, pd.Series],
         p_gee: float) -> dict[str, Any]:
    a, b = by_group.get(GROUPS[0], pd.Series(dtype=float)), by_group.get(GROUPS[1], pd.Series(dtype=float))
    difference, p, how = permutation_test(a.to_list(), b.to_list())
    return {"scoring_rule": rule, "prompt_set": prompt_set, "comparison": comparison, "lang_a": lang_a,
            "lang_b": lang_b, "group_a": GROUPS[0], "group_b": GROUPS[1], "n_models_a": len(a), "n_models_b": len(b),
            "models_a": ", ".join(sorted(a.index)), "models_b": ", ".join(sorted(b.index)),
            "rate_a": float(a.mean()) if len(a) else math.nan, "rate_b": float(b.mean()) if len(b) else math.nan,
            "difference": difference, "p_permutation": p, "permutations": how, "p_gee": p_gee,
            "method": "permutation test over models (primary); logistic GEE clustered by model (p_gee, few clusters: "
                      "for comparison only)"}


def origin_tests(summary: pd.DataFrame, countries: Mapping[str, str | None]) -> pd.DataFrame:
    """Per scoring rule and prompt set: for each prompting language, the mean pass rate of Chinese-origin models
    against the others (`comparison` = pass_rate, `lang_a` the language); for each language pair, the mean LBS
    (`comparison` = language_gap). `countries`: model → ISO country (None: unknown, left out). On the baseline
    condition `none` (the paper's design); the conditions have their own table (`condition_effects`)."""
    summary = baseline(summary)
    if summary.empty:
        return empty_table(ORIGIN_TEST_COLUMNS, ORIGIN_TEST_DTYPES)
    scores = language_scores(summary)
    scores["group"] = scores["model"].map(lambda model: origin_group(countries.get(model)))
    scores = scores[scores["group"].notna()]
    rows = []
    for (rule, prompt_set), group in scores.groupby(["scoring_rule", "prompt_set"], sort=True):
        rates = group.assign(rate=group["passed"] / group["n"])
        for lang, frame in rates.groupby("lang", sort=False):
            by_group = {name: part.set_index("model")["rate"] for name, part in frame.groupby("group")}
            p_gee = gee_p(_answers(frame), "passed ~ cn", "cn")
            rows.append(_row(rule, prompt_set, "pass_rate", lang, "", by_group, p_gee))
        for lang_a, lang_b in COMPARISONS:
            wide = rates.pivot_table(index=["model", "group"], columns="lang", values="rate").reset_index()
            if lang_a not in wide or lang_b not in wide:
                continue
            wide = wide.dropna(subset=[lang_a, lang_b])
            gap = wide.assign(lbs=wide[lang_a] - wide[lang_b])
            by_group = {name: part.set_index("model")["lbs"] for name, part in gap.groupby("group")}
            answers = _answers(group[group["lang"].isin([lang_a, lang_b]) & group["model"].isin(gap["model"])])
            answers["first"] = (answers["lang"] == lang_a).astype(int)
            p_gee = gee_p(answers, "passed ~ cn * first", "cn:first")
            rows.append(_row(rule, prompt_set, "language_gap", lang_a, lang_b, by_group, p_gee))
    if not rows:
        return empty_table(ORIGIN_TEST_COLUMNS, ORIGIN_TEST_DTYPES)
    return pd.DataFrame(rows, columns=ORIGIN_TEST_COLUMNS).astype(ORIGIN_TEST_DTYPES)
