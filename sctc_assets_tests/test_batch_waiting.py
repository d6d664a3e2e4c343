"""Runs that wait for provider batches and the `sctc_batches` sensor that starts them again (issue 40, point 3).

Everything goes through the real batch path: a registry of `openai` models with `batch: true` pointing at
`OpenAIBatchStub` (OpenAI's Batch API over real HTTP on 127.0.0.1, started and stopped by the `stub` fixture, its key
from an environment variable), the core's driver in `ModelBackend.generate()` (detached, as in any run outside
`sctc run`: `BatchesPending` while the batches run), the response cache's batch records and the OpenAI batch client
the sensor polls with. Counts come from the stub's log: batches created, polls, results downloaded, lines answered."""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Iterator

import dagster as dg
import pytest
from dagster._core.test_utils import freeze_time

from sctc_assets.benchmarks import TERM
from sctc_assets.definitions import defs, shared_resources
from sctc_assets.lib.batch_driver import SUBMITTED
from sctc_assets.lib.batches import BatchLine, BatchRecord
from sctc_assets.lib.cache import open_cache
from sctc_assets.lib.generation import GenerationRequest
from sctc_assets.assets.partitions import MODELS_PARTITION_NAME
from sctc_assets.resources.batch_wait import (AUTO_RETRY_RUN_ID_TAG, BATCHES_TAG, RETRY_OF_TAG, WAIT_TAG,
                                              WILL_RETRY_TAG)
from sctc_assets.resources.model_registry import ModelRegistryResource
from sctc_assets.assets.sensors import sctc_batches
from sctc_assets_tests.batch_stubs import OpenAIBatchStub
from sctc_assets.definitions import every_asset
from sctc_assets_tests.ui_backfill import ui, write_instance

KEYS = ["zh_hans|batch-a", "zh_hans|batch-b"]
KEY_ENV = "SCTC_TEST_UI_BATCH_KEY"
KEY = "sk-ui-batch-Vb7pQ2nX5kLw-DO-NOT-LEAK"


def write_registry(folder: Path, base_url: str) -> Path:
    """`batch-a` and `batch-b`: OpenAI models (two names, so their requests differ) sent as batches to the stub,
    polled every second, one trial of prompt variant 1 of the term benchmark each."""
    path = folder / "models.yaml"
    path.write_text("models:\n" + "".join(
        f"  batch-{name}: {{backend: openai, model: stub-{name}, base_url: '{base_url}', api_key_env: {KEY_ENV},"
        f" batch: true, batch_poll_seconds: 1, max_retries: 2, backoff_initial_s: 0.01, backoff_max_s: 0.05,"
        f" timeout_s: 10, benchmarks: {{term: {{trials: 1, prompt_variants: [1]}}}}}}\n" for name in "ab"),
        encoding="utf-8")
    return path


def http_threads() -> int:
    """The batch clients' HTTP threads alive (`BatchHttp`): each client not closed leaves one."""
    return sum(thread.name == "sctc-batch-http" for thread in threading.enumerate())


@pytest.fixture
def stub(isolated_data_dir, tmp_path, monkeypatch) -> Iterator[OpenAIBatchStub]:
    monkeypatch.setenv(KEY_ENV, KEY)
    for name in ("SCTC_BATCH_WAIT", "SCTC_BATCH_MODELS", "SCTC_MAX_CALLS", "SCTC_MAX_COST_USD"):
        monkeypatch.delenv(name, raising=False)  # a run outside `sctc run`: batches detach
    with OpenAIBatchStub(api_key=KEY) as server:  # stopped in every path
        monkeypatch.setenv("SCTC_MODELS", str(write_registry(tmp_path, server.base_url)))
        yield server
    assert server.unauthorized == 0  # every call carried the key from the environment


def _submit(local_id: str, prompt: str) -> str:
    """A batch of one line of `batch-a`, submitted with the real client and recorded as the driver records it."""
    backend = ModelRegistryResource().backend("batch-a")
    request = GenerationRequest.user(prompt)
    with backend.batch_client() as client:
        provider_id = client.submit([BatchLine(hashlib.sha256(prompt.encode()).hexdigest(), request)], local_id)
    open_cache().record_batch(BatchRecord(local_id=local_id, provider="openai", model="stub-a",
                                          identity=backend.identity(), size=1, state=SUBMITTED,
                                          provider_id=provider_id, created_at=time.time(), updated_at=0.0,
                                          registry_key="batch-a"), [])
    return provider_id


def _waiting_run(instance: dg.DagsterInstance, batches: list[str], backfill: str) -> dg.DagsterRun:
    """A failed run as `wait_for_batches` leaves it: a backfill's run of term_responses for zh_hans|batch-a."""
    run = dg.DagsterRun(job_name="__ASSET_JOB", run_id=str(uuid.uuid4()), status=dg.DagsterRunStatus.FAILURE,
                        asset_selection=frozenset({dg.AssetKey("term_responses")}),
                        run_config={"execution": {"config": {"in_process": {}}}},
                        tags={BATCHES_TAG: ",".join(batches), WAIT_TAG: "waiting", WILL_RETRY_TAG: "true",
                              "dagster/backfill": backfill, "dagster/partition": KEYS[0],
                              "dagster/partition/lang": "zh_hans", "dagster/partition/model": "batch-a",
                              "sctc/benchmark": "term", "sctc/model": "batch-a"})
    return instance.add_run(run)


def _evaluate(instance: dg.DagsterInstance) -> dg.SensorResult:
    return sctc_batches(dg.build_sensor_context(instance=instance, resources={"models": ModelRegistryResource()},
                                                definitions=defs))


def _polls(stub: OpenAIBatchStub) -> int:
    return stub.call_counts()["poll"]


def test_a_waiting_run_is_requested_once_when_every_batch_it_names_has_ended(stub):
    cache = open_cache()
    first, second = _submit("sctc-000000000001", "问一"), _submit("sctc-000000000002", "问二")
    threads = http_threads()
    with dg.DagsterInstance.ephemeral() as instance:
        assert _evaluate(instance).skip_reason.skip_message == "no run waits for provider batches"
        run = _waiting_run(instance, ["sctc-000000000001", "sctc-000000000002"], backfill="bf1")

        result = _evaluate(instance)  # both batches running
        assert not result.run_requests and "1 run(s) wait for 2 open batch(es)" in result.skip_reason.skip_message
        assert _polls(stub) == 2
        assert cache.get_batch("sctc-000000000001").state == "in_progress"  # validating → in_progress

        stub.finish(first)  # one of two ended: still waiting
        cache.update_batch("sctc-000000000001", updated_at=0.0)  # its model's batch_poll_seconds (1) have passed
        cache.update_batch("sctc-000000000002", updated_at=0.0)
        assert not _evaluate(instance).run_requests
        assert cache.get_batch("sctc-000000000001").ended and not cache.get_batch("sctc-000000000002").ended
        assert cache.get_batch("sctc-000000000001").state == "completed"
        assert _polls(stub) == 4

        stub.finish(second)
        assert not _evaluate(instance).run_requests  # polled < batch_poll_seconds ago: not polled again yet
        assert _polls(stub) == 4
        cache.update_batch("sctc-000000000002", updated_at=0.0)
        [request] = _evaluate(instance).run_requests  # the ended one is not polled again
        assert _polls(stub) == 5
        assert request.asset_selection == [dg.AssetKey("term_responses")]
        assert request.partition_key == KEYS[0]
        assert request.run_key == f"sctc_batches:{run.run_id}"
        assert request.run_config == {"execution": {"config": {"in_process": {}}}}
        assert request.tags == {"dagster/backfill": "bf1", "sctc/benchmark": "term", "sctc/model": "batch-a",
                                RETRY_OF_TAG: run.run_id}
        assert stub.call_counts()["download"] == 0  # the sensor never reads results: the run collects them

        # The daemon launched it: the next tick requests nothing and ends the old run's wait for the backfill.
        instance.add_run(dg.DagsterRun(job_name="__ASSET_JOB", run_id=str(uuid.uuid4()),
                                       status=dg.DagsterRunStatus.NOT_STARTED, tags=request.tags))
        assert _evaluate(instance).skip_reason.skip_message == "no run waits for provider batches"
        waited = instance.get_run_by_id(run.run_id)
        assert waited.tags[AUTO_RETRY_RUN_ID_TAG] and not waited.is_complete_and_waiting_to_retry
        assert _polls(stub) == 5
    assert http_threads() == threads  # the sensor closed every client it polled with
    assert stub.call_counts()["create"] == 2


def test_a_run_executed_in_process_is_not_made_a_waiting_run(stub):
    """`sctc run` (or `dg.materialize`) executes its runs itself: the backend's exception reaches it unchanged."""

    @dg.asset
    def asks(models: ModelRegistryResource) -> None:
        models.backend("batch-a").generate([GenerationRequest.user("问")], cache=models.cache())

    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize([asks], instance=instance, resources={"models": ModelRegistryResource()},
                                raise_on_error=False)
        assert not result.success
        [failure] = [event for event in result.all_events if event.is_step_failure]
        assert failure.step_failure_data.error.cause.cls_name == "BatchesPending"
        assert not any(key.startswith("sctc/batch") or key == WILL_RETRY_TAG
                       for key in instance.get_run_by_id(result.run_id).tags)
    assert stub.call_counts()["create"] == 1 and stub.call_counts()["download"] == 0
    [batch] = stub.batches.values()
    assert batch.status == "in_progress" and len(batch.lines) == 1  # submitted, polled once, left running
    [record] = open_cache().batches(open_only=True)
    assert record.provider_id == batch.id and record.size == 1


def _step_failures(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    return [event.dagster_event.step_failure_data.error.message for event in instance.all_logs(
        run_id, of_type=dg.DagsterEventType.STEP_FAILURE)]


@pytest.mark.slow
def test_a_ui_backfill_of_a_batch_model_completes_through_the_sensor(stub, extracted_upstream, tmp_path,
                                                                      monkeypatch):
    """Launched as the UI launches it (GraphQL `launchPartitionBackfill`), each partition's run submits its batch
    through the driver and ends waiting; the sensor daemon's ticks poll the batches and request nothing while they
    run; the tick after they end starts the partitions' runs again, which collect the answers, and the backfill
    completes with the downstream assets materialized. Nothing is submitted, answered or downloaded twice."""
    cache = open_cache()
    monkeypatch.setenv("DAGSTER_HOME", str(write_instance(tmp_path / "dagster_home")))
    assets = ["term_responses", "term_judgements", "term_labels"]
    for _ in KEYS:
        stub.script_batch(hold=1)  # each batch stays in_progress one more poll, then finalizing, then completed
    threads = http_threads()
    with dg.DagsterInstance.get() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION_NAME, ["batch-a", "batch-b"])
        assert dg.materialize(every_asset(defs), selection=list(TERM.inputs), instance=instance,
                              resources=shared_resources()).success
        with ui(instance) as front:
            backfill = front.launch(assets, KEYS)
            assert front.iterate(backfill, max_iterations=3) == "REQUESTED"  # in progress, no process held
            waiting = front.runs(backfill)
            assert sorted(run["tags"]["dagster/partition"] for run in waiting) == KEYS
            assert {run["status"] for run in waiting} == {"FAILURE"}
            batches = {run["tags"]["dagster/partition"]: run["tags"][BATCHES_TAG] for run in waiting}
            for run in waiting:
                [local_id] = run["tags"][BATCHES_TAG].split(",")
                assert run["tags"][WILL_RETRY_TAG] == "true" and run["tags"][WAIT_TAG] == "waiting"
                record = cache.get_batch(local_id)
                assert record.partitions == [run["tags"]["dagster/partition"]]
                assert record.registry_key == run["tags"]["sctc/model"] and record.provider_id in stub.batches
                [message] = _step_failures(instance, run["id"])
                assert local_id in message and record.provider_id in message and "sctc_batches" in message, message
                assert KEY not in message and KEY not in str(run["tags"])
            # One batch per partition, each submitted once and polled once by its run's driver (validating →
            # in_progress); nothing downloaded, nothing asked synchronously.
            counts = stub.call_counts()
            assert (counts["create"], counts["upload"], counts["poll"], counts["download"]) == (2, 2, 2, 0)
            assert {batch.status for batch in stub.batches.values()} == {"in_progress"}
            assert not stub.requests and not stub.lines_answered
            assert not instance.get_materialized_partitions(dg.AssetKey("term_responses"))

            start = time.time()

            def tick(number: int) -> None:
                """One sensor daemon tick, the sensor's interval and the models' batch_poll_seconds (1 s) passed."""
                for local_id in batches.values():
                    cache.update_batch(local_id, updated_at=0.0)
                with freeze_time(start + 31 * number):
                    front.sensor_tick()

            tick(1)  # held in_progress: nothing requested
            assert _polls(stub) == 4 and {batch.status for batch in stub.batches.values()} == {"in_progress"}
            assert len(front.runs(backfill)) == 2
            assert front.iterate(backfill, max_iterations=2) == "REQUESTED"
            tick(2)  # finalizing: still nothing requested
            assert _polls(stub) == 6 and {batch.status for batch in stub.batches.values()} == {"finalizing"}
            assert len(front.runs(backfill)) == 2 and not stub.lines_answered
            assert {cache.get_batch(local_id).state for local_id in batches.values()} == {"finalizing"}

            tick(3)  # completed: the partitions' runs are requested, and collect the batches
            runs = front.runs(backfill)
            retries = [run for run in runs if RETRY_OF_TAG in run["tags"]]
            assert sorted(run["tags"][RETRY_OF_TAG] for run in retries) == sorted(run["id"] for run in waiting)
            assert {run["status"] for run in retries} == {"SUCCESS"}
            assert sorted(run["tags"]["dagster/partition"] for run in retries) == KEYS
            # The new runs ended the old ones' wait as they started.
            assert all(instance.get_run_by_id(run["id"]).tags.get(AUTO_RETRY_RUN_ID_TAG) for run in waiting)

            assert front.iterate(backfill, max_iterations=5) == "COMPLETED_SUCCESS"
            for name in assets:
                assert instance.get_materialized_partitions(dg.AssetKey(name)) == set(KEYS), name
            with freeze_time(start + 31 * 4):
                front.sensor_tick()  # requested once: no run waits any more, nothing polled
            assert len(front.runs(backfill)) == 4

    # From the stub's log: as many batches as partitions; each read 6 times (`GET /v1/batches/{id}`): polled by the
    # first run, by three sensor ticks and by the run that collected it, and read once more by `results()` for its
    # output file, downloaded once, its input file deleted after; every line answered once, none submitted again,
    # none asked synchronously.
    counts = stub.call_counts()
    assert (counts["create"], counts["upload"], counts["poll"], counts["download"], counts["delete"]) == \
        (2, 2, 12, 2, 2)
    assert {batch.polls for batch in stub.batches.values()} == {6}
    assert {batch.status for batch in stub.batches.values()} == {"completed"}
    per_line = Counter(line["custom_id"] for batch in stub.batches.values() for line in batch.lines)
    assert per_line and max(per_line.values()) == 1  # 0 resubmitted
    assert stub.batch_answers() == Counter(dict.fromkeys(per_line, 1))  # each line answered (paid) once
    assert not stub.requests  # no line retried synchronously
    for partition, local_id in batches.items():
        record = cache.get_batch(local_id)
        lines = len(stub.batches[record.provider_id].lines)
        assert (record.state, record.size, record.stored) == ("collected", lines, lines), partition
    assert http_threads() == threads  # every batch client (runs and sensor) was closed
