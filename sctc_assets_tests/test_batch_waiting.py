"""Runs that wait for provider batches and the `sctc_batches` sensor that starts them again (issue 40, point 3).

The batch path of `generate()` is the stand-in of `batch_standin.py` (the core's driver is built on another branch):
a model whose uncached requests become a fake provider batch, `BatchesPending` while it runs."""

from __future__ import annotations

import time
import uuid

import dagster as dg
import pytest
from dagster._core.test_utils import freeze_time

from sctc_assets.benchmarks import TERM
from sctc_assets.definitions import defs, shared_resources
from sctc_assets.lib.batches import BatchRecord
from sctc_assets.lib.cache import open_cache
from sctc_assets.lib.generation import GenerationRequest
from sctc_assets.partitions import MODELS_PARTITION_NAME
from sctc_assets.resources.batch_wait import (AUTO_RETRY_RUN_ID_TAG, BATCHES_TAG, RETRY_OF_TAG, WAIT_TAG,
                                              WILL_RETRY_TAG)
from sctc_assets.resources.model_registry import ModelRegistryResource
from sctc_assets.sensors import sctc_batches
from sctc_assets_tests.batch_standin import FakeProvider, install_batch_records, write_batch_registry
from sctc_assets_tests.fakes import count_calls, every_asset
from sctc_assets_tests.ui_backfill import ui, write_instance

KEYS = ["zh_hans|batch-a", "zh_hans|batch-b"]


@pytest.fixture
def batch_models(isolated_data_dir, tmp_path, monkeypatch) -> FakeProvider:
    install_batch_records(monkeypatch)
    provider = FakeProvider(tmp_path / "provider.json")
    monkeypatch.setenv("SCTC_MODELS", str(write_batch_registry(tmp_path, provider.path)))
    return provider


def _record(provider: FakeProvider, local_id: str, *, size: int = 3) -> str:
    provider_id = provider.create(size)
    open_cache().record_batch(BatchRecord(local_id=local_id, provider="standin", model="a", identity={}, size=size,
                                          state="in_progress", provider_id=provider_id, created_at=time.time(),
                                          updated_at=0.0), [])
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


def test_a_waiting_run_is_requested_once_when_every_batch_it_names_has_ended(batch_models):
    provider, cache = batch_models, open_cache()
    first, second = _record(provider, "sctc-000000000001"), _record(provider, "sctc-000000000002")
    with dg.DagsterInstance.ephemeral() as instance:
        assert _evaluate(instance).skip_reason.skip_message == "no run waits for provider batches"
        run = _waiting_run(instance, ["sctc-000000000001", "sctc-000000000002"], backfill="bf1")

        result = _evaluate(instance)  # both batches running
        assert not result.run_requests and "1 run(s) wait for 2 open batch(es)" in result.skip_reason.skip_message
        assert provider.calls("status") == 2
        assert cache.get_batch("sctc-000000000001").state == "in_progress"

        provider.end(first)  # one of two ended: still waiting
        cache.update_batch("sctc-000000000001", updated_at=0.0)  # its model's batch_poll_seconds (1) have passed
        cache.update_batch("sctc-000000000002", updated_at=0.0)
        assert not _evaluate(instance).run_requests
        assert cache.get_batch("sctc-000000000001").ended and not cache.get_batch("sctc-000000000002").ended
        assert provider.calls("status") == 4

        provider.end(second)
        assert not _evaluate(instance).run_requests  # polled < batch_poll_seconds ago: not polled again yet
        assert provider.calls("status") == 4
        cache.update_batch("sctc-000000000002", updated_at=0.0)
        [request] = _evaluate(instance).run_requests  # the ended one is not polled again
        assert provider.calls("status") == 5
        assert request.asset_selection == [dg.AssetKey("term_responses")]
        assert request.partition_key == KEYS[0]
        assert request.run_key == f"sctc_batches:{run.run_id}"
        assert request.run_config == {"execution": {"config": {"in_process": {}}}}
        assert request.tags == {"dagster/backfill": "bf1", "sctc/benchmark": "term", "sctc/model": "batch-a",
                                RETRY_OF_TAG: run.run_id}
        assert provider.calls("results") == 0  # the sensor never reads results: the run collects them

        # The daemon launched it: the next tick requests nothing and ends the old run's wait for the backfill.
        instance.add_run(dg.DagsterRun(job_name="__ASSET_JOB", run_id=str(uuid.uuid4()),
                                       status=dg.DagsterRunStatus.NOT_STARTED, tags=request.tags))
        assert _evaluate(instance).skip_reason.skip_message == "no run waits for provider batches"
        waited = instance.get_run_by_id(run.run_id)
        assert waited.tags[AUTO_RETRY_RUN_ID_TAG] and not waited.is_complete_and_waiting_to_retry
        assert provider.calls("status") == 5


def test_a_run_executed_in_process_is_not_made_a_waiting_run(batch_models):
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
    assert batch_models.calls("submit") == 1


def _step_failures(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    return [event.dagster_event.step_failure_data.error.message for event in instance.all_logs(
        run_id, of_type=dg.DagsterEventType.STEP_FAILURE)]


@pytest.mark.slow
def test_a_ui_backfill_of_a_batch_model_completes_through_the_sensor(batch_models, extracted_upstream, tmp_path,
                                                                      monkeypatch):
    provider, cache = batch_models, open_cache()
    monkeypatch.setenv("DAGSTER_HOME", str(write_instance(tmp_path / "dagster_home")))
    assets = ["term_responses", "term_judgements", "term_labels"]
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
            assert provider.calls("submit") == 2  # one batch per partition, submitted once
            for run in waiting:
                [local_id] = run["tags"][BATCHES_TAG].split(",")
                assert run["tags"][WILL_RETRY_TAG] == "true" and run["tags"][WAIT_TAG] == "waiting"
                assert cache.get_batch(local_id).partitions == [run["tags"]["dagster/partition"]]
                [message] = _step_failures(instance, run["id"])
                assert local_id in message and "sctc_batches" in message, message
            assert not instance.get_materialized_partitions(dg.AssetKey("term_responses"))

            front.sensor_tick()  # batches still running: nothing requested
            assert len(front.runs(backfill)) == 2
            assert front.iterate(backfill, max_iterations=2) == "REQUESTED"

            provider.end()
            for run in waiting:  # as if the models' batch_poll_seconds had passed since the last poll
                cache.update_batch(run["tags"][BATCHES_TAG], updated_at=0.0)
            with freeze_time(time.time() + 31):  # the sensor's interval has passed
                front.sensor_tick()
            runs = front.runs(backfill)
            retries = [run for run in runs if RETRY_OF_TAG in run["tags"]]
            assert sorted(run["tags"][RETRY_OF_TAG] for run in retries) == sorted(run["id"] for run in waiting)
            assert {run["status"] for run in retries} == {"SUCCESS"}
            # The new runs ended the old ones' wait as they started.
            assert all(instance.get_run_by_id(run["id"]).tags.get(AUTO_RETRY_RUN_ID_TAG) for run in waiting)

            assert front.iterate(backfill, max_iterations=5) == "COMPLETED_SUCCESS"
            for name in assets:
                assert instance.get_materialized_partitions(dg.AssetKey(name)) == set(KEYS), name
            with freeze_time(time.time() + 62):
                front.sensor_tick()  # requested once
            assert len(front.runs(backfill)) == 4
    assert provider.calls("submit") == 2
