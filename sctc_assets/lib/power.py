"""Power of the benchmarks' designs (statsmodels.stats.power): the smallest difference a design detects at 80 %
power and α = 0.05 (two-sided), and how many units (trials, terms, lists, prompts, pairs) a given effect needs.

Two designs, said in every result's `design` text:
- **paired over units** (terms for the term task, review pairs, prompts): a one-sample t-test on the per-unit
  differences (`TTestPower`), so the minimum detectable difference is d × SD of those differences;
- **clustered proportions** (trials within a term, shuffles within a candidate list, samples within a prompt): a
  z-test on proportions (`NormalIndPower`, Cohen's h) with the sample size divided by Kish's design effect
  1 + (m − 1)·ICC for clusters of size m. Repeating a near-deterministic prompt (ICC → 1) adds almost nothing:
  the effective sample size can never exceed clusters / ICC, and a target beyond that needs more clusters, not
  more trials (`trials_needed` returns inf).

Plain functions: the `sctc run --dry-run` hook and the `*_power` assets call them.
"""

from __future__ import annotations

import functools
import math

from statsmodels.stats.power import NormalIndPower, TTestPower

ALPHA = 0.05
POWER = 0.8
NAN = float("nan")


# statsmodels solves each power equation by root finding (milliseconds); the tables ask the same few equations for
# every model and row (the same number of terms, lists, prompts), so each distinct one is solved once per process.
# Each solve uses a fresh solver object, as before, so a cached answer is the very float a new solve gives.
@functools.lru_cache(maxsize=4096)
def _ttest(effect_size: float | None, nobs: float | None, alpha: float, power: float) -> float:
    return TTestPower().solve_power(effect_size=effect_size, nobs=nobs, alpha=alpha, power=power,
                                    alternative="two-sided")


@functools.lru_cache(maxsize=4096)
def _normal(effect_size: float | None, nobs1: float | None, ratio: float, alpha: float, power: float) -> float:
    return NormalIndPower().solve_power(effect_size=effect_size, nobs1=nobs1, ratio=ratio, alpha=alpha, power=power,
                                        alternative="two-sided")


def _h_to_lower(baseline: float, h: float) -> float:
    """The proportion p < baseline with Cohen's h(baseline, p) = h (clipped at 0)."""
    angle = math.asin(math.sqrt(baseline)) - h / 2
    return math.sin(max(angle, 0.0)) ** 2


def _cohens_h(p1: float, p2: float) -> float:
    return abs(2 * math.asin(math.sqrt(p1)) - 2 * math.asin(math.sqrt(p2)))


def design_effect(cluster_size: float, icc: float) -> float:
    return 1.0 + (cluster_size - 1.0) * (0.0 if math.isnan(icc) else max(icc, 0.0))


def mde_paired(n_units: int, sd_difference: float, *, alpha: float = ALPHA, power: float = POWER) -> float:
    """Minimum detectable mean difference of a paired design over `n_units` units (one-sample t on differences)."""
    if n_units < 2 or math.isnan(sd_difference):
        return NAN
    d = _ttest(None, n_units, alpha, power)
    return float(d * sd_difference)


def units_needed_paired(effect: float, sd_difference: float, *, alpha: float = ALPHA, power: float = POWER) -> float:
    """Units (terms, pairs, prompts) a paired design needs to detect a mean difference `effect`."""
    if effect <= 0 or math.isnan(sd_difference):
        return NAN
    if sd_difference == 0:
        return 2.0
    n = _ttest(effect / sd_difference, None, alpha, power)
    return float(math.ceil(n))


def effective_n(clusters: int, cluster_size: float, icc: float) -> float:
    return clusters * cluster_size / design_effect(cluster_size, icc)


def mde_two_proportions(clusters_per_group: int, cluster_size: float, icc: float, baseline: float, *,
                        alpha: float = ALPHA, power: float = POWER) -> float:
    """Minimum detectable drop from `baseline` between two groups of `clusters_per_group` clusters of
    `cluster_size` trials each (e.g. 110 terms × 15 trials per script), within-cluster correlation `icc`."""
    n = effective_n(clusters_per_group, cluster_size, icc)
    if n <= 1 or not 0 < baseline <= 1:
        return NAN
    h = _normal(None, n, 1.0, alpha, power)
    return float(baseline - _h_to_lower(baseline, h))


def trials_needed(effect: float, baseline: float, clusters_per_group: int, icc: float, *,
                  alpha: float = ALPHA, power: float = POWER) -> float:
    """Trials per cluster (per term) needed to detect a drop of `effect` from `baseline` with the clusters fixed;
    inf when even infinitely many trials cannot reach it (effective n is capped at clusters / ICC)."""
    if not 0 < effect < baseline:
        return NAN
    h = _cohens_h(baseline, baseline - effect)
    needed = _normal(h, None, 1.0, alpha, power)
    icc = 0.0 if math.isnan(icc) else max(icc, 0.0)
    if needed <= clusters_per_group:
        return 1.0
    if clusters_per_group <= needed * icc:
        return math.inf
    return float(math.ceil(needed * (1 - icc) / (clusters_per_group - needed * icc)))


def clusters_needed_two_proportions(effect: float, baseline: float, cluster_size: float, icc: float, *,
                                    alpha: float = ALPHA, power: float = POWER) -> float:
    """Clusters per group (terms, prompts) needed for a drop of `effect` from `baseline`, cluster size fixed."""
    if not 0 < effect < baseline:
        return NAN
    h = _cohens_h(baseline, baseline - effect)
    needed = _normal(h, None, 1.0, alpha, power)
    return float(math.ceil(needed * design_effect(cluster_size, icc) / cluster_size))


def mde_share(clusters: int, cluster_size: float, icc: float, value: float = 0.5, *,
              alpha: float = ALPHA, power: float = POWER) -> float:
    """Minimum detectable departure of a share from `value` (one sample: the Mainland share against 50 %) with
    `clusters` candidate lists of `cluster_size` valid answers each."""
    n = effective_n(clusters, cluster_size, icc)
    if n <= 1:
        return NAN
    h = _normal(None, n, 0.0, alpha, power)
    return float(value - _h_to_lower(value, h))


def lists_needed(effect: float, cluster_size: float, icc: float, value: float = 0.5, *,
                 alpha: float = ALPHA, power: float = POWER) -> float:
    """Candidate lists needed to detect a share of `value − effect` against `value`, `cluster_size` valid answers
    (shuffles) per list."""
    if not 0 < effect < value:
        return NAN
    h = _cohens_h(value, value - effect)
    needed = _normal(h, None, 0.0, alpha, power)
    return float(math.ceil(needed * design_effect(cluster_size, icc) / cluster_size))


def power_row(*, n_units: int, sd_difference: float, cluster_size: float, icc: float, baseline: float,
              effect: float, unit: str, trial: str) -> dict:
    """One benchmark × model design: both minimum detectable differences and what `effect` would need.
    `baseline` and `effect` are proportions (0–1); the result is in the same scale."""
    return {
        "n_units": n_units, "unit": unit, "trials_per_unit": cluster_size, "repeated_unit": trial, "icc": icc,
        "design_effect": design_effect(cluster_size, icc), "effective_n_per_group": effective_n(n_units, cluster_size, icc),
        "mde_paired": mde_paired(n_units, sd_difference),
        "mde_clustered": mde_two_proportions(n_units, cluster_size, icc, baseline),
        "target_effect": effect,
        f"{unit}s_needed_paired": units_needed_paired(effect, sd_difference),
        f"{unit}s_needed_clustered": clusters_needed_two_proportions(effect, baseline, cluster_size, icc),
        f"{trial}s_needed_per_{unit}": trials_needed(effect, baseline, n_units, icc),
        "design": (f"paired t over {unit}s (TTestPower, SD of per-{unit} differences); clustered two-proportion "
                   f"z (NormalIndPower, Cohen's h, n / design effect 1 + (m − 1)·ICC, m = {trial}s per {unit})"),
    }
