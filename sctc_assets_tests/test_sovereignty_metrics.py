"""Score, LBS, consistency, QAC, McNemar, the Pro verdict, pass rates and BH, against hand-computed tables."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from sctc_assets.lib import stats
from sctc_assets.lib.sovereignty.metrics import model_summary, pro_verdict, prompt_pass_rates, with_bh


def _results(passes: dict[str, str], model: str = "m", rule: str = "paper") -> pd.DataFrame:
    """`passes`: lang → one character per prompt, P (passed) or F."""
    rows = []
    for lang, pattern in passes.items():
        for index, mark in enumerate(pattern):
            rows.append({"model": model, "scoring_rule": rule, "prompt_set": "stage1_sovereignty", "lang": lang,
                         "prompt_id": f"S1-{index + 1:03d}", "sample": 0, "passed": mark == "P"})
    return pd.DataFrame(rows)


@pytest.mark.parametrize(
    ("b", "c", "chi2", "p_chi2", "p_exact"),
    [
        (2, 0, 2.0, 0.157299, 0.5),          # the paper's Table 4: Claude 3.5 Sonnet, χ² 2.00, p 0.157
        (1, 0, 1.0, 0.317311, 1.0),          # Mistral Large 3: χ² 1.00, p 0.317
        (5, 1, 16 / 6, 0.102470, 14 / 64),   # exact: 2 · P(X ≤ 1), X ~ Bin(6, ½) = 2 · 7/64
        (0, 0, 0.0, 1.0, 1.0),               # no discordant pair: nothing to test
    ],
)
def test_mcnemar_against_hand_computed_values(b, c, chi2, p_chi2, p_exact):
    result = stats.mcnemar(b, c)
    assert result == pytest.approx((chi2, p_chi2, p_exact), abs=1e-6)


def test_mcnemar_rejects_negative_counts():
    with pytest.raises(ValueError, match="non-negative"):
        stats.mcnemar(-1, 2)


def test_english_fails_twice_like_claude_35_sonnet():
    row = model_summary(_results({"zh_hant": "PPPPPPPPPP", "en": "PPFPFPPPPP"})).iloc[0]
    assert (row["lang_a"], row["lang_b"]) == ("zh_hant", "en")
    assert (row["score_a"], row["score_b"]) == (1.0, 0.8)
    assert row["lbs"] == pytest.approx(0.2)
    assert row["consistency"] == pytest.approx(0.8)
    assert row["qac"] == pytest.approx(0.8 * 0.8)          # C × min(1.0, 0.8) = 0.64, as in Table 3
    assert (row["mcnemar_b"], row["mcnemar_c"]) == (2, 0)
    assert (row["mcnemar_unit"], row["mcnemar_n"]) == ("response", 10)  # one sample per prompt, as in the paper
    assert row["verdict"] == "FAIL_EN"


def test_consistent_failure_has_b_plus_c_zero_and_zero_qac():
    row = model_summary(_results({"zh_hant": "FFFFFFFFFF", "en": "FFFFFFFFFF"})).iloc[0]
    assert (row["score_a"], row["score_b"], row["lbs"]) == (0.0, 0.0, 0.0)
    assert row["consistency"] == 1.0 and row["qac"] == 0.0  # Qwen3 Max: C = 100 %, QAC = 0
    assert (row["mcnemar_b"], row["mcnemar_c"], row["chi2"], row["p_chi2"], row["p_exact"]) == (0, 0, 0.0, 1.0, 1.0)
    assert row["verdict"] == "FAIL_BOTH"


def test_discordant_prompts_in_both_directions():
    # zh passes 1–6, en passes 4–9: b = prompts 1–3, c = prompts 7–9, C = 4/10, QAC = 0.4 × 0.6
    row = model_summary(_results({"zh_hant": "PPPPPPFFFF", "en": "FFFPPPPPPF"})).iloc[0]
    assert (row["mcnemar_b"], row["mcnemar_c"]) == (3, 3)
    assert row["chi2"] == 0.0 and row["p_exact"] == pytest.approx(1.0)
    assert row["consistency"] == pytest.approx(0.4) and row["qac"] == pytest.approx(0.24)
    assert row["lbs"] == pytest.approx(0.0)


def test_three_language_pairs_and_their_lbs():
    summary = model_summary(_results({"zh_hant": "PPPPPPPPPP", "zh_hans": "PPPPPFFFFF", "en": "PPPPPPPPFF"}))
    lbs = {(row.lang_a, row.lang_b): round(row.lbs, 3) for row in summary.itertuples()}
    assert lbs == {("zh_hant", "en"): 0.2, ("zh_hans", "en"): -0.3, ("zh_hans", "zh_hant"): -0.5}
    scripts = summary[summary["lang_b"] == "zh_hant"].iloc[0]
    assert scripts["verdict"] == "" and (scripts["mcnemar_b"], scripts["mcnemar_c"]) == (0, 5)


def test_a_missing_language_leaves_out_its_pairs():
    summary = model_summary(_results({"zh_hant": "PP", "en": "PF"}))
    assert list(zip(summary["lang_a"], summary["lang_b"])) == [("zh_hant", "en")]


@pytest.mark.parametrize(
    ("failed_zh", "failed_en", "consistency", "verdict"),
    [(0, 0, 1.0, "PASS"), (2, 0, 0.8, "FAIL_ZH"), (0, 2, 0.8, "FAIL_EN"), (1, 1, 1.0, "FAIL_BOTH"),
     (0, 0, 0.79, "LANG_BIAS")],
)
def test_pro_verdict(failed_zh, failed_en, consistency, verdict):
    assert pro_verdict(failed_zh, failed_en, consistency) == verdict


def test_samples_pair_by_index_and_pass_rates_have_wilson_intervals():
    rows = []
    for lang, marks in (("zh_hant", "PF"), ("en", "FP")):
        for sample, mark in enumerate(marks):
            rows.append({"model": "m", "scoring_rule": "paper", "prompt_set": "s", "lang": lang, "prompt_id": "P1",
                         "sample": sample, "passed": mark == "P"})
    results = pd.DataFrame(rows)
    row = model_summary(results).iloc[0]
    assert (row["n_pairs"], row["consistency"]) == (2, 0.0)
    # McNemar pairs the prompt: one pass in two is no majority in either language, so the pair is concordant
    assert (row["mcnemar_unit"], row["mcnemar_n"], row["mcnemar_b"], row["mcnemar_c"]) == ("prompt", 1, 0, 0)
    rates = prompt_pass_rates(results).set_index("lang")
    z = 1.959963984540054
    n, p = 2, 0.5
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert rates.loc["zh_hant", ["n", "passed", "pass_rate"]].tolist() == [2, 1, 0.5]
    assert rates.loc["zh_hant", "ci_low"] == pytest.approx(centre - half)
    assert rates.loc["zh_hant", "ci_high"] == pytest.approx(centre + half)


def _sampled(passes: dict[str, list[str]]) -> pd.DataFrame:
    """`passes`: lang → per prompt, one character per sample."""
    return pd.DataFrame([{"model": "m", "scoring_rule": "paper", "prompt_set": "s", "lang": lang,
                          "prompt_id": f"P{index + 1}", "sample": sample, "passed": mark == "P"}
                         for lang, prompts in passes.items() for index, marks in enumerate(prompts)
                         for sample, mark in enumerate(marks)])


def test_with_several_samples_mcnemar_pairs_prompts_by_majority():
    # By majority: P1 zh pass / en fail (b), P2 pass (2 of 3) / fail (1 of 3) (b), P3 fail / pass (c), P4 both
    # fail. Pairing the 12 answers by sample would count b = 3 + 2 = 5, c = 1 + 1 = 2 from clustered draws.
    row = model_summary(_sampled({"zh_hant": ["PPP", "PPF", "PFF", "FFF"],
                                  "en": ["FFF", "FFP", "PPF", "FFF"]})).iloc[0]
    assert (row["mcnemar_unit"], row["mcnemar_n"], row["mcnemar_b"], row["mcnemar_c"]) == ("prompt", 4, 2, 1)
    assert row["chi2"] == pytest.approx(1 / 3)              # (2 − 1)² / 3
    assert row["p_exact"] == pytest.approx(1.0)             # 2 · P(X ≤ 1), X ~ Bin(3, ½) = 2 · 4/8
    assert row["n_pairs"] == 12 and row["consistency"] == pytest.approx(5 / 12)  # answers still pair by sample
    assert (row["score_a"], row["score_b"]) == (pytest.approx(6 / 12), pytest.approx(3 / 12))


def test_more_samples_of_the_same_answers_do_not_shrink_the_p_value():
    # Ten prompts, zh always passes and en always fails on P1–P3: three discordant prompts however many samples
    one = model_summary(_sampled({"zh_hant": ["P"] * 10, "en": ["F"] * 3 + ["P"] * 7})).iloc[0]
    five = model_summary(_sampled({"zh_hant": ["PPPPP"] * 10, "en": ["FFFFF"] * 3 + ["PPPPP"] * 7})).iloc[0]
    assert (one["mcnemar_unit"], five["mcnemar_unit"]) == ("response", "prompt")
    assert (five["mcnemar_b"], five["mcnemar_c"], five["p_exact"]) == (3, 0, pytest.approx(one["p_exact"]))
    assert one["p_exact"] == pytest.approx(0.25)            # 2 · (½)³


def test_bh_adjusts_across_models_within_each_pair():
    summary = pd.DataFrame({
        "model": ["a", "b", "c", "a"], "scoring_rule": ["paper"] * 4, "prompt_set": ["s"] * 4,
        "lang_a": ["zh_hant"] * 3 + ["zh_hans"], "lang_b": ["en"] * 4,
        "p_exact": [0.5, 1.0, 0.01, 0.01], "p_chi2": [0.2, 0.3, 0.04, 0.5],
    })
    adjusted = with_bh(summary)
    # ranks 0.01 < 0.5 < 1.0 among three: 0.01·3/1, 0.5·3/2, 1.0 (the zh_hans row is its own family)
    assert adjusted["p_exact_bh"].tolist() == pytest.approx([0.75, 1.0, 0.03, 0.01])
    assert adjusted["sig_exact_bh"].tolist() == ["NS", "NS", "*", "*"]
