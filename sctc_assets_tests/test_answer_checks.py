"""The answer checks run with each partition (a UI run of `term_model_lang` includes them), read the partition
through the IO manager (the multi-partition case of dagster#30178), and warn or fail as configured."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Sequence

import dagster as dg
import pandas as pd
import pytest

from sctc_assets.assets.answer_checks import ANSWERED, ERRORS, AnswerCheckConfig, _rate_result, _usable_result, \
    replays_published_answers
from sctc_assets.backends.base import ModelBackend, ResultCallback
from sctc_assets.definitions import defs, shared_resources
from sctc_assets.lib.generation import GenerationRequest, GenerationResult
from sctc_assets.assets.partitions import MODELS_PARTITION_NAME
from sctc_assets.resources.model_registry import ModelRegistryResource


class FlakyBackend(ModelBackend):
    """Every third row's answer refused, every fifth row's call failed after its retries, or (`down`) every call
    failed."""

    backend_name: ClassVar[str] = "flaky"
    name: str = "flaky"
    down: bool = False

    def identity(self) -> dict:
        return {"backend": self.backend_name, "model": self.name, "params": {"down": self.down}}

    def _generate_uncached(self, requests: Sequence[GenerationRequest], on_result: ResultCallback) -> None:
        for index, request in enumerate(requests):
            row = int(request.ref.get("row", index))  # the row, not the position: requests come in claimed chunks
            if self.down or row % 5 == 4:
                on_result(index, GenerationResult(text=None, outcome="error", message="HTTP 503 after 5 retries"))
            elif row % 3 == 2:
                on_result(index, GenerationResult(text="", outcome="refusal", message="content_filter"))
            else:
                on_result(index, GenerationResult(text="滑鼠", outcome="ok"))


@pytest.fixture
def registry(isolated_data_dir, extracted_upstream, tmp_path, monkeypatch) -> Path:
    path = tmp_path / "models.yaml"
    backend = "sctc_assets_tests.test_answer_checks:FlakyBackend"
    path.write_text(
        "models:\n"
        f"  flaky: {{backend: '{backend}', benchmarks: {{term: {{trials: 1, prompt_variants: [1]}}}}}}\n"
        f"  down: {{backend: '{backend}', down: true, benchmarks: {{term: {{trials: 1, prompt_variants: [1]}}}}}}\n"
        "  paper-qwen: {backend: replay, upstream_name: qwen}\n", encoding="utf-8")
    monkeypatch.setenv("SCTC_MODELS", str(path))
    return path


def _evaluations(result: dg.ExecuteInProcessResult) -> dict[tuple[str, str], dg.AssetCheckEvaluation]:
    return {(e.asset_key.to_user_string(), e.check_name): e for e in result.get_asset_check_evaluations()}


def test_a_ui_run_of_a_partition_evaluates_its_checks(registry):
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION_NAME, ["flaky", "down"])
        inputs = [defs.get_assets_def(name) for name in ("regional_terms", "term_prompts")]
        assert dg.materialize(inputs, instance=instance, resources=shared_resources()).success
        job = defs.resolve_job_def("term_model_lang")

        flaky = job.execute_in_process(partition_key=dg.MultiPartitionKey({"model": "flaky", "lang": "zh_hans"}),
                                       instance=instance, resources=shared_resources())
        checks = _evaluations(flaky)
        assert set(checks) == {("term_responses", "error_rate"), ("term_responses", "refusal_rate"),
                               ("term_responses", "usable_answers"), ("term_labels", "usable_answers")}
        errors, refusals = checks[("term_responses", "error_rate")], checks[("term_responses", "refusal_rate")]
        # 110 calls: rows 4, 9, … fail (22), and of the others rows 2, 5, 8, … are refused
        assert (errors.metadata["count"].value, errors.metadata["rows"].value) == (22, 110)
        assert not errors.passed and errors.severity == dg.AssetCheckSeverity.WARN
        refused = sum(1 for index in range(110) if index % 5 != 4 and index % 3 == 2)
        assert refusals.metadata["count"].value == refused == 29 and not refusals.passed  # 26 % > 20 %
        assert checks[("term_responses", "usable_answers")].passed
        assert checks[("term_labels", "usable_answers")].passed
        assert errors.partition == "zh_hans|flaky"

        down = job.execute_in_process(partition_key=dg.MultiPartitionKey({"model": "down", "lang": "zh_hans"}),
                                      instance=instance, resources=shared_resources(),
                                      run_config={"ops": {"term_responses_answer_checks": {
                                          "config": {"max_error_rate": 1.0}}}})
        checks = _evaluations(down)
        usable = checks[("term_responses", "usable_answers")]
        assert not usable.passed and usable.severity == dg.AssetCheckSeverity.ERROR
        assert checks[("term_responses", "error_rate")].passed  # the threshold came from the run config
        assert not checks[("term_labels", "usable_answers")].passed  # error rows get no label


def test_published_answers_only_warn_when_none_is_usable(registry):
    models = ModelRegistryResource()
    assert replays_published_answers(models, "paper-qwen") and not replays_published_answers(models, "flaky")
    assert not replays_published_answers(models, "not-in-the-registry")
    frame = pd.DataFrame({"outcome": ["error", "error"]})
    assert _usable_result("t", ANSWERED, frame, replay=True).severity == dg.AssetCheckSeverity.WARN
    assert _usable_result("t", ANSWERED, frame, replay=False).severity == dg.AssetCheckSeverity.ERROR
    empty = _rate_result("t", ERRORS, frame.iloc[:0], AnswerCheckConfig())
    assert empty.passed and empty.metadata["rows"].value == 0
