"""Misalignment counted by term category (the paper's "misaligned Traditional Chinese terms are disproportionately
about travel topics", Section 3.2.1), with a test of whether the categories differ.

The unit of the test is the term, not the answer: a term's trials repeat one prompt, so its answers are not
independent (the statistics work's finding, `lib/term/robust.py`), and the paper's own notion is the misaligned
term (at least 3 of 15 trials). Per model × lang × prompt variant × label source the categories × (misaligned,
not misaligned) terms form an r × 2 table. Its chi-square statistic (scipy's `chi2_contingency`) is reported with
the asymptotic p-value and, as the p-value to decide on, a Monte Carlo permutation p-value of the same statistic
with both margins fixed (the misaligned flags shuffled over the terms): the exact test of an r × 2 table with
these margins (Fisher–Freeman–Halton) is not in scipy (`fisher_exact` is 2 × 2 only), and with 110 terms over
several categories most expected counts are under 5, where the chi-square approximation is unreliable. Each
category against the rest gets Fisher's exact test (2 × 2, `scipy.stats.fisher_exact`), BH-adjusted within its
group, which says which category stands out ("travel").
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.multitest import multipletests

GROUP_KEYS = ["model", "lang", "prompt_variant", "label_source"]
PERMUTATIONS = 10_000
SEED = 20250601

CATEGORY_COLUMNS = GROUP_KEYS + [
    "category", "n_terms", "n_misaligned_terms", "pct_misaligned_terms", "n_answers", "n_misaligned_answers",
    "pct_misaligned_answers", "odds_ratio_vs_rest", "fisher_p_vs_rest", "fisher_p_vs_rest_bh", "chi2", "chi2_df",
    "chi2_p", "chi2_permutation_p", "min_expected", "permutations"]


def chi2_statistic(counts: np.ndarray) -> float:
    """Pearson's chi-square of an r × 2 table (0 where a margin is empty)."""
    expected = stats.contingency.expected_freq(counts)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(expected > 0, (counts - expected) ** 2 / expected, 0.0)
    return float(terms.sum())


def permutation_p(categories: np.ndarray, flags: np.ndarray, observed: float, *, permutations: int = PERMUTATIONS,
                  seed: int = SEED) -> float:
    """Monte Carlo p-value of the chi-square statistic with both margins fixed: the share of `permutations`
    shuffles of `flags` over the terms whose statistic is at least `observed`, with the observed table counted
    ((hits + 1) / (permutations + 1)). The shuffles' statistics depend only on the category sizes and the number of
    misaligned terms, so groups that share them (most of the models × languages × variants) share one draw."""
    _, sizes = np.unique(categories, return_counts=True)
    return _null_p(sizes, int(np.sum(flags)), observed, permutations, seed)


def _null_p(sizes: Sequence[int], misaligned_terms: int, observed: float, permutations: int, seed: int) -> float:
    """`permutation_p` from the category sizes and the number of misaligned terms."""
    statistics = _null_statistics(tuple(int(size) for size in sizes), misaligned_terms, permutations, seed)
    hits = int((statistics >= observed - 1e-9 * max(1.0, observed)).sum())
    return (hits + 1) / (permutations + 1)


@lru_cache(maxsize=512)
def _null_statistics(sizes: tuple[int, ...], misaligned_terms: int, permutations: int, seed: int) -> np.ndarray:
    """The chi-square statistics of `permutations` random assignments of `misaligned_terms` misaligned terms to
    categories of `sizes` terms (each a uniform shuffle of the flags over the terms; read-only)."""
    n = sum(sizes)
    flags = np.zeros(n)
    flags[:misaligned_terms] = 1.0
    rng = np.random.default_rng(seed)
    shuffled = rng.permuted(np.broadcast_to(flags, (permutations, n)), axis=1)  # permutations × terms
    bounds = np.cumsum((0,) + sizes)
    misaligned = np.add.reduceat(shuffled, bounds[:-1], axis=1)  # permutations × categories
    sizes_array = np.asarray(sizes, dtype=float)
    share = misaligned_terms / n
    expected_yes, expected_no = sizes_array * share, sizes_array * (1 - share)
    with np.errstate(divide="ignore", invalid="ignore"):
        yes = np.where(expected_yes > 0, (misaligned - expected_yes) ** 2 / expected_yes, 0.0)
        no = np.where(expected_no > 0, ((sizes_array - misaligned) - expected_no) ** 2 / expected_no, 0.0)
    statistics = (yes + no).sum(axis=1)
    statistics.setflags(write=False)
    return statistics


@lru_cache(maxsize=4096)
def _fisher(a: int, b: int, c: int, d: int) -> tuple[float, float]:
    """scipy's `fisher_exact` of [[a, b], [c, d]] (odds ratio, p), once per table: groups repeat their tables."""
    result = stats.fisher_exact([[a, b], [c, d]])
    return float(result.statistic), float(result.pvalue)


def misalignment_by_category(by_term: pd.DataFrame, *, permutations: int = PERMUTATIONS,
                             seed: int = SEED) -> pd.DataFrame:
    """One row per model × lang × prompt variant × label source × category (see the module's docstring). The
    categories' counts come from one grouping of the whole table; the tests run per group on its counts."""
    if by_term.empty:
        return pd.DataFrame(columns=CATEGORY_COLUMNS)
    frame = by_term.assign(category=by_term["category"].fillna("").astype(str))
    per = frame.groupby(GROUP_KEYS + ["category"], sort=True).agg(
        n_terms=("term_id", "size"), n_misaligned_terms=("misaligned_term", "sum"),
        n_answers=("n_trials", "sum"), n_misaligned_answers=("n_misaligned", "sum")).reset_index()
    per["n_misaligned_terms"] = per["n_misaligned_terms"].astype(int)
    terms, misaligned = per["n_terms"].to_numpy(int), per["n_misaligned_terms"].to_numpy(int)
    rows = len(per)
    columns = {name: np.full(rows, math.nan) for name in ("odds_ratio_vs_rest", "fisher_p_vs_rest",
                                                          "fisher_p_vs_rest_bh", "chi2", "chi2_p",
                                                          "chi2_permutation_p", "min_expected")}
    chi2_df, tested = np.zeros(rows, int), np.zeros(rows, int)
    starts = np.flatnonzero(np.r_[True, (per[GROUP_KEYS].iloc[1:].to_numpy()
                                         != per[GROUP_KEYS].iloc[:-1].to_numpy()).any(axis=1)])
    for start, stop in zip(starts, np.r_[starts[1:], rows]):
        part = slice(start, stop)
        n, k = terms[part], misaligned[part]
        total, flagged = int(n.sum()), int(k.sum())
        chi2_df[part] = max(stop - start - 1, 0)
        if not (stop - start > 1 and 0 < flagged < total):
            continue
        counts = np.column_stack([k, n - k]).astype(float)
        chi2, chi2_p, dof, expected = stats.chi2_contingency(counts, correction=False)
        columns["chi2"][part], columns["chi2_p"][part] = chi2, chi2_p
        columns["chi2_permutation_p"][part] = _null_p(n, flagged, float(chi2), permutations, seed)
        columns["min_expected"][part] = float(expected.min())
        chi2_df[part], tested[part] = int(dof), permutations
        fisher = [_fisher(int(a), int(size - a), flagged - int(a), total - flagged - int(size - a))
                  for a, size in zip(k, n)]
        columns["odds_ratio_vs_rest"][part] = [odds for odds, _ in fisher]
        columns["fisher_p_vs_rest"][part] = [p for _, p in fisher]
        columns["fisher_p_vs_rest_bh"][part] = multipletests([p for _, p in fisher], method="fdr_bh")[1]
    per["pct_misaligned_terms"] = 100 * per["n_misaligned_terms"] / per["n_terms"]
    per["pct_misaligned_answers"] = 100 * per["n_misaligned_answers"] / per["n_answers"].where(per["n_answers"] > 0)
    per = per.assign(**columns, chi2_df=chi2_df, permutations=tested)
    for key in GROUP_KEYS:  # the types that plain values give (what a group's keys gave), not the input's
        per[key] = pd.Series(per[key].tolist(), index=per.index)
    return per[CATEGORY_COLUMNS].astype({"n_terms": "int64", "n_misaligned_terms": "int64", "n_answers": "int64",
                                        "n_misaligned_answers": "int64", "chi2_df": "int64",
                                        "permutations": "int64"})
