"""Table 19 for a live model: the stub OpenAI server as the model and as the judge, through `sctc run`."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from sctc_assets.cli import main
from sctc_assets.lib.term.incorrect_types import parse_incorrect_type
from sctc_assets_tests.openai_stub_server import StubOpenAIServer, completion

KEY_ENV = "SCTC_TEST_TYPES_KEY"


class ModelAndJudge(StubOpenAIServer):
    """The model answers 不知道 to every term prompt (an answer no rule or judge can call correct); as the judge it
    says 0 (not correct) to the correctness question and "1" with extra text (a different concept) to B.4's."""

    def echo(self, prompt: str, body: dict[str, Any]):
        if prompt.startswith("Do the terms"):
            return completion("1。它们指的是完全不同的东西。")
        if "If the model's answer is correct, respond with 1" in prompt:
            return completion("0")
        return completion("不知道")


def test_parse_incorrect_type_reads_one_type_and_never_guesses():
    assert [parse_incorrect_type(answer) for answer in ("1", "2", "答案：2。", "2 - same concept", "<think>1?</think>1")] \
        == [1, 2, 2, 2, 1]
    for answer in ("Only respond 1 if …, 2 if …", "12", "1.5", "", None, "both"):
        assert parse_incorrect_type(answer) is None


@pytest.mark.slow
def test_table_19_for_a_live_model_judged_by_the_stub(isolated_data_dir, extracted_upstream, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    out = tmp_path / "out"
    with ModelAndJudge() as server:
        entry = (f"{{backend: openai, model: stub-model, base_url: '{server.base_url}', api_key_env: {KEY_ENV}, "
                 "max_retries: 0, concurrency: 8, benchmarks: {term: {trials: 2, prompt_variants: [1]}}}")
        registry = tmp_path / "models.yaml"
        registry.write_text(f"models:\n  live: {entry}\n  stub-judge: {entry}\n", encoding="utf-8")
        monkeypatch.setenv("SCTC_MODELS", str(registry))
        assert main(["run", "--benchmarks", "term", "--models", "live", "--judge", "stub-judge",
                     "--out", str(out)]) == 0
        asked = [prompt for prompt in server.prompts_seen() if prompt.startswith("Do the terms")]
    judgements = pd.read_parquet(out / "term_incorrect_type_judgements.parquet")
    # only the first trial's answers are classified: 110 terms × 2 scripts, all incorrect under the judge labels
    assert len(judgements) == len(asked) == 220
    assert set(judgements.trial) == {0} and set(judgements.label_source) == {"judge"}
    table = pd.read_parquet(out / "term_incorrect_types.parquet")
    live = table[table.model == "live"].set_index("lang")
    assert set(live.judge) == {"stub-judge"} and live.source_file.isna().all()
    # by hand: every one of the 110 classified answers per script is type 1
    assert live.loc[["zh_hans", "zh_hant"], ["n_annotated", "n_entirely_wrong", "n_uncommon_usage",
                                              "n_other_label"]].to_numpy().tolist() == [[110, 110, 0, 0]] * 2
    assert live.pct_entirely_wrong.tolist() == [100.0, 100.0] and live.pct_uncommon_usage.tolist() == [0.0, 0.0]
    published = table[table.model != "live"]
    assert len(published) == 22 and set(published.label_source) == {"upstream"}
    assert published.set_index(["model", "lang"]).loc[("qwen", "zh_hans"), "pct_entirely_wrong"].round(2) == 51.02
