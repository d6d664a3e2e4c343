"""Term metric tables on a hand-made label table, and on the published responses against the paper."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from sctc_assets.lib import stats
from sctc_assets.lib.sctc_upstream import (PAPER_MODELS, TERM_COLUMNS, TERMS_FILE, term_details_file,
                                           term_judgement_file, term_prompt_file, term_response_file)
from sctc_assets.lib.term import metrics
from sctc_assets.lib.term.terms import parse_terms
from sctc_assets.lib.term.upstream_labels import clean_judgements, upstream_label, upstream_misaligned


def _labels(model, lang, labels, variant=1, source="rules"):
    return pd.DataFrame({"model": model, "lang": lang, "prompt_variant": variant, "label_source": source,
                         "term_id": [i % 4 for i in range(len(labels))], "trial": [i // 4 for i in range(len(labels))],
                         "label": labels})


@pytest.fixture
def small_labels():
    # model a: S 6 correct / 1 misaligned / 1 incorrect; T 2 / 4 / 2. model b: S 4/0/4, T 4/0/4.
    return pd.concat([
        _labels("a", "zh_hans", ["correct"] * 6 + ["misaligned"] + ["incorrect"]),
        _labels("a", "zh_hant", ["correct"] * 2 + ["misaligned"] * 4 + ["incorrect"] * 2),
        _labels("b", "zh_hans", ["correct"] * 4 + ["incorrect"] * 4),
        _labels("b", "zh_hant", ["correct"] * 4 + ["incorrect"] * 4),
    ], ignore_index=True)


def test_rates_by_hand(small_labels):
    rates = metrics.choice_rates(small_labels, {"all": {0, 1, 2, 3}, "no_gpt_definitions": {0, 1}})
    row = rates[(rates.model == "a") & (rates.lang == "zh_hant") & (rates.subset == "all")].iloc[0]
    assert (row.n, row.pct_correct, row.pct_misaligned, row.pct_incorrect) == (8, 25.0, 50.0, 25.0)
    # term ids 0 and 1 are rows 0, 1, 4 and 5 of each block
    row = rates[(rates.model == "a") & (rates.lang == "zh_hans") & (rates.subset == "no_gpt_definitions")].iloc[0]
    assert (row.n, row.pct_correct, row.n_correct) == (4, 100.0, 4)
    row = rates[(rates.model == "a") & (rates.lang == "zh_hant") & (rates.subset == "no_gpt_definitions")].iloc[0]
    assert (row.pct_correct, row.pct_misaligned, row.pct_incorrect) == (50.0, 50.0, 0.0)


def test_tests_by_hand(small_labels):
    rates = metrics.choice_rates(small_labels, {"all": {0, 1, 2, 3}})
    tests = metrics.choice_tests(rates)
    a = tests[(tests.model == "a") & (tests.measure == "correct")].iloc[0]
    assert (a.k_s, a.n_s, a.k_t, a.n_t) == (6, 8, 2, 8)
    assert a.diff_pct_points == 50.0
    assert a.z_p == pytest.approx(stats.two_proportion_ztest(6, 8, 2, 8)[1])
    b = tests[(tests.model == "b") & (tests.measure == "correct")].iloc[0]
    assert b.t_p == pytest.approx(1.0) and b.cohens_h == 0
    # BH across the two models of the family
    family = tests[tests.measure == "correct"].sort_values("model")
    assert family.t_p_bh.tolist() == pytest.approx(stats.bh_adjust(family.t_p.tolist()))
    mis = tests[(tests.model == "b") & (tests.measure == "misaligned")].iloc[0]
    assert (mis.t_p, mis.z_p) == (1.0, 1.0)


def test_misaligned_threshold_scales_the_three_of_fifteen_rule():
    assert [metrics.misaligned_threshold(n) for n in (15, 5, 1, 10, 30)] == [3, 1, 1, 2, 6]


@pytest.fixture(scope="module")
def published_labels(sctc_source):
    terms = parse_terms(sctc_source.read_csv(TERMS_FILE, TERM_COLUMNS))
    other = {"zh_hans": "zh_hant", "zh_hant": "zh_hans"}
    frames = []
    for variant in (1, 2, 3):
        for lang in ("zh_hans", "zh_hant"):
            other_gt = sctc_source.read_csv(term_prompt_file(other[lang], variant))["gt"].tolist()
            for model in PAPER_MODELS:
                responses = sctc_source.read_csv(term_response_file(model, lang, variant, no_think=model == "ds"))
                file = term_judgement_file(model, lang, variant)
                judged = clean_judgements(sctc_source.read_csv(file)["correct"].tolist(), upstream_name=model,
                                          lang=lang, variant=variant, file=file)
                labels = [upstream_label(upstream_misaligned(other_gt[row], answer, lang), judged[row])
                          for row, answer in enumerate(responses["response"])]
                frames.append(pd.DataFrame({
                    "model": model, "lang": lang, "prompt_variant": variant, "label_source": "upstream",
                    "term_id": [int(terms.term_id[row % 110]) for row in range(len(labels))],
                    "trial": [row // 110 for row in range(len(labels))], "label": labels}))
    return terms, pd.concat(frames, ignore_index=True)


def test_figure_2_rates_equal_the_sums_of_the_published_details(sctc_source, published_labels):
    terms, labels = published_labels
    rates = metrics.choice_rates(labels, metrics.subset_term_ids(terms))
    for lang in ("zh_hans", "zh_hant"):
        details = sctc_source.read_csv(term_details_file(lang, 1))
        for model in ("qwen", "gpt4o", "breeze"):
            counts = [tuple(map(int, cell.split(","))) for cell in details[model]]
            total = sum(sum(cell) for cell in counts)
            row = rates[(rates.model == model) & (rates.lang == lang) & (rates.prompt_variant == 1)
                        & (rates.subset == "all")].iloc[0]
            assert row.n == total == 1650
            assert row.pct_correct == pytest.approx(100 * sum(c[0] for c in counts) / total)
            assert row.pct_misaligned == pytest.approx(100 * sum(c[1] for c in counts) / total)
            assert row.pct_incorrect == pytest.approx(100 * sum(c[2] for c in counts) / total)


def test_published_rates_as_the_scripts_print_them(published_labels):
    terms, labels = published_labels
    rates = metrics.choice_rates(labels, metrics.subset_term_ids(terms)).round(2)
    def cell(model, lang, variant=1, subset="all"):
        row = rates[(rates.model == model) & (rates.lang == lang) & (rates.prompt_variant == variant)
                    & (rates.subset == subset)].iloc[0]
        return row.pct_correct, row.pct_misaligned, row.pct_incorrect
    assert cell("qwen", "zh_hans") == (54.48, 0.73, 44.79)
    assert cell("qwen", "zh_hant") == (13.27, 36.85, 49.88)
    assert cell("gpt4o", "zh_hans") == (67.58, 1.64, 30.79)
    assert cell("gpt4o", "zh_hant") == (21.76, 45.39, 32.85)
    assert cell("gpt4o", "zh_hant", variant=2) == (27.64, 38.48, 33.88)
    assert rates[(rates.subset == "no_gpt_definitions")].n.unique().tolist() == [1320]


def test_paper_section_3_2_1_and_appendix_correlations(published_labels):
    terms, labels = published_labels
    by_term = metrics.misalignment_by_term(labels, terms)
    summary = metrics.misalignment_summary(by_term)
    first = summary[(summary.prompt_variant == 1) & (summary.rule == "at_least_threshold")].set_index("lang")
    assert round(first.loc["zh_hant", "mean_terms"], 1) == 37.5
    assert round(first.loc["zh_hant", "sd_population"], 1) == 15.2
    assert round(first.loc["zh_hans", "mean_terms"], 1) == 4.4
    assert round(first.loc["zh_hans", "sd_population"], 1) == 2.3
    assert first.loc["zh_hant", "n_majority_terms"] == 34  # the 29 of Table 18 plus five (definitions file)
    ds = by_term[(by_term.model == "ds") & (by_term.lang == "zh_hant") & (by_term.prompt_variant == 1)]
    assert (int(ds.misaligned_term.sum()), int(ds.ever_misaligned.sum())) == (72, 78)

    correlations = metrics.variant_correlations(metrics.choice_rates(labels, metrics.subset_term_ids(terms)))
    # Appendix B.1 (Figures 7 and 8) and A.8 (Figure 5) as printed in the paper, which correlated the rates as
    # the figure scripts print them (2 decimals): 0.99650 from those, 0.99649 from the exact rates.
    r = correlations.set_index(["comparison", "measure"])["pearson_r_printed"].round(3)
    assert [r["variant_1_vs_2", m] for m in ("pct_correct", "pct_misaligned", "pct_incorrect")] == [0.980, 0.992, 0.970]
    assert [r["variant_1_vs_3", m] for m in ("pct_correct", "pct_misaligned", "pct_incorrect")] == [0.987, 0.985, 0.982]
    assert [r["all_vs_no_gpt_definitions", m] for m in ("pct_correct", "pct_misaligned", "pct_incorrect")] == \
        [0.999, 0.998, 0.997]


def test_paper_figure_2_significance_claims(published_labels):
    """Sec. 3.1: all LLMs but Breeze answer correctly more often in Simplified; all misalign more in Traditional."""
    terms, labels = published_labels
    tests = metrics.choice_tests(metrics.choice_rates(labels, metrics.subset_term_ids(terms)))
    first = tests[(tests.prompt_variant == 1) & (tests.subset == "all")]
    correct = first[first.measure == "correct"].set_index("model")
    assert set(correct.index[correct.t_p_bh >= 0.05]) == {"breeze"}
    assert (correct.drop("breeze").diff_pct_points > 0).all()
    misaligned = first[first.measure == "misaligned"]
    assert (misaligned.t_p_bh < 0.05).all() and (misaligned.diff_pct_points < 0).all()
    assert not math.isnan(first.z_p_bh.sum())
