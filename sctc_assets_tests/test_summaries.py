"""The end-of-run summaries of `sctc run` show every prompt variant, experiment, prompt set and format that ran;
and the built-in backends' settings as `sctc models` reads them without importing a backend."""

from __future__ import annotations

import pandas as pd
import pytest

from sctc_assets.benchmarks.name import name_summary
from sctc_assets.benchmarks.reviews import reviews_summary
from sctc_assets.benchmarks.sovereignty import sovereignty_summary_text
from sctc_assets.benchmarks.term import term_summary


def _headings(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("|")]


def test_the_term_summary_has_a_table_per_prompt_variant():
    rows = [{"model": "m", "label_source": "rules", "subset": subset, "prompt_variant": variant, "lang": lang, "n": 10,
             "pct_correct": 50.0, "pct_misaligned": 10.0, "pct_incorrect": 40.0}
            for variant in (1, 3) for lang in ("zh_hans", "zh_hant") for subset in ("all", "no_gpt_definitions")]
    text = term_summary({"term_choice_rates": pd.DataFrame(rows)}, ["m"])
    headings = _headings(text)
    assert [heading.split(",")[1].strip() for heading in headings] == ["prompt variant 1", "prompt variant 3"]
    assert text.count("| m ") == 2


def test_the_name_summary_has_a_table_per_experiment_in_the_papers_order():
    rows = [{"model": "m", "extraction_source": "rules", "experiment": experiment, "lang": lang, "n": 6, "n_valid": 3,
             "valid_rate": 0.5, "mainland_rate": 1 / 3, "sig_two_sided_bh": "NS"}
            for experiment in ("same_name_script", "main") for lang in ("zh_hans", "zh_hant", "en")]
    text = name_summary({"name_choice_tests": pd.DataFrame(rows)}, ["m"])
    assert [heading.split(" (")[0] for heading in _headings(text)] == [
        "Regional name choice, experiment main", "Regional name choice, experiment same_name_script"]
    assert text.count("33.3 NS") == 6


def _sovereignty_row(prompt_set: str, a: str, b: str) -> dict:
    return {"model": "m", "scoring_rule": "code", "prompt_set": prompt_set, "lang_a": a, "lang_b": b,
            "score_a": 0.9, "score_b": 0.8, "n_a": 10, "n_b": 10, "passed_a": 9, "passed_b": 8, "lbs": 10.0,
            "consistency": 0.9, "qac": 0.72, "mcnemar_b": 1, "mcnemar_c": 0, "mcnemar_unit": "response",
            "p_chi2": 0.32, "p_exact_bh": 1.0, "sig_exact_bh": "NS", "verdict": "PASS"}


def test_the_sovereignty_summary_has_a_table_per_prompt_set(monkeypatch):
    import sctc_assets.benchmarks.sovereignty as plan

    pairs = (("zh_hant", "en"), ("zh_hans", "en"), ("zh_hans", "zh_hant"))
    summary = pd.DataFrame([_sovereignty_row(prompt_set, a, b) for prompt_set in ("quick_test", "stage1_sovereignty")
                            for a, b in pairs])
    # The per-language scores come from the library; here they are the passed counts of the rows.
    monkeypatch.setattr(plan, "language_scores", lambda frame: pd.DataFrame(
        [{"model": "m", "scoring_rule": "code", "lang": lang, "passed": 9, "n": 10}
         for lang in ("zh_hant", "zh_hans", "en")]))
    text = sovereignty_summary_text({"sovereignty_summary": summary}, ["m"])
    headings = _headings(text)
    assert len(headings) == 2
    assert headings[0].startswith("Taiwan sovereignty benchmark, stage 1 ")
    assert headings[1].startswith("Taiwan sovereignty benchmark, prompt set quick_test ")


def test_the_review_summary_shows_every_format_and_the_translation_control():
    def row(fmt: str, analysis: str, subset: str) -> dict:
        return {"model": "m", "format": fmt, "analysis": analysis, "subset": subset, "n_pairs": 4, "n_excluded": None,
                "acc_tw": 50.0, "acc_cn": 25.0, "delta_acc": -25.0, "sig_acc": "NS", "mse_tw": 1.0, "mse_cn": 2.0,
                "delta_mse": 1.0, "sig_mse": "NS"}

    metrics = pd.DataFrame([row(fmt, "length", "all") for fmt in ("structured", "plain", "shuffled")]
                           + [row("plain", "translation", "original tw")])
    pairs = pd.DataFrame({"rating_class": ["8-10"], "length_group": ["short"]})
    text = reviews_summary({"review_pairs": pairs, "review_metrics": metrics}, ["m"])
    assert all(f"| {fmt} " in text for fmt in ("structured", "plain", "shuffled"))
    assert "Translation control (Table 3)" in text and "original tw" in text
    assert "| –" in text  # an unknown number of excluded pairs is shown as such, not as a crash


@pytest.mark.parametrize("backend", ["openai", "transformers", "replay", "tsb_replay"])
def test_the_settings_read_from_the_source_are_the_backends_fields(backend):
    from sctc_assets.backends import backend_class
    from sctc_assets.lib.backend_catalog import builtin_settings

    assert builtin_settings(backend) == set(backend_class(backend).model_fields)
    assert builtin_settings("mypackage.backends:Mine") is None
