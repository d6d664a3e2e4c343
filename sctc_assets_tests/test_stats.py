"""Statistics against values computed by hand from their textbook formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from sctc_assets.lib import stats

Z975 = 1.959963984540054


def test_wilson_interval_matches_the_formula():
    k, n = 30, 100
    p = k / n
    centre = (p + Z975**2 / (2 * n)) / (1 + Z975**2 / n)
    half = Z975 * math.sqrt(p * (1 - p) / n + Z975**2 / (4 * n**2)) / (1 + Z975**2 / n)
    low, high = stats.wilson_ci(k, n)
    assert low == pytest.approx(centre - half, abs=1e-9)
    assert high == pytest.approx(centre + half, abs=1e-9)
    assert stats.wilson_ci(0, 10)[0] == pytest.approx(0.0, abs=1e-12)
    assert all(math.isnan(value) for value in stats.wilson_ci(0, 0))


def test_two_proportion_z_matches_the_pooled_formula():
    k1, n1, k2, n2 = 45, 100, 30, 120
    pooled = (k1 + k2) / (n1 + n2)
    z = (k1 / n1 - k2 / n2) / math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    p = 2 * (1 - 0.5 * (1 + math.erf(abs(z) / math.sqrt(2))))
    got_z, got_p = stats.two_proportion_ztest(k1, n1, k2, n2)
    assert got_z == pytest.approx(z, rel=1e-9)
    assert got_p == pytest.approx(p, rel=1e-6)


def test_two_proportion_z_degenerate_cases():
    assert stats.two_proportion_ztest(0, 50, 0, 60) == (0.0, 1.0)
    z, p = stats.two_proportion_ztest(50, 50, 50, 50)
    assert (z, p) == (0.0, 1.0)
    assert all(math.isnan(value) for value in stats.two_proportion_ztest(1, 0, 1, 5))


def test_binary_welch_t_equals_ttest_on_indicator_vectors_and_hand_formula():
    k1, n1, k2, n2 = 12, 40, 25, 50
    x = np.r_[np.ones(k1), np.zeros(n1 - k1)]
    y = np.r_[np.ones(k2), np.zeros(n2 - k2)]
    reference = scipy_stats.ttest_ind(x, y, equal_var=False)
    t, p = stats.binary_ttest(k1, n1, k2, n2)
    assert t == pytest.approx(reference.statistic, rel=1e-9)
    assert p == pytest.approx(reference.pvalue, rel=1e-9)
    v1, v2 = x.var(ddof=1) / n1, y.var(ddof=1) / n2
    assert t == pytest.approx((x.mean() - y.mean()) / math.sqrt(v1 + v2), rel=1e-9)
    student = scipy_stats.ttest_ind(x, y, equal_var=True)
    assert stats.binary_ttest(k1, n1, k2, n2, equal_var=True)[1] == pytest.approx(student.pvalue, rel=1e-9)


def test_binary_t_without_variance():
    assert stats.binary_ttest(0, 10, 0, 12) == (0.0, 1.0)
    t, p = stats.binary_ttest(10, 10, 0, 12)
    assert t == math.inf and p == 0.0


def test_benjamini_hochberg_by_hand():
    # sorted 0.01, 0.03, 0.04, 0.20 → p·m/rank 0.04, 0.06, 0.0533…, 0.20 → running minimum from the top
    adjusted = stats.bh_adjust([0.01, 0.04, 0.03, 0.20])
    assert adjusted == pytest.approx([0.04, 0.04 * 4 / 3, 0.04 * 4 / 3, 0.20])
    with_nan = stats.bh_adjust([0.01, float("nan"), 0.02])
    assert with_nan[0] == pytest.approx(0.02) and math.isnan(with_nan[1]) and with_nan[2] == pytest.approx(0.02)


def test_one_sample_z_uses_the_sample_proportion_and_keeps_the_scripts_edge_cases():
    k, n = 30, 50
    p_hat = k / n
    z = (p_hat - 0.5) / math.sqrt(p_hat * (1 - p_hat) / n)
    got_z, got_p = stats.one_sample_proportion_ztest(k, n, 0.5, "larger")
    assert got_z == pytest.approx(z)
    assert got_p == pytest.approx(1 - 0.5 * (1 + math.erf(z / math.sqrt(2))), rel=1e-6)
    assert stats.one_sample_proportion_ztest(5, 5, 0.5, "larger") == (math.inf, 0.0)
    assert stats.one_sample_proportion_ztest(0, 5, 0.5, "larger") == (-math.inf, 1.0)


def test_cohens_h_and_stars():
    assert stats.cohens_h(0.5, 0.5) == 0
    assert stats.cohens_h(0.8, 0.2) == pytest.approx(2 * math.asin(math.sqrt(0.8)) - 2 * math.asin(math.sqrt(0.2)))
    assert [stats.sig_stars(p) for p in (0.0005, 0.001, 0.009, 0.01, 0.049, 0.05)] == ["***", "**", "**", "*", "*", "NS"]
    assert stats.sig_stars(0.2, no_ns=True) == ""


def test_pearson_needs_variance():
    r, p = stats.pearson([1, 2, 3, 4], [2, 4, 6, 8.5])
    assert r == pytest.approx(np.corrcoef([1, 2, 3, 4], [2, 4, 6, 8.5])[0, 1])
    assert math.isnan(stats.pearson([1, 1, 1], [1, 2, 3])[0])
