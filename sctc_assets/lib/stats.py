"""Statistics shared by the benchmarks, on counts rather than raw rows so they are cheap and easy to check.

Everything is a thin, explicit layer over statsmodels/scipy, with the degenerate cases (empty groups, all-0 or
all-1 outcomes) decided here once instead of surfacing as NaN warnings in every table.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

# scipy and statsmodels are imported by the functions that use them: together they take about a second to import,
# and modules that only import this one (`sctc plan` reaches it through the name benchmark's tokenization) need none.

NAN = float("nan")


def wilson_ci(successes: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    from statsmodels.stats.proportion import proportion_confint

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
    from statsmodels.stats.proportion import proportions_ztest

    if n1 <= 0 or n2 <= 0:
        return NAN, NAN
    pooled = (k1 + k2) / (n1 + n2)
    if pooled in (0.0, 1.0):
        return _degenerate(k1 / n1 - k2 / n2)
    z, p = proportions_ztest(np.array([k1, k2]), np.array([n1, n2]), alternative="two-sided")
    return float(z), float(p)


def binary_ttest(k1: int, n1: int, k2: int, n2: int, *, equal_var: bool = False) -> tuple[float, float]:
    """Two-sample t-test on 0/1 outcomes (Welch by default), identical to `ttest_ind` on the indicator vectors."""
    from scipy import stats as scipy_stats

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
    successes: int, n: int, value: float = 0.5, alternative: str = "two-sided", *, null_se: bool = False
) -> tuple[float, float]:
    """statsmodels `proportions_ztest` against `value`.

    By default with its sample-proportion standard error, as the SC-TC-Bench scripts: p̂ of 0 or 1 gives a zero
    standard error, z = ±inf and p = 0 or 1, so one answer is "significant". `null_se` uses the standard error
    under the null, √(value(1 − value)/n) (`prop_var=value`), which stays finite for any 0 < value < 1.
    """
    from statsmodels.stats.proportion import proportions_ztest

    if n <= 0:
        return NAN, NAN
    p_hat = successes / n
    if null_se:
        z, p = proportions_ztest(successes, n, value=value, alternative=alternative, prop_var=value)
        return float(z), float(p)
    if p_hat in (0.0, 1.0):
        z = math.copysign(math.inf, p_hat - value) if p_hat != value else 0.0
        if alternative == "larger":
            return z, 0.0 if z > 0 else 1.0
        if alternative == "smaller":
            return z, 0.0 if z < 0 else 1.0
        return z, 0.0 if z != 0 else 1.0
    z, p = proportions_ztest(successes, n, value=value, alternative=alternative)
    return float(z), float(p)


def mcnemar(b: int, c: int) -> tuple[float, float, float]:
    """McNemar's test on the discordant pairs b and c: (χ², its p-value, the exact binomial p-value).

    χ² = (b − c)² / (b + c) without continuity correction, as Ko & Littl3Lobst3r (2026) define it; the exact
    test (statsmodels) is the one to trust with few discordant pairs. Without any (b + c = 0) nothing differs:
    χ² = 0 and both p-values are 1.
    """
    from statsmodels.stats.contingency_tables import mcnemar as statsmodels_mcnemar

    if b < 0 or c < 0:
        raise ValueError(f"McNemar counts must be non-negative, got b={b}, c={c}")
    if b + c == 0:
        return 0.0, 1.0, 1.0
    table = [[0, b], [c, 0]]
    chi2 = statsmodels_mcnemar(table, exact=False, correction=False)
    exact = statsmodels_mcnemar(table, exact=True)
    return float(chi2.statistic), float(chi2.pvalue), float(exact.pvalue)


def bh_adjust(pvalues: Sequence[float] | Iterable[float], alpha: float = 0.05) -> list[float]:
    """Benjamini–Hochberg adjusted p-values (statsmodels `fdr_bh`); NaN entries stay NaN and are not counted."""
    from statsmodels.stats.multitest import multipletests

    values = [float(p) for p in pvalues]
    finite = [index for index, p in enumerate(values) if not math.isnan(p)]
    adjusted = [NAN] * len(values)
    if finite:
        _, corrected, _, _ = multipletests([values[i] for i in finite], alpha=alpha, method="fdr_bh")
        for index, value in zip(finite, corrected):
            adjusted[index] = float(value)
    return adjusted


def pearson(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    from scipy import stats as scipy_stats

    x_values, y_values = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x_values) < 3 or np.ptp(x_values) == 0 or np.ptp(y_values) == 0:
        return NAN, NAN
    result = scipy_stats.pearsonr(x_values, y_values)
    return float(result.statistic), float(result.pvalue)


def paired_correlations(base: pd.DataFrame, other: pd.DataFrame, index: Sequence[str], measures: Sequence[str],
                        *, printed_decimals: int | None = None) -> list[dict]:
    """Pearson's r of each measure between two tables of rates (paper Appendix B.1: one point per bar of the
    figure), joined on `index`: only points on both sides count. One dict per measure with `measure`, `n_points`,
    `pearson_r`, `p_value`, and with `printed_decimals`, `pearson_r_printed`: r of the rates rounded as the authors'
    scripts print them."""
    joined = base.set_index(list(index)).join(other.set_index(list(index)), how="inner", rsuffix="_other")
    rows = []
    for measure in measures:
        x, y = joined[measure], joined[f"{measure}_other"]
        r, p = pearson(x, y) if len(joined) else (NAN, NAN)
        row = {"measure": measure, "n_points": len(joined), "pearson_r": r, "p_value": p}
        if printed_decimals is not None:
            row["pearson_r_printed"] = (pearson(x.round(printed_decimals), y.round(printed_decimals))[0]
                                        if len(joined) else NAN)
        rows.append(row)
    return rows


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


def paired_ttest(first: Sequence[float], second: Sequence[float]) -> tuple[float, float]:
    """Paired t-test of first − second (scipy `ttest_rel`); constant differences give 0/1 or ±inf/0, n < 2 NaN."""
    from scipy import stats as scipy_stats

    x, y = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    if len(x) != len(y):
        raise ValueError(f"paired samples differ in length: {len(x)} vs {len(y)}")
    if len(x) < 2:
        return NAN, NAN
    differences = x - y
    if np.ptp(differences) == 0:
        return _degenerate(float(differences[0]))
    result = scipy_stats.ttest_rel(x, y)
    return float(result.statistic), float(result.pvalue)


def wilcoxon_signed_rank(first: Sequence[float], second: Sequence[float]) -> tuple[float, float]:
    """Wilcoxon signed-rank test of first − second (scipy `wilcoxon`, zero differences dropped, two-sided; exact
    for small samples without ties). No non-zero difference means no evidence: (0, 1)."""
    from scipy import stats as scipy_stats

    x, y = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    if len(x) != len(y):
        raise ValueError(f"paired samples differ in length: {len(x)} vs {len(y)}")
    if len(x) == 0:
        return NAN, NAN
    if not np.any(x - y):
        return 0.0, 1.0
    result = scipy_stats.wilcoxon(x, y)
    return float(result.statistic), float(result.pvalue)


def two_sample_ttest(
    first: Sequence[float], second: Sequence[float], *, equal_var: bool, alternative: str = "two-sided"
) -> tuple[float, float]:
    """scipy `ttest_ind` (Student's with `equal_var`, else Welch's) of mean(first) − mean(second).

    A one-sided p-value ("less": H1 mean(first) < mean(second); "greater") is derived from the two-sided one as the
    SC-TC-Bench scripts do: p/2 when t points the alternative's way, else 1 − p/2. Groups without variance give
    0/1 or ±inf/0 (see `_degenerate`); fewer than 2 values in a group give NaN.
    """
    from scipy import stats as scipy_stats

    if alternative not in ("two-sided", "less", "greater"):
        raise ValueError(f"alternative must be two-sided, less or greater, got {alternative!r}")
    x, y = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    if len(x) < 2 or len(y) < 2:
        return NAN, NAN
    if np.ptp(x) == 0 and np.ptp(y) == 0:
        t, p_two = _degenerate(float(x[0] - y[0]))
    else:
        result = scipy_stats.ttest_ind(x, y, equal_var=equal_var)
        t, p_two = float(result.statistic), float(result.pvalue)
    if alternative == "two-sided":
        return t, p_two
    toward = t < 0 if alternative == "less" else t > 0
    return t, p_two / 2 if toward else 1 - p_two / 2
