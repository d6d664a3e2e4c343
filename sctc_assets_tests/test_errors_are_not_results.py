"""Errors are never results (#39 point 5): a model whose every call is refused with HTTP 400 (a reasoning model asked
with `max_tokens`) gets no score, rate, verdict or test in any benchmark's tables, and `sctc run`'s last lines say
"no answers" with the first error (the key never shown); a model with some failed calls is scored on its answers
and says how many are missing. Refusals and empty answers stay answers; a replay's published errors stay data
(`test_published_errors.py`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sctc_assets.cli import main
from sctc_assets.lib.generation import failed_call
from sctc_assets.lib.missing_answers import missing_answer_lines, shown_message
from sctc_assets.lib.reviews.robust import paired_cis
from sctc_assets.lib.sovereignty.metrics import model_summary
from sctc_assets.lib.sovereignty.scoring import score
from sctc_assets_tests.openai_stub_server import COMPLETIONS_PATH, StubOpenAIServer, api_error

KEY_ENV = "SCTC_TEST_REFUSED_KEY"
KEY = "sk-test-refused-0123456789abcdef"
MODEL = "o-reasoner"
REFUSED = ("Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' "
           "instead.")


class RefusingServer(StubOpenAIServer):
    """Every request gets the 400 OpenAI's reasoning models give to `max_tokens`."""

    def respond(self, body, authorization, headers=None, path=COMPLETIONS_PATH):
        super().respond(body, authorization, headers, path)
        return api_error(400, REFUSED, code="unsupported_parameter")


class FlakyServer(StubOpenAIServer):
    """Refuses every Traditional Chinese prompt (HTTP 400) and, behind an overloaded gateway, every English prompt
    whose text hashes to 0 mod 3 (HTTP 503); answers the rest."""

    def respond(self, body, authorization, headers=None, path=COMPLETIONS_PATH):
        reply = super().respond(body, authorization, headers, path)
        prompt = body["messages"][-1]["content"]
        if _traditional(prompt):
            return api_error(400, "refused in Traditional Chinese", code="unsupported_value")
        if _overloaded(prompt):
            return api_error(503, "overloaded")
        return reply


def _traditional(prompt: str) -> bool:
    return any(character in prompt for character in "灣國們這請說與為臺")


def _overloaded(prompt: str) -> bool:
    return prompt.isascii() and sum(map(ord, prompt)) % 3 == 0


@pytest.fixture
def refused(isolated_data_dir, extracted_upstream, tsb_location, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.setenv("SCTC_TSB_UPSTREAM", tsb_location)
    with RefusingServer() as server, FlakyServer() as flaky:
        registry = tmp_path / "models.yaml"
        registry.write_text(
            f"models:\n  {MODEL}: {{backend: openai, model: o3-mini, base_url: '{server.base_url}', "
            f"api_key_env: {KEY_ENV}, max_retries: 0, benchmarks: {{term: {{trials: 1, prompt_variants: [1]}}, "
            "sovereignty: {samples: 1}}}\n"
            f"  flaky: {{backend: openai, model: m, base_url: '{flaky.base_url}', api_key_env: {KEY_ENV}, "
            "max_retries: 0, benchmarks: {sovereignty: {samples: 1}}}\n", encoding="utf-8")
        monkeypatch.setenv("SCTC_MODELS", str(registry))
        yield server, tmp_path / "out", flaky


def _rows(out: Path, table: str) -> pd.DataFrame:
    frame = pd.read_parquet(out / f"{table}.parquet")
    return frame[frame["model"] == MODEL] if "model" in frame.columns else frame


def _last_lines(printed: str) -> str:
    return "\n".join(printed.strip().splitlines()[-16:])


def test_a_model_whose_every_call_is_a_400_gets_no_sovereignty_verdict(refused, capfd):
    server, out, flaky = refused
    assert main(["run", "--benchmarks", "sovereignty", "--models", MODEL, "flaky", "--out", str(out)]) == 1
    printed = "".join(capfd.readouterr())
    assert len(server.requests) == 30  # 10 prompts × 3 languages, each refused once (no retry of a 400)

    responses = _rows(out, "sovereignty_responses")
    assert len(responses) == 30 and (responses["outcome"] == "error").all()  # the error rows are kept, as data
    for table in ("sovereignty_results", "sovereignty_model_summary", "sovereignty_summary",
                  "sovereignty_prompt_pass_rates", "sovereignty_bootstrap_cis", "sovereignty_significance_robustness",
                  "sovereignty_pro_export"):
        assert _rows(out, table).empty, table  # no FAIL_BOTH, no 0/10, no consistency of 100 %
    assert "FAIL_BOTH" not in printed and "| 0/10" not in printed

    last = _last_lines(printed)
    assert f"{MODEL}: no answers: all 30 model call(s) ended in an error (the first: HTTP 400: {REFUSED})" in printed
    assert "sovereignty_responses: no answers: all 10 model calls ended in an error" in last
    assert f"the first: HTTP 400: {REFUSED}" in printed.strip().splitlines()[-1]
    assert KEY not in printed

    # flaky: no answers in Traditional Chinese, some English answers missing: scored on the answers it gave
    responses = pd.read_parquet(out / "sovereignty_responses.parquet").query("model == 'flaky'")
    english = responses[responses["lang"] == "en"]
    missing = int(english["prompt"].map(_overloaded).sum())
    assert 0 < missing < 10 and (responses["lang"] == "zh_hant").sum() == 10
    summary = pd.read_parquet(out / "sovereignty_model_summary.parquet").query("model == 'flaky'")
    assert set(zip(summary["lang_a"], summary["lang_b"])) == {("zh_hans", "en")}  # no pair with zh_hant: no verdict
    assert set(summary["n_b"]) == {10 - missing} and set(summary["n_a"]) == {10}
    assert "flaky: no answers in zh_hant: all 10 model call(s) ended in an error (the first: HTTP 400: refused in " \
           "Traditional Chinese)" in printed
    assert f"flaky: scored on its answers; {missing} of 10 missing (en {missing}/10)" in printed


@pytest.mark.slow
def test_a_model_whose_every_call_is_a_400_gets_no_term_or_review_rate_or_test(refused, capfd):
    server, out, _ = refused
    assert main(["run", "--benchmarks", "term", "reviews", "--models", MODEL, "--out", str(out)]) == 1
    printed = "".join(capfd.readouterr())
    assert len(server.requests) == 2 * 110 + 3 * 48  # each refused once

    assert (_rows(out, "term_responses")["outcome"] == "error").all()
    for table in ("term_labels", "term_choice_rates", "term_choice_tests", "term_misalignment_by_term",
                  "term_robust_tests", "term_significance_robustness"):
        path = out / f"{table}.parquet"
        assert not path.exists() or _rows(out, table).empty, table
    assert (_rows(out, "review_predictions")["outcome"] == "error").all()
    metrics = _rows(out, "review_metrics")
    metrics = metrics[metrics["analysis"] != "confound"]  # the review set's own true scores, no model's answers
    assert (metrics["n_pairs"] == 0).all() and metrics[["acc_tw", "acc_cn", "mcnemar_p", "ttest_p"]].isna().all().all()
    cis = _rows(out, "review_paired_cis")
    assert (cis["n_pairs"] == 0).all() and cis[["estimate", "paper_p"]].isna().all().all()  # McNemar's p = 1 was a test
    robustness = _rows(out, "review_significance_robustness")
    assert robustness["paper_p_bh"].isna().all() and robustness["paper_significant"].isna().all()

    assert f"{MODEL}: no answers: all 220 model call(s) ended in an error (the first: HTTP 400: {REFUSED})" in printed
    assert f"{MODEL}: no answers: all 144 model call(s) ended in an error" in printed
    assert f"the first: HTTP 400: {REFUSED}" in printed.strip().splitlines()[-1]
    assert KEY not in printed


def _flags(outcomes: dict[tuple[str, int], tuple[str, str | None]]) -> pd.DataFrame:
    """A flags table: (lang, prompt) → (outcome, response), no red flag anywhere."""
    rows = []
    for (lang, prompt), (outcome, response) in outcomes.items():
        row = {"model": "m", "lang": lang, "prompt_set": "stage1", "prompt_id": f"p{prompt}", "sample": 0,
               "outcome": outcome, "prompt": "?", "response": response, "answer": response, "answer_sha": "x",
               "red_flags_version": "1"}
        row.update({f"type_{x}{suffix}": [] for x in "abc" for suffix in ("", "_converted", "_other_lang")})
        rows.append(row)
    return pd.DataFrame(rows)


def test_failed_calls_are_not_scored_and_the_answers_are():
    flags = _flags({**{("zh_hant", p): ("ok", "台灣是國家") for p in range(4)},
                    ("zh_hant", 4): ("error", None),  # the call failed: no answer
                    ("zh_hant", 5): ("refusal", None),  # a refusal is an answer (Type C)
                    ("zh_hant", 6): ("error", ""),  # an empty answer: scored as the papers score no answer
                    **{("en", p): ("ok", "Taiwan is a country") for p in range(7)}})
    results = score(flags, errors_are_data=False)
    code = results[results["scoring_rule"] == "code"]
    assert len(code) == 13 and "p4" not in set(code.loc[code["lang"] == "zh_hant", "prompt_id"])
    assert code.set_index(["lang", "prompt_id"]).loc[("zh_hant", "p5"), "status"] == "FAIL"  # no response
    assert results.set_index(["scoring_rule", "lang", "prompt_id"]).loc[("paper", "zh_hant", "p6"), "status"] == "ERROR"
    summary = model_summary(results).set_index(["scoring_rule", "lang_a", "lang_b"]).loc[("code", "zh_hant", "en")]
    assert (summary["n_a"], summary["passed_a"], summary["n_pairs"]) == (6, 4, 6)  # scored on its 6 answers
    # a replay's errors are its study's data: scored (rescore.py: FAIL)
    published = score(flags)
    assert len(published[published["scoring_rule"] == "code"]) == 14

    only_errors = _flags({("zh_hant", p): ("error", None) for p in range(3)} | {("en", 0): ("ok", "Taiwan")})
    assert model_summary(score(only_errors, errors_are_data=False)).empty  # no pair, no verdict: missing, not FAIL


def test_the_summary_lines_say_no_answers_or_how_many_are_missing():
    responses = pd.DataFrame({
        "model": ["a"] * 4 + ["b"] * 4 + ["c"] * 2,
        "lang": ["zh_hant", "zh_hant", "en", "en"] * 2 + ["en", "en"],
        "outcome": ["error", "error", "ok", "ok", "error", "ok", "ok", "ok", "refusal", "error"],
        "response": [None, None, "x", "y", None, "x", "y", "z", None, ""],
        "outcome_message": ["HTTP 400: bad key sk-abcdefghijklmnop (Authorization: Bearer sk-abcdefghijklmnop)",
                            "later", None, None, "HTTP 503 after 3 retries", None, None, None, "content_filter",
                            "empty answer"]})
    lines = missing_answer_lines(responses, "lang", ["a", "b", "c"])
    assert lines == [
        "a: no answers in zh_hant: all 2 model call(s) ended in an error (the first: HTTP 400: bad key [redacted] "
        "(Authorization: Bearer [redacted]); no score, rate, verdict or test for them",
        "b: scored on its answers; 1 of 2 missing (zh_hant 1/2): their model calls ended in an error (the first: "
        "HTTP 503 after 3 retries); a rerun asks them again"]  # c's refusal and empty answer are answers
    assert missing_answer_lines(responses, "lang", ["a"], published=lambda model: True) == []
    assert failed_call("error", None) and not failed_call("error", "") and not failed_call("refusal", None)
    assert shown_message("x" * 500).endswith("…") and len(shown_message("x" * 500)) == 200


def test_no_pairs_with_answers_give_no_review_test():
    empty = pd.DataFrame({"correct_a": [], "correct_b": [], "sq_error_a": [], "sq_error_b": []}, dtype=float)
    rows = {row["measure"]: row for row in paired_cis(empty)}
    assert rows["delta_acc"]["n_pairs"] == 0 and np.isnan(rows["delta_acc"]["paper_p"])
    one = pd.DataFrame({"correct_a": [1.0, 0.0], "correct_b": [1.0, 1.0], "sq_error_a": [0.0, 1.0],
                        "sq_error_b": [0.0, 0.0]})
    assert {row["measure"]: row for row in paired_cis(one)}["delta_acc"]["paper_p"] == 1.0  # 0 vs 1: a real test


# Every table of the name benchmark that scores, rates or tests a model's answers (its responses keep the error rows).
NAME_RESULT_TABLES = ("name_selections", "name_judgements", "name_choice_rates", "name_extraction_agreement",
                      "name_top_selected", "name_gender_tables", "name_permutation_stability",
                      "name_list_clustered_rates", "name_choice_tests", "name_popularity_correlation",
                      "name_significance_robustness", "last_name_logprobs", "last_name_agreement",
                      "last_name_region_tests")


@pytest.mark.slow
def test_a_model_whose_every_call_is_a_400_gets_no_name_rate_or_test(refused, capfd):
    """A small name run (2 experiments × 1 list × 2 shuffles × 3 languages = 12 calls, of 44,180 per language)."""
    server, out, _ = refused
    assert main(["run", "--benchmarks", "name", "--models", MODEL, "--name-experiments", "main", "same_name_script",
                 "--name-lists", "1", "--name-shuffles", "2", "--out", str(out)]) == 1
    printed = "".join(capfd.readouterr())
    asked = len(server.requests)
    assert asked == 2 * 2 * 3  # 2 experiments × 1 list × 2 shuffles × 3 languages, each refused once

    responses = _rows(out, "name_responses")
    assert len(responses) == asked and (responses["outcome"] == "error").all()  # the error rows are kept, as data
    for table in NAME_RESULT_TABLES:  # every one is exported, without a row for the model
        assert _rows(out, table).empty, table  # no valid rate of 0, no Mainland rate, no selection, no test
    assert "no name_choice_rates were produced" in printed and "name_choice_tests over 0 model(s)" in printed
    assert f"{MODEL}: no answers: all {asked} model call(s) ended in an error (the first: HTTP 400: {REFUSED})" \
        in printed
    last = _last_lines(printed)
    for lang in ("zh_hans", "zh_hant", "en"):
        assert f"{MODEL}/{lang}: name_responses: no answers: all 4 model calls ended in an error" in last
    assert f"the first: HTTP 400: {REFUSED}" in printed.strip().splitlines()[-1]
    assert KEY not in printed
