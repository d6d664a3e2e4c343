"""The translation control through a model (`--reviews-translator KEY`): `sctc run` with the project's stub
OpenAI server as translator and rater, Table 3's rows for the model translation checked against a hand
computation, a refused translation counted as missing data, one cached translation per review (a rerun sends
nothing), and for the paper's Chinese pair the OpenCC rows beside the model's, equal to `review_metrics`'."""

from __future__ import annotations

import json
import re
import sqlite3
from typing import Any

import pandas as pd
import pytest
from scipy.stats import binomtest

from sctc_assets.cli import main
from sctc_assets.lib.generation import GenerationResult
from sctc_assets.lib.paths import default_cache_path
from sctc_assets.lib.reviews.translation import (TRANSLATION_PROMPT, parse_translation, translated_prompts,
                                                 translation_requests, translations_table)
from sctc_assets.lib.reviews.varieties import variety_pair
from sctc_assets.lib.schemas import frame_problems
from sctc_assets.lib.schemas.reviews import review_tables
from sctc_assets_tests.openai_stub_server import StubOpenAIServer, StubReply, completion
from sctc_assets_tests.test_reviews_any_pair import PAIRED, _export

KEY_ENV = "SCTC_TEST_REVIEWS_TRANSLATION_KEY"
MARK = "⟨translated⟩"
REFUSED_TITLE = "Awful"  # the translator refuses the British review with this title
TRANSLATE = re.compile(r"Title: (.*)\nPositive Feedback: (.*)\nNegative Feedback: (.*)\Z")


class TranslatorAndRater(StubOpenAIServer):
    """`stub-translator` gives each part back with MARK before it (and refuses one review); `stub-rater` answers
    5 to a translated review and 8 to a review as written."""

    def echo(self, prompt: str, body: dict[str, Any]) -> StubReply:
        if body["model"] == "stub-translator":
            assert prompt.startswith(TRANSLATION_PROMPT.split("{")[0])
            parts = TRANSLATE.search(prompt).groups()
            if parts[0] == REFUSED_TITLE and "into American English" in prompt:
                return completion("I'm sorry, I can't help with that.")
            title, positive, negative = (f"{MARK} {part}" if part else "" for part in parts)
            return completion(f"Title: {title}\nPositive Feedback: {positive}\nNegative Feedback: {negative}")
        return completion("5" if MARK in prompt else "8")


def _registry(path, base_url: str):
    common = f"backend: openai, base_url: '{base_url}', api_key_env: {KEY_ENV}, max_retries: 0"
    path.write_text("models:\n"
                    f"  stub-rater: {{{common}, model: stub-rater}}\n"
                    f"  stub-translator: {{{common}, model: stub-translator}}\n", encoding="utf-8")
    return path


def test_the_answer_must_give_back_every_written_part():
    original = {"title": "Nice", "positive": "Clean.", "negative": ""}
    assert parse_translation("Title: Bom\nPositive Feedback: Limpo.\nNegative Feedback:", original) == {
        "title": "Bom", "positive": "Limpo.", "negative": ""}
    assert parse_translation("<think>hm</think>Title: Bom\nPositive Feedback: Limpo.\nNegative Feedback: x",
                             original) == {"title": "Bom", "positive": "Limpo.", "negative": ""}
    assert parse_translation("Title: Bom\nPositive Feedback:\nNegative Feedback:", original) is None
    assert parse_translation("Sorry, I cannot translate this.", original) is None


def test_refusals_errors_and_unparsed_answers_are_missing_data_not_prompts():
    pair = variety_pair(("en-gb", "en-us"))
    reviews = pd.DataFrame({"pair_id": [0, 0, 1, 1], "review_id": ["a", "b", "c", "d"],
                            "variety": ["en-gb", "en-us", "en-gb", "en-us"], "title": ["Nice"] * 4,
                            "positive": ["Clean."] * 4, "negative": [""] * 4})
    results = [GenerationResult("Title: Nice\nPositive Feedback: Clean!\nNegative Feedback:"),
               GenerationResult(None, "refusal"), GenerationResult(None, "error", "timeout"),
               GenerationResult("Sure! Here it is: Nice. Clean.")]
    table = translations_table("t", reviews, pair, results)
    assert list(table.status) == ["translated", "refused", "error", "unparsed"]
    assert list(table.text_variety) == ["en-us", "en-gb", "en-us", "en-gb"]
    assert table.loc[0, "positive"] == "Clean!" and table.loc[1:, "positive"].isna().all()
    prompts = translated_prompts(table, pair)
    assert list(prompts.review_id.unique()) == ["a"] and len(prompts) == 3
    assert set(prompts.version) == {"translated"} and set(prompts.translation) == {"model:t"}
    requests = translation_requests(reviews, pair)
    assert requests[0].prompt.startswith("Translate the following hotel review from British English into American "
                                         "English.") and requests[1].prompt.count("into British English") == 1


def test_the_translation_stages_run_only_with_a_translator_and_the_ui_keeps_them():
    from sctc_assets.benchmarks import REVIEWS
    from sctc_assets.definitions import defs

    stages = {"review_translations", "review_translation_predictions", "review_translation_control"}
    assert {name for name, entry in REVIEWS.assets.items() if entry.opt_in == "reviews_translator"} == stages
    assert not stages & set(REVIEWS.for_run({}).tables)
    opt_in = {name for name, entry in REVIEWS.assets.items() if entry.opt_in}  # the pilot's stages are opt-in too
    assert set(REVIEWS.for_run({}).tables) == set(REVIEWS.tables) - opt_in and stages <= opt_in
    assert stages <= set(REVIEWS.for_run({"reviews_translator": "some-model"}).tables)
    assert stages <= {key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys()}


@pytest.fixture
def stub(isolated_data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    monkeypatch.delenv("SCTC_REVIEWS", raising=False)
    monkeypatch.delenv("SCTC_REVIEWS_TRANSLATOR", raising=False)
    with TranslatorAndRater() as server:
        yield server, _registry(tmp_path / "models.yaml", server.base_url)


def test_a_model_translates_an_english_pair_and_table_3_gains_its_rows(stub, tmp_path, capsys):
    server, registry = stub
    out = tmp_path / "out"
    argv = ["run", "--benchmarks", "reviews", "--reviews", str(_export(tmp_path / "reviews.csv")),
            "--reviews-pair", "en-gb", "en-us", "--models", "stub-rater", "--reviews-translator", "stub-translator",
            "--registry", str(registry), "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr()
    printed = capsys.readouterr().out
    translations = pd.read_parquet(out / "review_translations.parquet")
    # one call per paired review, each review into the other variety
    asked = [request for request in server.requests if request.body["model"] == "stub-translator"]
    assert len(asked) == len(translations) == 2 * len(PAIRED)
    assert set(zip(translations.variety, translations.text_variety)) == {("en-gb", "en-us"), ("en-us", "en-gb")}
    refused = translations[translations.status != "translated"]
    assert list(refused.title.isna()) == [True] and list(refused.status) == ["unparsed"]
    assert (translations.loc[translations.status == "translated", "positive"].map(
        lambda text: text == "" or text.startswith(MARK))).all()
    tables = {spec.table: spec for spec in review_tables("en_gb", "en_us")}
    assert not frame_problems(translations, tables["review_translations"])

    predictions = pd.read_parquet(out / "review_translation_predictions.parquet")
    assert len(predictions) == 3 * (2 * len(PAIRED) - 1)  # the refused one is never rated
    assert set(predictions.version) == {"translated"} and set(predictions.translation) == {"model:stub-translator"}
    assert (predictions.prediction == 5).all()
    assert not frame_problems(predictions, tables["review_translation_predictions"])

    control = pd.read_parquet(out / "review_translation_control.parquet")
    assert not frame_problems(control, tables["review_translation_control"])
    assert set(control.control) == {"model:stub-translator"}  # no OpenCC control for an English pair
    assert len(control) == 3 * 2
    # By hand, British reviews as written (answered 8) against their American translations (answered 5), the
    # refused review ("Awful", score 1) left out.
    scores = [score for _, score, title, *_ in PAIRED if title != REFUSED_TITLE]
    right_8, right_5 = sum(score == 8 for score in scores), sum(score == 5 for score in scores)
    row = control[(control.format == "structured") & (control.subset == "original en-gb")].iloc[0]
    assert (row.n_pairs, row.n_untranslated, row.n_excluded) == (len(scores), 1, 0)
    assert row.acc_en_gb == pytest.approx(100 * right_8 / len(scores))
    assert row.acc_en_us == pytest.approx(100 * right_5 / len(scores))
    assert (row.only_en_gb_correct, row.only_en_us_correct) == (right_8, right_5)
    assert row.mcnemar_p == pytest.approx(binomtest(right_5, right_8 + right_5, 0.5).pvalue)
    assert row.mse_en_gb == pytest.approx(sum((8 - s) ** 2 for s in scores) / len(scores))
    assert row.mse_en_us == pytest.approx(sum((5 - s) ** 2 for s in scores) / len(scores))
    # American reviews: every one translated; their texts in British English now (answered 5) on the en-gb side
    every = [score for _, score, *_ in PAIRED]
    row = control[(control.format == "plain") & (control.subset == "original en-us")].iloc[0]
    assert (row.n_pairs, row.n_untranslated) == (len(every), 0)
    assert row.acc_en_gb == pytest.approx(100 * sum(s == 5 for s in every) / len(every))
    assert row.acc_en_us == pytest.approx(100 * sum(s == 8 for s in every) / len(every))
    assert row.delta_mse == pytest.approx(sum((8 - s) ** 2 - (5 - s) ** 2 for s in every) / len(every))
    assert "Translation control (Table 3)" in printed and "model:stub-translator" in printed
    assert "no usable translation, left out: {'model:stub-translator': 1}" in printed

    # The cache holds one translation per review; an unchanged rerun answers everything from it: the stub sees no
    # request.
    with sqlite3.connect(default_cache_path()) as db:
        stored = [json.loads(row[0]) for row in db.execute("SELECT request FROM responses")]
    translated = [request for request in stored if request.get("model") == "stub-translator"]
    assert len(translated) == len({json.dumps(request, sort_keys=True) for request in translated}) == 2 * len(PAIRED)
    seen = len(server.requests)
    assert main(argv) == 0
    assert len(server.requests) == seen


def test_the_paper_pair_gets_opencc_and_model_rows(stub, tmp_path, capsys):
    server, registry = stub
    out = tmp_path / "out"
    assert main(["run", "--benchmarks", "reviews", "--models", "stub-rater", "--reviews-translator",
                 "stub-translator", "--max-pairs", "4", "--registry", str(registry), "--out", str(out)]) == 0
    control = pd.read_parquet(out / "review_translation_control.parquet")
    assert set(control.control) == {"opencc", "model:stub-translator"}
    metrics = pd.read_parquet(out / "review_metrics.parquet")
    opencc = control[control.control == "opencc"].set_index(["format", "subset"])
    paper = metrics[metrics.analysis == "translation"].set_index(["format", "subset"])
    columns = ["n_pairs", "acc_tw", "acc_cn", "delta_acc", "mcnemar_p", "mse_tw", "mse_cn", "delta_mse"]
    pd.testing.assert_frame_equal(opencc.loc[paper.index, columns], paper[columns], check_dtype=False)
    assert (control.loc[control.control == "model:stub-translator", "n_pairs"] == 4).all()
    translations = pd.read_parquet(out / "review_translations.parquet")
    assert len(translations) == 8 and set(translations.status) == {"translated"}
    assert "Translation control (Table 3)" in capsys.readouterr().out
