"""95 % intervals the report shows when a table has none: each from the counts, with the method it used named.

Intervals a table carries (`<column>_ci_low` / `<column>_ci_high`, or the tables' own Wilson columns) always win;
these fill in only where the counts determine the right interval. scipy and statsmodels are imported where used: the
processes that draw figures import this module and need neither.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class Interval:
    low: float
    high: float
    method: str  # shown in the report beside the interval

    @property
    def finite(self) -> bool:
        return not (math.isnan(self.low) or math.isnan(self.high))


def _number(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number


def from_columns(row: Mapping[str, Any], column: str, *, scale: float = 1.0, method: str = "") -> Interval | None:
    """`<column>_ci_low` / `<column>_ci_high` of a row (e.g. a bootstrap interval another table added)."""
    low, high = row.get(f"{column}_ci_low"), row.get(f"{column}_ci_high")
    if low is None or high is None:
        return None
    interval = Interval(_number(low) * scale, _number(high) * scale, method or f"{column}_ci_low/_ci_high column")
    return interval if interval.finite else None


def wilson(successes: int, n: int, *, scale: float = 1.0) -> Interval | None:
    """Wilson score interval of one proportion (statsmodels `proportion_confint`)."""
    from sctc_assets.lib.stats import wilson_ci

    if not n or n <= 0:
        return None
    low, high = wilson_ci(int(successes), int(n))
    return Interval(low * scale, high * scale, "Wilson, computed here from the counts")


def newcombe_difference(k1: int, n1: int, k2: int, n2: int, *, scale: float = 1.0) -> Interval | None:
    """Newcombe's hybrid score interval of p1 − p2 for two independent proportions (statsmodels)."""
    from statsmodels.stats.proportion import confint_proportions_2indep

    if not n1 or not n2:
        return None
    low, high = confint_proportions_2indep(int(k1), int(n1), int(k2), int(n2), method="newcomb", compare="diff")
    return Interval(float(low) * scale, float(high) * scale, "Newcombe hybrid score, computed here from the counts")


def matched_pairs_difference(only_second: int, only_first: int, n: int, *, scale: float = 1.0) -> Interval | None:
    """Wald interval of p_second − p_first over n matched pairs from the discordant counts (Agresti, 2002, §10.1)."""
    from scipy import stats as scipy_stats

    if not n or n <= 0:
        return None
    difference = (only_second - only_first) / n
    variance = ((only_second + only_first) - (only_second - only_first) ** 2 / n) / n ** 2
    half = scipy_stats.norm.ppf(0.975) * math.sqrt(max(variance, 0.0))
    return Interval((difference - half) * scale, (difference + half) * scale,
                    "matched-pairs Wald, computed here from the discordant pairs")


def paired_t_difference(delta: float, t_statistic: float, n: int) -> Interval | None:
    """The paired t-test's own interval for the mean difference: standard error = Δ / t, n − 1 df."""
    from scipy import stats as scipy_stats

    delta, t_statistic = _number(delta), _number(t_statistic)
    if not n or n < 2 or math.isnan(delta) or math.isnan(t_statistic) or t_statistic == 0 \
            or math.isinf(t_statistic):
        return None
    half = scipy_stats.t.ppf(0.975, n - 1) * abs(delta / t_statistic)
    return Interval(delta - half, delta + half, "paired t, from the table's t statistic (SE = Δ/t)")
