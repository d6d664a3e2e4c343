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
