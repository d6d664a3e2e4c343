"""The factor regressions of #41 point 5 on synthetic data whose outcome one factor drives: the fit finds that
factor (significant, the right sign and size) and not the others, and the gap share is 1 for the factor that makes
the S − T gap and about 0 for one that does not."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sctc_assets.lib import bias_factors as bf, stats


def _terms(seed: int = 7, n_terms: int = 110) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"term_id": np.arange(n_terms), "corpus": rng.normal(1.0, 1.5, n_terms),
                         "tokens": rng.normal(0.0, 0.4, n_terms), "logprob": rng.normal(0.0, 2.0, n_terms)})


def _trials(terms: pd.DataFrame, logit, seed: int, trials: int = 15) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = terms.loc[terms.index.repeat(trials)].reset_index(drop=True)
    p = 1 / (1 + np.exp(-logit(rows)))
    rows["y"] = (rng.random(len(rows)) < p).astype(float)
    return rows


def test_the_driving_factor_is_recovered_and_the_others_are_not():
    terms = _terms()
    z = (terms["corpus"] - terms["corpus"].mean()) / terms["corpus"].std(ddof=1)
    rows = _trials(terms.assign(z=z), lambda r: -0.2 + 1.0 * r["z"], seed=3)
    fitted, entered = bf.fit_factors(rows["y"], rows[["corpus", "tokens", "logprob"]], rows["term_id"])
    by = {row["factor"]: row for row in fitted}
    assert entered == ["corpus", "tokens", "logprob"]
    assert by["corpus"]["p"] < 1e-6 and by["corpus"]["ci_low"] < 1.0 < by["corpus"]["ci_high"]
    assert by["corpus"]["ci_low"] > 0.5
    # The others, BH-adjusted across the three as the tables adjust their family: not significant.
    adjusted = dict(zip(by, stats.bh_adjust([by[name]["p"] for name in by])))
    assert adjusted["corpus"] < 1e-5 and adjusted["tokens"] > 0.05 and adjusted["logprob"] > 0.05
    assert by["corpus"]["n_units"] == 110 and by["corpus"]["n_trials"] == 1650


def test_a_factor_without_variation_is_not_entered_and_a_constant_outcome_gives_p_1():
    terms = _terms().assign(tokens=2.0)
    rows = _trials(terms, lambda r: 0.0 * r["corpus"] + 50, seed=1)
    fitted, entered = bf.fit_factors(rows["y"], rows[["corpus", "tokens"]], rows["term_id"])
    assert entered == ["corpus"] and fitted[0]["p"] == 1.0 and np.isnan(fitted[0]["coef"])


def test_gap_share_is_one_for_the_factor_that_makes_the_gap():
    terms = _terms(seed=11)
    s = _trials(terms, lambda r: 1.2 * r["corpus"], seed=5).assign(s=1.0)
    t = _trials(terms, lambda r: -1.2 * r["corpus"], seed=6).assign(s=0.0)
    rows = pd.concat([s, t], ignore_index=True)
    shares = bf.gap_shares(rows["y"], rows["s"], rows[["corpus", "tokens"]], rows["term_id"])
    assert shares["corpus"]["gap_log_odds"] > 0.5  # mean corpus log ratio 1.0 > 0: S answers are right more often
    assert shares["corpus"]["gap_share"] == pytest.approx(1.0, abs=0.1)
    assert abs(shares["tokens"]["gap_share"]) < 0.15


def test_term_table_reads_counts_and_adjusts_across_the_model():
    terms = _terms(seed=2)
    by_term = []
    rng = np.random.default_rng(0)
    for lang, sign in (("zh_hans", 1), ("zh_hant", -1)):
        p = 1 / (1 + np.exp(-sign * 1.5 * terms["corpus"]))
        k = rng.binomial(15, p)
        by_term.append(pd.DataFrame({"model": "m", "lang": lang, "prompt_variant": 1, "label_source": "rules",
                                     "term_id": terms["term_id"], "n_correct": k, "n_misaligned": 15 - k,
                                     "n_incorrect": 0, "n_trials": 15}))
    table = bf.term_bias_factors(pd.concat(by_term), terms.set_index("term_id")[["corpus", "tokens"]], model="m",
                                 label_source="rules", tokenizer="t", simplified="zh_hans", traditional="zh_hant")
    assert list(table.columns) == bf.TERM_COLUMNS
    assert len(table) == 2 * 2 * 2
    corpus = table[(table["factor"] == "corpus") & (table["outcome"] == "correct")].set_index("lang")
    assert corpus.loc["zh_hans", "coef"] > 0 > corpus.loc["zh_hant", "coef"]
    assert (corpus["p_bh"] < 0.001).all()
    assert (table["p_bh"] >= table["p"] - 1e-15).all()
    assert set(table["factors_entered"]) == {"corpus,tokens"}
    assert set(table["factors_left_out"]) == {"logprob: no values"}
    assert (table["gap_note"] == "").all() and table["gap_share"].notna().all()


def _pair_trials(seed: int, gap: float, n_terms: int = 60, trials: int = 20) -> pd.DataFrame:
    """S and T answers to the same terms, the S − T log-odds gap `gap`, a corpus factor unrelated to it."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0.0, 1.0, n_terms)
    rows = []
    for s in (1.0, 0.0):
        p = 1 / (1 + np.exp(-(0.3 + gap * s)))
        for term in range(n_terms):
            rows.append(pd.DataFrame({"term_id": term, "s": s, "corpus": x[term],
                                      "y": (rng.random(trials) < p).astype(float)}))
    return pd.concat(rows, ignore_index=True)


def test_a_zero_gap_gives_nan_with_the_reason_never_a_division_by_almost_zero(monkeypatch):
    rows = _pair_trials(seed=5, gap=0.0)
    # The same answers under both scripts: the gap is exactly 0 (up to the fit's precision).
    half = rows[rows["s"] == 1.0]
    rows = pd.concat([half, half.assign(s=0.0)], ignore_index=True)
    share = bf.gap_shares(rows["y"], rows["s"], rows[["corpus"]], rows["term_id"])["corpus"]
    assert abs(share["gap_log_odds"]) < bf.GAP_TOLERANCE
    assert np.isnan(share["gap_share"]) and "no S − T gap" in share["gap_note"]
    # The tolerance is what decides: a gap of 1e-9 gives NaN, not ±1e8.
    monkeypatch.setattr(bf, "_gee", _fake_gee([1e-9, 0.5]))
    share = bf.gap_shares(rows["y"], rows["s"], rows[["corpus"]], rows["term_id"])["corpus"]
    assert share["gap_log_odds"] == 1e-9 and np.isnan(share["gap_share"]) and share["gap_note"]


def _fake_gee(s_coefs):
    calls = iter(s_coefs)

    class Fitted:
        def __init__(self, value):
            self.params = np.array([0.0, value, 0.0, 0.0])

    return lambda y, design, clusters: Fitted(next(calls))


def test_an_undefined_gap_gives_nan_with_its_reason(monkeypatch):
    rows = _pair_trials(seed=6, gap=1.0)
    only_s = rows[rows["s"] == 1.0]
    share = bf.gap_shares(only_s["y"], only_s["s"], only_s[["corpus"]], only_s["term_id"])["corpus"]
    assert np.isnan(share["gap_share"]) and "only one prompting script" in share["gap_note"]
    constant = rows.assign(y=1.0)
    share = bf.gap_shares(constant["y"], constant["s"], constant[["corpus"]], constant["term_id"])["corpus"]
    assert np.isnan(share["gap_share"]) and "never varies" in share["gap_note"]
    unknown = rows.assign(corpus=np.nan)
    share = bf.gap_shares(unknown["y"], unknown["s"], unknown[["corpus"]], unknown["term_id"])["corpus"]
    assert np.isnan(share["gap_share"]) and "no answers" in share["gap_note"]
    monkeypatch.setattr(bf, "_gee", _fake_gee([np.inf, 0.5]))
    share = bf.gap_shares(rows["y"], rows["s"], rows[["corpus"]], rows["term_id"])["corpus"]
    assert np.isnan(share["gap_share"]) and np.isnan(share["gap_log_odds"]) and "finite" in share["gap_note"]
    # A real gap the factor does not explain: a number near 0, no note.
    monkeypatch.undo()
    share = bf.gap_shares(rows["y"], rows["s"], rows[["corpus"]], rows["term_id"])["corpus"]
    assert share["gap_note"] == "" and abs(share["gap_share"]) < 0.2 and share["gap_log_odds"] > 0.5


def test_the_table_names_the_factors_left_out_and_why():
    terms = _terms(seed=4, n_terms=40)
    rng = np.random.default_rng(1)
    by_term = pd.DataFrame({"model": "m", "lang": "zh_hans", "prompt_variant": 1, "label_source": "rules",
                            "term_id": terms["term_id"], "n_correct": rng.binomial(10, 0.5, 40), "n_trials": 10})
    by_term["n_misaligned"] = 10 - by_term["n_correct"]
    factors = terms.set_index("term_id")[["corpus"]].assign(tokens=1.0)
    table = bf.term_bias_factors(by_term, factors, model="m", label_source="rules", tokenizer="", simplified="zh_hans",
                                 traditional="zh_hant", missing={"logprob": "none for the term task"})
    assert set(table["factor"]) == {"corpus"}
    assert set(table["factors_left_out"]) == {"tokens: no variation across the units; logprob: none for the term task"}
    assert set(table["gap_note"]) == {"no Simplified and Traditional prompts to compare"}


@pytest.mark.parametrize("seed,unbalanced,interaction", [(1, False, False), (2, True, True), (3, True, False)])
def test_the_cell_solve_gives_statsmodels_gee_estimates(seed, unbalanced, interaction):
    """`_gee` solves on (cluster, pattern) cells: its coefficients, robust SEs and p-values are statsmodels' GEE's
    (exchangeable, robust) on the trials, with unequal cluster sizes and a within-cluster covariate too."""
    rng = np.random.default_rng(seed)
    clusters = np.repeat(np.arange(90), 40)
    s = rng.integers(0, 2, len(clusters)).astype(float)
    if unbalanced:
        keep = rng.random(len(clusters)) < 0.7
        clusters, s = clusters[keep], s[keep]
    x, shared = rng.normal(0, 1, 90), rng.normal(0, 1, 90)
    p = 1 / (1 + np.exp(-(0.2 + 0.7 * x[clusters] + 0.4 * s + shared[clusters])))
    y = (rng.random(len(clusters)) < p).astype(float)
    columns = [np.ones(len(y)), x[clusters]] + ([s, s * x[clusters]] if interaction else [])
    design = np.column_stack(columns)
    fast, reference = bf._aggregated_gee(y, design, clusters), bf._statsmodels_gee(y, design, clusters)
    assert reference.model.cov_struct.dep_params > 0.05  # a real within-cluster correlation to estimate
    np.testing.assert_allclose(fast.params, reference.params, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(fast.bse, reference.bse, rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(fast.pvalues, reference.pvalues, rtol=1e-6, atol=1e-12)


def test_bh_is_statsmodels_fdr_bh():
    rng = np.random.default_rng(9)
    for values in (rng.random(40) ** 3, np.r_[rng.random(10), np.nan, 0.0, 1.0, 0.5, 0.5], np.array([np.nan]),
                   np.array([])):
        np.testing.assert_allclose(bf.bh_adjust(values), stats.bh_adjust(values), rtol=1e-12, equal_nan=True)


def test_a_design_without_identified_coefficients_is_not_estimable_not_a_pseudo_inverse_answer():
    """statsmodels answers a rank-deficient GEE with an arbitrary (pseudo-inverse) solution: here two collinear
    factors, and a gap share over one unit only, are reported as not estimable instead."""
    rng = np.random.default_rng(3)
    units = np.repeat(np.arange(40), 10)
    corpus = np.repeat(rng.normal(size=40), 10)
    factors = pd.DataFrame({"corpus": corpus, "tokens": 2 * corpus + 1})  # the same factor twice
    outcome = (rng.random(400) < 1 / (1 + np.exp(-corpus))).astype(float)
    rows, entered = bf.fit_factors(outcome, factors, units)
    assert entered == ["corpus", "tokens"]
    assert all(np.isnan(row["coef"]) and np.isnan(row["se"]) for row in rows)
    simplified = (np.arange(400) % 2).astype(float)
    one_unit = bf.gap_shares(outcome, simplified, pd.DataFrame({"corpus": np.full(400, 0.5)}), np.zeros(400))
    assert np.isnan(one_unit["corpus"]["gap_share"]) and "two" in one_unit["corpus"]["gap_note"]
    # one factor alone is estimable
    rows, _ = bf.fit_factors(outcome, factors[["corpus"]], units)
    assert np.isfinite(rows[0]["coef"]) and rows[0]["coef"] > 0


def test_separation_is_not_estimable_as_statsmodels_finds_without_asking_it(monkeypatch):
    """An outcome the factor predicts perfectly: the GEE's iterates run off to infinity. statsmodels ends in NaN
    after its iterations; the fit says so at once and does not ask it."""
    rng = np.random.default_rng(11)
    units = np.repeat(np.arange(30), 8)
    corpus = np.repeat(rng.normal(size=30), 8)
    outcome = (corpus > 0).astype(float)
    asked = []
    monkeypatch.setattr(bf, "_statsmodels_gee", lambda *args: asked.append(args))
    rows, entered = bf.fit_factors(outcome, pd.DataFrame({"corpus": corpus}), units)
    assert entered == ["corpus"] and np.isnan(rows[0]["coef"]) and not asked
