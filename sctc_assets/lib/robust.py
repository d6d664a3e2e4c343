"""Tests whose unit of analysis is the one that varies independently: the term, the candidate list, the prompt,
the review pair. The benchmarks' trial-level tests treat 15 near-identical answers to one prompt (or 180
shuffles of one list) as independent draws; these do not.

Thin layers over statsmodels/scipy, degenerate inputs decided here once: no variation in the outcome means no
evidence (p = 1), an empty input NaN. Bootstrap intervals are seeded (`numpy.random.default_rng(seed)`) and so
reproducible.
"""

from __future__ import annotations

import math
import warnings
from typing import Callable, Sequence

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from sctc_assets.lib import stats

NAN = float("nan")
BOOTSTRAP_REPLICATES = 2000
BOOTSTRAP_SEED = 20250601


def paired_by_unit(first: Sequence[float], second: Sequence[float], alpha: float = 0.05) -> dict[str, float]:
    """Paired comparison of first − second over units (terms, pairs): mean difference with its t interval, the
    paired t-test (scipy `ttest_rel`) and the Wilcoxon signed-rank test (scipy `wilcoxon`, zeros dropped)."""
    x, y = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    differences = x - y
    n = len(differences)
    row = {"n_units": n, "mean_first": float(x.mean()) if n else NAN, "mean_second": float(y.mean()) if n else NAN,
           "diff": float(differences.mean()) if n else NAN, "ci_low": NAN, "ci_high": NAN}
    row["paired_t"], row["paired_t_p"] = stats.paired_ttest(x, y)
    row["wilcoxon"], row["wilcoxon_p"] = stats.wilcoxon_signed_rank(x, y)
    if n >= 2:
        sd = float(differences.std(ddof=1))
        half = scipy_stats.t.ppf(1 - alpha / 2, n - 1) * sd / math.sqrt(n)
        row["ci_low"], row["ci_high"] = row["diff"] - half, row["diff"] + half
        row["sd_diff"] = sd
    else:
        row["sd_diff"] = NAN
    return row


def gee_binary_effect(outcome: Sequence[int], group: Sequence[int], cluster: Sequence[object]) -> dict[str, float]:
    """Trial-level logistic GEE, outcome ~ group, clusters with exchangeable working correlation (statsmodels
    `GEE`, `Binomial`, `Exchangeable`, robust sandwich standard errors).

    Returns the log-odds ratio of group 1 against group 0, its robust SE, z and p, and the estimated within-cluster
    correlation (the exchangeable dependence parameter, on the working residual scale). An outcome that never
    varies gives p = 1 and NaN estimates; groups separated perfectly (all 1 vs all 0) give p = 0."""
    import statsmodels.api as sm

    y = np.asarray(outcome, dtype=float)
    x = np.asarray(group, dtype=float)
    clusters = pd.factorize(pd.Series(list(cluster)))[0]
    result = {"gee_log_or": NAN, "gee_se": NAN, "gee_z": NAN, "gee_p": NAN, "gee_within_corr": NAN,
              "n_clusters": int(len(set(clusters)))}
    if len(y) == 0:
        return result
    if np.ptp(y) == 0:
        result["gee_p"] = 1.0
        return result
    rates = [y[x == value].mean() for value in (0.0, 1.0) if (x == value).any()]
    if len(rates) == 2 and {rates[0], rates[1]} == {0.0, 1.0}:
        result["gee_p"] = 0.0
        result["gee_log_or"] = math.copysign(math.inf, rates[1] - rates[0])
        return result
    design = sm.add_constant(x, has_constant="add")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = sm.GEE(y, design, groups=clusters, family=sm.families.Binomial(),
                        cov_struct=sm.cov_struct.Exchangeable()).fit()
    result.update(gee_log_or=float(fitted.params[1]), gee_se=float(fitted.bse[1]), gee_z=float(fitted.tvalues[1]),
                  gee_p=float(fitted.pvalues[1]), gee_within_corr=float(fitted.cov_struct.dep_params))
    return result


def icc_anova(successes: Sequence[int], trials: Sequence[int]) -> float:
    """One-way ANOVA intraclass correlation of 0/1 outcomes grouped in clusters (successes/trials per cluster),
    truncated at 0; NaN when it cannot be estimated (one cluster, or no variation at all)."""
    k = np.asarray(successes, dtype=float)
    n = np.asarray(trials, dtype=float)
    keep = n > 0
    k, n = k[keep], n[keep]
    groups, total = len(n), n.sum()
    if groups < 2 or total <= groups:
        return NAN
    p = k.sum() / total
    between = (((k / n - p) ** 2) * n).sum() / (groups - 1)
    within = (k - k ** 2 / n).sum() / (total - groups)
    n0 = (total - (n ** 2).sum() / total) / (groups - 1)
    denominator = between + (n0 - 1) * within
    if denominator <= 0:
        return NAN
    return max(0.0, float((between - within) / denominator))


def cluster_robust_share(outcome: Sequence[float], cluster: Sequence[object], value: float = 0.5) -> dict[str, float]:
    """Mean of a 0/1 outcome with cluster-robust (CR1) standard error by cluster (statsmodels OLS on a constant,
    `cov_type="cluster"`), and the two-sided z-test of mean = `value` with that SE. Fewer than two clusters: NaN
    SE and p."""
    import statsmodels.api as sm

    y = np.asarray(outcome, dtype=float)
    # A Series is factorized as it is (the same codes as of its values as a list, without a Python object per
    # value of an Arrow-backed column).
    clusters = pd.factorize(cluster if isinstance(cluster, pd.Series) else pd.Series(list(cluster)))[0]
    n_clusters = int(len(np.unique(clusters)))
    row = {"share": float(y.mean()) if len(y) else NAN, "cr_se": NAN, "cr_z": NAN, "cr_p": NAN,
           "ci_low": NAN, "ci_high": NAN, "n": int(len(y)), "n_clusters": n_clusters}
    if len(y) == 0 or n_clusters < 2:
        return row
    if np.ptp(y) == 0:
        row.update(cr_se=0.0, ci_low=row["share"], ci_high=row["share"])
        row["cr_z"], row["cr_p"] = (0.0, 1.0) if row["share"] == value else (math.copysign(math.inf, row["share"] - value), 0.0)
        return row
    fitted = sm.OLS(y, np.ones((len(y), 1))).fit(cov_type="cluster", cov_kwds={"groups": clusters})
    se = float(fitted.bse[0])
    z = (row["share"] - value) / se
    row.update(cr_se=se, cr_z=z, cr_p=float(2 * scipy_stats.norm.sf(abs(z))),
               ci_low=row["share"] - 1.959963984540054 * se, ci_high=row["share"] + 1.959963984540054 * se)
    return row


def bootstrap_ci(
    units: Sequence[object], statistic: Callable[[np.ndarray], float], *, replicates: int = BOOTSTRAP_REPLICATES,
    seed: int = BOOTSTRAP_SEED, alpha: float = 0.05,
) -> tuple[float, float, int]:
    """Percentile bootstrap interval of `statistic(indices)` resampling `units` (their positions) with
    replacement; returns (low, high, replicates with a finite statistic). Seeded: the same call gives the same
    interval."""
    n = len(units)
    if n == 0:
        return NAN, NAN, 0
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n, size=(replicates, n))
    values = np.array([statistic(draw) for draw in draws], dtype=float)
    values = values[np.isfinite(values)]
    if not len(values):
        return NAN, NAN, 0
    low, high = np.quantile(values, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high), int(len(values))


def design_effect(cluster_size: float, icc: float) -> float:
    """Kish's design effect 1 + (m − 1)·ICC of clusters of size m (NaN ICC: no inflation assumed)."""
    if math.isnan(icc):
        return 1.0
    return 1.0 + (cluster_size - 1.0) * icc


def survives(p_adjusted: float, alpha: float = 0.05) -> bool | None:
    """Significant after adjustment at `alpha`; None when there is no p-value."""
    if p_adjusted is None or (isinstance(p_adjusted, float) and math.isnan(p_adjusted)):
        return None
    return bool(p_adjusted < alpha)
