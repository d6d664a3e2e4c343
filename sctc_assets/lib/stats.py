"""Statistics shared by the benchmarks, on counts rather than raw rows so they are cheap and easy to check.

Everything is a thin, explicit layer over statsmodels/scipy, with the degenerate cases (empty groups, all-0 or
all-1 outcomes) decided here once instead of surfacing as NaN warnings in every table.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np
from scipy import stats as scipy_stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint, proportions_ztest

NAN = float("nan")


def wilson_ci(successes: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    if n <= 0:
        return NAN, NAN
    low, high = proportion_confint(successes, n, alpha=alpha, method="wilson")
    return float(low), float(high)


def cohens_h(p1: float, p2: float) -> float:
    if any(math.isnan(value) for value in (p1, p2)):
        return NAN
    return 2 * math.asin(math.sqrt(p1)) - 2 * math.asin(math.sqrt(p2))


def _degenerate(difference: float) -> tuple[float, float]:
    """Both groups without variance: identical proportions prove nothing, different ones are certain."""
    if difference == 0:
        return 0.0, 1.0
    return math.copysign(math.inf, difference), 0.0


def two_proportion_ztest(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float]:
    """Two-sided z-test of p1 = p2 with the pooled standard error (statsmodels `proportions_ztest`)."""
    if n1 <= 0 or n2 <= 0:
        return NAN, NAN
    pooled = (k1 + k2) / (n1 + n2)
    if pooled in (0.0, 1.0):
        return _degenerate(k1 / n1 - k2 / n2)
    z, p = proportions_ztest(np.array([k1, k2]), np.array([n1, n2]), alternative="two-sided")
    return float(z), float(p)


def binary_ttest(k1: int, n1: int, k2: int, n2: int, *, equal_var: bool = False) -> tuple[float, float]:
    """Two-sample t-test on 0/1 outcomes (Welch by default), identical to `ttest_ind` on the indicator vectors."""
    if n1 < 2 or n2 < 2:
        return NAN, NAN
    p1, p2 = k1 / n1, k2 / n2
    sd1 = math.sqrt(p1 * (1 - p1) * n1 / (n1 - 1))
    sd2 = math.sqrt(p2 * (1 - p2) * n2 / (n2 - 1))
    if sd1 == 0 and sd2 == 0:
        return _degenerate(p1 - p2)
    result = scipy_stats.ttest_ind_from_stats(p1, sd1, n1, p2, sd2, n2, equal_var=equal_var)
    return float(result.statistic), float(result.pvalue)


def one_sample_proportion_ztest(
    successes: int, n: int, value: float = 0.5, alternative: str = "two-sided"
) -> tuple[float, float]:
    """statsmodels `proportions_ztest` against `value` with its default sample-proportion standard error.

    As in the SC-TC-Bench scripts, p̂ of 0 or 1 gives a zero standard error: z = ±inf and p = 0 or 1.
    """
    if n <= 0:
        return NAN, NAN
    p_hat = successes / n
    if p_hat in (0.0, 1.0):
        z = math.copysign(math.inf, p_hat - value) if p_hat != value else 0.0
        if alternative == "larger":
            return z, 0.0 if z > 0 else 1.0
        if alternative == "smaller":
            return z, 0.0 if z < 0 else 1.0
        return z, 0.0 if z != 0 else 1.0
    z, p = proportions_ztest(successes, n, value=value, alternative=alternative)
    return float(z), float(p)


def bh_adjust(pvalues: Sequence[float] | Iterable[float], alpha: float = 0.05) -> list[float]:
    """Benjamini–Hochberg adjusted p-values (statsmodels `fdr_bh`); NaN entries stay NaN and are not counted."""
    values = [float(p) for p in pvalues]
    finite = [index for index, p in enumerate(values) if not math.isnan(p)]
    adjusted = [NAN] * len(values)
    if finite:
        _, corrected, _, _ = multipletests([values[i] for i in finite], alpha=alpha, method="fdr_bh")
        for index, value in zip(finite, corrected):
            adjusted[index] = float(value)
    return adjusted


def pearson(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    x_values, y_values = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x_values) < 3 or np.ptp(x_values) == 0 or np.ptp(y_values) == 0:
        return NAN, NAN
    result = scipy_stats.pearsonr(x_values, y_values)
    return float(result.statistic), float(result.pvalue)


def sig_stars(p: float, *, no_ns: bool = False) -> str:
    """The SC-TC-Bench scripts' `sig_sign`: *** < .001 ≤ ** < .01 ≤ * < .05, else 'NS' (or '' with no_ns)."""
    if not math.isnan(p):
        if p < 0.001:
            return "***"
        if p < 0.01:
            return "**"
        if p < 0.05:
            return "*"
    return "" if no_ns else "NS"
