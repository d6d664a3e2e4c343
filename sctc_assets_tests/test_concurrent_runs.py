"""Two runs on one model at once: what one of them fails to get but the other answers and stores is no error in its
table, and each run's answer checks describe the table that run wrote, not the other run's.

Real HTTP against the stub server and the real response cache for the first; the real term assets, Parquet IO
manager and checks for the second, the other run interposed at the moment the first run's checks load its table.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from typing import Any, ClassVar, Sequence

import dagster as dg
import pandas as pd
import pytest

from sctc_assets.assets.term.responses import term_responses
from sctc_assets.backends.base import ModelBackend, ResultCallback
from sctc_assets.backends.openai_backend import OpenAIBackend
from sctc_assets.definitions import defs, shared_resources
from sctc_assets.lib.cache import ResponseCache
from sctc_assets.lib.generation import GenerationRequest, GenerationResult
from sctc_assets.assets.partitions import MODELS_PARTITION_NAME
from sctc_assets.resources.io_manager import ParquetIOManager, read_table
from sctc_assets_tests.openai_stub_server import StubOpenAIServer, api_error, echo_reply

KEY_ENV = "SCTC_TEST_CONCURRENT_RUNS_KEY"


def _backend(server: StubOpenAIServer) -> OpenAIBackend:
    return OpenAIBackend(model="stub-model", base_url=server.base_url, api_key_env=KEY_ENV, max_retries=0,
                         concurrency=4, timeout_s=30)


@pytest.mark.parametrize("second_answers_after_s", [0.0, 5.0])
def test_an_error_the_other_process_answered_meanwhile_is_the_answer(tmp_path, monkeypatch, second_answers_after_s):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    flaky, slow, other = "定义为'0'的是什么？", "定义为'1'的是什么？", "定义为'2'的是什么？"
    requests = [GenerationRequest.user(prompt) for prompt in (flaky, slow, other)]
    with StubOpenAIServer() as server:
        # The first run's call for `flaky` fails (no retries); the second run takes the released key over and
        # answers it while the first run's `slow` call is in flight (0 s), or only after the first run has asked
        # everything else (5 s): then the first run waits for that answer.
        server.script(flaky, api_error(500, "The server had an error while processing your request."),
                      dataclasses.replace(echo_reply(flaky), delay_s=second_answers_after_s))
        server.script(slow, dataclasses.replace(echo_reply(slow), delay_s=2.0))
        first: dict[str, list] = {}
        thread = threading.Thread(target=lambda: first.setdefault(
            "results", _backend(server).generate(requests, cache=ResponseCache(tmp_path / "cache.sqlite"))))
        thread.start()
        try:
            deadline = time.monotonic() + 30
            while flaky not in server.prompts_seen() and time.monotonic() < deadline:
                time.sleep(0.02)
            # Another process on the same model and cache asks the prompt the first one failed on.
            second = _backend(server).generate(requests[:1], cache=ResponseCache(tmp_path / "cache.sqlite"))
        finally:
            thread.join(timeout=60)
        assert not thread.is_alive()
    assert [result.outcome for result in second] == ["ok"]
    # The first run's table gets the answer the cache holds, not the error it saw.
    assert [(result.outcome, result.text) for result in first["results"]] == \
        [("ok", second[0].text), ("ok", f"echo: {slow}"), ("ok", f"echo: {other}")]
    assert first["results"][0].cached  # paid for by the other process
    # Each prompt was answered once: `flaky` failed once, then the second process asked it.
    kinds = [(request.prompt, request.kind) for request in server.requests]
    assert sorted(kinds) == sorted([(flaky, "scripted"), (flaky, "scripted"), (slow, "scripted"), (other, "ok")])
    stored = ResponseCache(tmp_path / "cache.sqlite").count()
    assert stored == 3


# --- the answer checks of two runs of one partition ------------------------------------------------------------------

SWITCH = {"down": True}


class SwitchBackend(ModelBackend):
    """Every call fails while `SWITCH["down"]`, else answers: the same model in two runs, one during an outage.
    Errors are not cached, so the second run asks again and its table differs from the first's."""

    backend_name: ClassVar[str] = "switch"

    def identity(self) -> dict:
        return {"backend": self.backend_name, "model": "switch"}

    def _generate_uncached(self, requests: Sequence[GenerationRequest], on_result: ResultCallback) -> None:
        for index in range(len(requests)):
            on_result(index, GenerationResult(text=None, outcome="error", message="HTTP 503") if SWITCH["down"]
                      else GenerationResult(text="滑鼠", outcome="ok"))


@pytest.fixture
def switch_registry(isolated_data_dir, extracted_upstream, tmp_path, monkeypatch) -> Path:
    path = tmp_path / "models.yaml"
    path.write_text("models:\n  switch: {backend: 'sctc_assets_tests.test_concurrent_runs:SwitchBackend', "
                    "benchmarks: {term: {trials: 1, prompt_variants: [1]}}}\n", encoding="utf-8")
    monkeypatch.setenv("SCTC_MODELS", str(path))
    monkeypatch.setitem(SWITCH, "down", True)
    return path


def _checks(result: dg.ExecuteInProcessResult) -> dict[tuple[str, str], dict[str, Any]]:
    return {(e.asset_key.to_user_string(), e.check_name): {key: value.value for key, value in e.metadata.items()}
            for e in result.get_asset_check_evaluations()}


@pytest.mark.slow  # two pipeline runs of a partition: about 15 s
def test_each_run_s_answer_checks_describe_the_table_that_run_wrote(switch_registry, monkeypatch):
    partition = dg.MultiPartitionKey({"model": "switch", "lang": "zh_hans"})
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION_NAME, ["switch"])
        inputs = [defs.get_assets_def(name) for name in ("regional_terms", "term_prompts")]
        assert dg.materialize(inputs, instance=instance, resources=shared_resources()).success
        job = defs.resolve_job_def("term_model_lang")
        other: dict[str, dg.ExecuteInProcessResult] = {}
        load_input = ParquetIOManager.load_input

        def other_run_first(self: ParquetIOManager, context: dg.InputContext) -> pd.DataFrame:
            # The moment the first run's checks load its partition, a second run of the same partition (the outage
            # over) replaces the stored table and runs its own checks.
            step = context.step_context.step.key
            if context.asset_key == dg.AssetKey("term_responses") and "answer_checks" in step and SWITCH["down"]:
                SWITCH["down"] = False
                thread = threading.Thread(target=lambda: other.setdefault("run", job.execute_in_process(
                    partition_key=partition, instance=instance, resources=shared_resources())))
                thread.start()
                thread.join(timeout=300)
            return load_input(self, context)

        monkeypatch.setattr(ParquetIOManager, "load_input", other_run_first)
        first = job.execute_in_process(partition_key=partition, instance=instance, resources=shared_resources(),
                                       raise_on_error=False)
    second = other["run"]
    assert second.success
    # What is stored is the second run's table: every one of the 110 calls answered.
    stored = read_table(ParquetIOManager().path_for(dg.AssetKey("term_responses"), term_responses.partitions_def,
                                                    str(partition)))
    assert (stored["outcome"] == "ok").sum() == 110
    # Each run's checks count its own table: the first run's 110 errors, the second run's none.
    assert _checks(first)[("term_responses", "error_rate")] | {"threshold": None} == \
        {"rate": 1.0, "count": 110, "rows": 110, "threshold": None}
    assert _checks(second)[("term_responses", "error_rate")]["count"] == 0
    assert _checks(first)[("term_responses", "usable_answers")]["usable"] == 0
    assert _checks(second)[("term_responses", "usable_answers")]["usable"] == 110
