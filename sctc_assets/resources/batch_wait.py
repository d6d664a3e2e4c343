"""Runs that wait for provider batches (issue 40, point 3): no run worker is held while a batch runs for hours.

A model stage whose backend submitted batches in detach mode (`$SCTC_BATCH_WAIT`, the default outside `sctc run`)
raises `BatchesPending` (`backends/base.py`). The registry resource (`ModelRegistryResource.backend`) turns that, in
one place for every asset, into a *waiting run*: the run is tagged with the batches it waits for (`sctc/batches`),
`sctc/batch_wait=waiting` and Dagster's own `dagster/will_retry=true`, each batch record names the partition that
waits on it, and the step fails with a message saying so. Dagster's asset backfill then keeps a backfill in
progress (it treats the run as complete and waiting for an automatic retry: `DagsterRun.is_complete_and_waiting_to_
retry`, checked by `backfill_runs_are_complete`, which `_backfill_is_stalled` asks too). The `sctc_batches` sensor
(`assets/sensors.py`) starts the partition's run again once every batch it names has ended; that run collects
the batches and materializes, and the waiting run gets `dagster/auto_retry_run_id` (from the new run's registry
resource at start, and from the sensor when it sees the new run), which ends its wait for the backfill.

Only runs that Dagster launched (the UI, a backfill, a sensor, a schedule: they carry their job's origin) wait this
way. A run some process executes itself (`sctc run`, `dg.materialize`) is that process's to finish: there the
exception goes on unchanged (`sctc run` collects the batches when run again).

Dagster's run retries (`run_retries: enabled: true` in dagster.yaml) set `dagster/will_retry` themselves when a run
fails, by their own rules, after this module tagged it: with retries left, Dagster's retry daemon re-executes the
waiting run at once (the retry finds the batches open and waits again, using up a retry; Dagster marks the waiting
run `dagster/auto_retry_run_id`, so the sensor leaves it to Dagster); with none left, Dagster writes
`will_retry=false` and a backfill ends with the partition failed; the batches still run and a later run of the
partition collects them. Batch models that run from the UI therefore want run retries off (Dagster's default);
the run's log says so when they are on.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import dagster as dg

from sctc_assets.lib.cache import Cache

BATCHES_TAG = "sctc/batches"  # the local ids of the batches a waiting run waits for, comma-separated
WAIT_TAG = "sctc/batch_wait"  # "waiting", then "retried" once its next run exists (what the sensor looks for),
# or "given_up" when it cannot be started again
RETRY_OF_TAG = "sctc/retry_of"  # on the run the sensor started: the waiting run it continues
WAITING, RETRIED, GIVEN_UP = "waiting", "retried", "given_up"
# Dagster's own tags (dagster._core.storage.tags), by value: only `running/dagster_internals.py` imports private
# Dagster modules.
WILL_RETRY_TAG = "dagster/will_retry"
AUTO_RETRY_RUN_ID_TAG = "dagster/auto_retry_run_id"
BACKFILL_TAG = "dagster/backfill"
PARTITION_TAG = "dagster/partition"
SENSOR = "sctc_batches"
# Dagster tags the next run keeps: the backfill's id (so the backfill counts the run) and a ranged run's range.
CARRIED_DAGSTER_TAGS = (BACKFILL_TAG, "dagster/asset_partition_range_start", "dagster/asset_partition_range_end")


def pending_batches(error: BaseException) -> tuple[list[str], list[str]] | None:
    """The (local ids, provider ids) of a `BatchesPending`, else None. Read from its fields rather than its class,
    so that a backend of a third party's that raises its own `GenerationHalted` with `local_ids` waits alike."""
    local_ids = getattr(error, "local_ids", None)
    if not local_ids:
        return None
    return [str(value) for value in local_ids], [str(value) for value in getattr(error, "provider_ids", None) or []]


def launched_run(run: dg.DagsterRun | None) -> bool:
    """Whether Dagster launched `run` (it knows the job's origin, so a sensor can start it again) rather than a
    process that executes it itself (`sctc run`, `dg.materialize`, `execute_in_process`)."""
    return run is not None and run.remote_job_origin is not None


def listed(value: str | None) -> list[str]:
    return [part for part in (value or "").split(",") if part]


def wait_for_batches(instance: dg.DagsterInstance, run: dg.DagsterRun, cache: Cache, error: BaseException,
                     log: dg.DagsterLogManager | None = None) -> dg.Failure:
    """Make `run` a waiting run for the batches `error` names: tag it, record its partition on each batch, and
    return the step's failure (raise it `from error`)."""
    local_ids, provider_ids = pending_batches(error) or ([], [])
    current = instance.get_run_by_id(run.run_id) or run  # another step of the run may be waiting already
    waited = list(dict.fromkeys([*listed(current.tags.get(BATCHES_TAG)), *local_ids]))
    instance.add_run_tags(run.run_id, {BATCHES_TAG: ",".join(waited), WAIT_TAG: WAITING, WILL_RETRY_TAG: "true"})
    partition = run.tags.get(PARTITION_TAG)
    for local_id in local_ids if partition else ():
        record = cache.get_batch(local_id)
        if record is not None and partition not in record.partitions:
            cache.update_batch(local_id, partitions=[*record.partitions, partition])
    if log is not None and instance.run_retries_enabled:
        log.warning("this instance enables run retries: Dagster decides itself whether this waiting run is retried"
                    " (at once, using up a retry) and may mark it `dagster/will_retry=false`, which ends a backfill"
                    f" with this partition failed; turn run retries off to let the `{SENSOR}` sensor start it when"
                    " the batches end")
    described = ", ".join(f"{local}" + (f" ({provider})" if provider else "")
                          for local, provider in zip(local_ids, [*provider_ids, *[""] * len(local_ids)]))
    where = f"partition {partition}" if partition else "this run"
    return dg.Failure(
        description=f"waiting for provider batch(es) {described}: they are recorded in the response cache and keep"
                    f" running without this run; the `{SENSOR}` sensor starts the run of {where} again when they"
                    f" end, and that run collects their answers (nothing is asked or paid twice)",
        metadata={"batches": dg.MetadataValue.json(local_ids),
                  "provider batch ids": dg.MetadataValue.json(provider_ids),
                  "partition": partition or ""},
        allow_retries=False)  # a step retry now would only find the batches still open


def mark_retried(instance: dg.DagsterInstance, waiting_run_id: str, new_run_id: str) -> None:
    """Record that `new_run_id` continues the waiting run: Dagster's backfill then stops waiting on it."""
    waiting = instance.get_run_by_id(waiting_run_id)
    if waiting is None or waiting.tags.get(AUTO_RETRY_RUN_ID_TAG):
        return
    instance.add_run_tags(waiting_run_id, {AUTO_RETRY_RUN_ID_TAG: new_run_id, WAIT_TAG: RETRIED})


def stop_waiting(instance: dg.DagsterInstance, waiting_run_id: str) -> None:
    """`waiting_run_id` will not be started again (its job is gone): a backfill then counts its partition failed."""
    instance.add_run_tags(waiting_run_id, {WILL_RETRY_TAG: "false", WAIT_TAG: GIVEN_UP})


def waiting_runs(instance: dg.DagsterInstance) -> list[dg.DagsterRun]:
    """The failed runs still waiting for their batches: `sctc/batch_wait=waiting`, `dagster/will_retry=true` and no
    retry of theirs started (by the sensor or by Dagster's own retries), oldest first."""
    runs = instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE],
                                           tags={WAIT_TAG: WAITING, WILL_RETRY_TAG: "true"}))
    return sorted((run for run in runs if run.tags.get(BATCHES_TAG) and not run.tags.get(AUTO_RETRY_RUN_ID_TAG)),
                  key=lambda run: run.run_id)


def retry_tags(run: dg.DagsterRun) -> dict[str, str]:
    """The tags of the run that continues `run`: its own tags but Dagster's (the partition's come with the
    request) and its wait, its backfill's id (so the backfill counts the new run), and `sctc/retry_of`."""
    kept = {key: value for key, value in run.tags.items()
            if (not key.startswith(("dagster/", ".dagster/")) or key in CARRIED_DAGSTER_TAGS)
            and key not in (BATCHES_TAG, WAIT_TAG, RETRY_OF_TAG)}
    return {**kept, RETRY_OF_TAG: run.run_id}


def retries_of(instance: dg.DagsterInstance, run_ids: Iterable[str]) -> dict[str, str]:
    """waiting run id → the id of a run started to continue it (tagged `sctc/retry_of`), for those that have one."""
    wanted: Sequence[str] = list(run_ids)
    if not wanted:
        return {}
    found = instance.get_runs(dg.RunsFilter(tags={RETRY_OF_TAG: list(wanted)}))
    return {run.tags[RETRY_OF_TAG]: run.run_id for run in sorted(found, key=lambda run: run.run_id)}
