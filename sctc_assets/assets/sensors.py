"""The package's sensors: `model_registry_sensor` keeps the `models` dynamic partitions in step with the registry file
(new models appear in the UI, and keys that left the registry, or were typed into "Add a partition" by mistake, go
away unless results were stored under them); `sctc_batches` starts the runs that wait for provider batches again
once their batches have ended (`resources/batch_wait.py`)."""

from __future__ import annotations

import json
import time
from typing import Iterable

import dagster as dg

from sctc_assets.lib.batches import ABANDONED, COLLECTED, BatchRecord
from sctc_assets.lib.cache import Cache
from sctc_assets.lib.model_registry import RegistryError
from sctc_assets.assets.partitions import MODELS_PARTITION_NAME
from sctc_assets.resources.batch_wait import (BATCHES_TAG, PARTITION_TAG, SENSOR, listed, mark_retried, retries_of,
                                              retry_tags, stop_waiting, waiting_runs)
from sctc_assets.resources.model_registry import ModelRegistryResource


def _model_dimension(partitions_def: dg.PartitionsDefinition | None) -> str | None:
    """`""` for an asset partitioned by model alone, the dimension's name for model × something, else None."""
    if isinstance(partitions_def, dg.DynamicPartitionsDefinition) and partitions_def.name == MODELS_PARTITION_NAME:
        return ""
    if isinstance(partitions_def, dg.MultiPartitionsDefinition):
        for dimension in partitions_def.partitions_defs:
            if _model_dimension(dimension.partitions_def) == "":
                return dimension.name
    return None


def models_with_materializations(instance: dg.DagsterInstance, asset_graph, models: Iterable[str]) -> set[str]:
    """Those of `models` that some asset has a stored materialization of (any language, format or stage)."""
    wanted = set(models)
    found: set[str] = set()
    if not wanted:
        return found
    for key in asset_graph.materializable_asset_keys:
        partitions_def = asset_graph.get(key).partitions_def
        dimension = _model_dimension(partitions_def)
        if dimension is None:
            continue
        for partition in instance.get_materialized_partitions(key):
            model = (partition if dimension == "" else
                     partitions_def.get_partition_key_from_str(partition).keys_by_dimension[dimension])
            if model in wanted:
                found.add(model)
        if found == wanted:
            break
    return found


_IN_PROGRESS = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
                dg.DagsterRunStatus.STARTED]
_RANGE_TAGS = ("dagster/asset_partition_range_start", "dagster/asset_partition_range_end")


def models_in_running_runs(instance: dg.DagsterInstance) -> set[str]:
    """Models named by the partition tags of queued or running runs: such a run may be about to store the first
    result of a model whose entry was just removed."""
    models = set()
    for record in instance.get_run_records(dg.RunsFilter(statuses=_IN_PROGRESS)):
        tags = record.dagster_run.tags
        for name in ("dagster/partition/model", "dagster/partition"):
            if name in tags:
                models.add(tags[name])
        # A single-run backfill names its first and last partition; model keys never hold "|", and in every
        # model × lang / model × format key the model comes last (dimensions sort by name).
        models.update(tags[name].split("|")[-1] for name in _RANGE_TAGS if name in tags)
    return models


# A key must stay out of the registry this long before its partition goes: `sctc run --registry OTHER.yaml` adds
# the partitions of its models before their first run starts, and a registry being edited may lose a key briefly.
GRACE_SECONDS = 300


def _since(cursor: str | None) -> dict[str, float]:
    try:
        value = json.loads(cursor) if cursor else {}
    except json.JSONDecodeError:
        return {}
    return {str(key): float(when) for key, when in (value.get("unregistered_since") or {}).items()}


@dg.sensor(minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING,
           description="Keeps the `models` partitions equal to the registry's enabled entries: adds a partition for"
                       " each new entry and removes those of keys out of the registry (or `enabled: false`) for 5"
                       " minutes that have no stored materialization; keys with results are kept and named.")
def model_registry_sensor(context: dg.SensorEvaluationContext, models: ModelRegistryResource) -> dg.SensorResult:
    """Adds and removes `models` partitions so that they follow the registry's enabled entries.

    A key that left the registry but has materializations keeps its partition, so its past results stay visible
    and the cross-model tables keep them; the sensor names such keys instead of deleting them. A key without
    results goes once it has been out of the registry for `GRACE_SECONDS` (the cursor remembers since when).
    """
    now = time.time()
    registered = set(models.enabled_entries())
    known = set(context.instance.get_dynamic_partitions(MODELS_PARTITION_NAME))
    new = sorted(registered - known)
    gone = sorted(known - registered)
    kept: list[str] = []
    if gone:
        if context.repository_def is None:
            # Only the definitions the sensor runs in know which assets store results by model; guessing could
            # delete the partition of a model with results. The daemon always passes them; a test must too.
            raise dg.DagsterInvariantViolationError(
                "model_registry_sensor needs its definitions to tell which models have results: build its context"
                " with `dg.build_sensor_context(..., definitions=defs)`")
        busy = models_with_materializations(context.instance, context.repository_def.asset_graph, gone) | (
            models_in_running_runs(context.instance))
        kept = [key for key in gone if key in busy]
        gone = [key for key in gone if key not in busy]
    previously = _since(context.cursor)
    since = {key: previously.get(key, now) for key in gone}
    removable = [key for key in gone if now - since[key] >= GRACE_SECONDS]
    waiting = [key for key in gone if key not in removable]
    cursor = json.dumps({"unregistered_since": {key: since[key] for key in waiting}}, sort_keys=True)
    if kept:
        context.log.info(f"kept {len(kept)} partition(s) of models not in the registry, because results are stored"
                         f" under them (or a run is using them): {', '.join(kept)}")
    requests: list = []
    if new:
        requests.append(dg.AddDynamicPartitionsRequest(MODELS_PARTITION_NAME, new))
    if removable:
        context.log.info(f"removing {len(removable)} partition(s) of models not in the registry, with no results: "
                         f"{', '.join(removable)}")
        requests.append(dg.DeleteDynamicPartitionsRequest(MODELS_PARTITION_NAME, removable))
    if not requests:
        notes = [f"kept without a registry entry (results stored): {', '.join(kept)}"] if kept else []
        notes += [f"not in the registry, removed after {GRACE_SECONDS} s without results: {', '.join(waiting)}"
                  ] if waiting else []
        return dg.SensorResult(skip_reason="; ".join([f"{len(registered)} models, all registered", *notes]),
                               cursor=cursor)
    return dg.SensorResult(dynamic_partitions_requests=requests, cursor=cursor)


BATCH_SENSOR_INTERVAL_S = 30
# How long a batch may stay recorded but unconfirmed (`submitting`, no provider id) before a run is started to
# resolve it: the driver looks it up (`find`) and adopts or abandons it after this grace.
SUBMITTING_GRACE_S = 600
DEFAULT_POLL_S = 60.0  # a model's `batch_poll_seconds` when its backend has none


class _BatchPoller:
    """One tick's view of the batches: each polled at most once (`status`, never its results), and only when its
    model's `batch_poll_seconds` have passed since its record was last updated."""

    def __init__(self, cache: Cache, models: ModelRegistryResource, log, now: float):
        self.cache, self.models, self.log, self.now = cache, models, log, now
        self._ended: dict[str, bool] = {}
        self._backends: dict[str, object] = {}
        self.polled = 0

    def ended(self, local_id: str, model: str | None) -> bool:
        if local_id not in self._ended:
            self._ended[local_id] = self._look(local_id, model)
        return self._ended[local_id]

    def _look(self, local_id: str, model: str | None) -> bool:
        record: BatchRecord | None = self.cache.get_batch(local_id)
        if record is None:  # nothing to wait for: the next run decides from the cache
            self.log.warning(f"batch {local_id} is not in the response cache: starting the run that waits for it")
            return True
        if record.ended or record.state in (COLLECTED, ABANDONED):
            return True
        if not record.provider_id:  # recorded, submission unconfirmed: a run resolves it after the grace
            return self.now - (record.updated_at or record.created_at) >= SUBMITTING_GRACE_S
        key = record.registry_key or model
        try:
            backend = self._backend(key)
        except RegistryError as exc:  # the run that collects it will fail with this message
            self.log.warning(f"batch {local_id}: cannot poll it ({exc}); starting the run that waits for it")
            return True
        if self.now - record.updated_at < float(getattr(backend, "batch_poll_seconds", DEFAULT_POLL_S)):
            return False
        try:
            client = backend.batch_client()
            try:
                status = client.status(record.provider_id)
            finally:  # a client holds an HTTP connection and its thread (`BatchHttp`): a daemon would pile them up
                close = getattr(client, "close", None)
                if close is not None:
                    close()
        except Exception as exc:  # noqa: BLE001 - a poll that failed is tried again at the next tick
            self.log.warning(f"batch {local_id} ({record.provider_id}): poll failed, tried again later: {exc}")
            return False
        self.polled += 1
        self.cache.update_batch(local_id, state=status.state, ended=status.ended, counts=dict(status.counts),
                                message=status.message, updated_at=self.now)
        return status.ended

    def _backend(self, key: str | None):
        if key is None:
            raise RegistryError("the batch names no registry entry and its run no `sctc/model`")
        if key not in self._backends:
            self._backends[key] = self.models.backend(key, allow_example=True)
        return self._backends[key]


def _selection(context: dg.SensorEvaluationContext, run: dg.DagsterRun) -> list[dg.AssetKey] | None:
    """The assets `run` materializes: its asset selection, else (a named job launched whole) its job's assets; None
    when its job is gone from the definitions."""
    if run.asset_selection:
        return sorted(run.asset_selection)
    repository = context.repository_def
    if repository is None or not repository.has_job(run.job_name):
        return None
    return sorted(repository.get_job(run.job_name).asset_layer.executable_asset_keys)


# Dagster's implicit job of all assets (what a UI materialization or a backfill runs), by name: a sensor must
# target a job to request runs, and this one runs any asset selection with its own partitions (the waiting run's).
ASSET_JOB = "__ASSET_JOB"


@dg.sensor(name=SENSOR, minimum_interval_seconds=BATCH_SENSOR_INTERVAL_S, job_name=ASSET_JOB,
           default_status=dg.DefaultSensorStatus.RUNNING,
           description="Starts the runs that wait for provider batches (tagged `sctc/batches`) again once every batch"
                       " they name has ended: same assets, partition and tags (a backfill's id included, so the"
                       " backfill completes), tagged `sctc/retry_of`. Polls each open batch's status at most every"
                       " `batch_poll_seconds` of its model; never reads results (the run collects them).")
def sctc_batches(context: dg.SensorEvaluationContext, models: ModelRegistryResource) -> dg.SensorResult:
    """Requests, once, a run of each waiting run's assets and partition when all its batches have ended, and marks
    a waiting run whose new run exists `dagster/auto_retry_run_id` (Dagster's backfill then stops waiting on it).

    Cheap by design: it reads run tags and batch records, and polls the batches of waiting runs (`status` only)."""
    instance = context.instance
    runs = waiting_runs(instance)
    started = retries_of(instance, [run.run_id for run in runs])
    for waiting, new in started.items():
        mark_retried(instance, waiting, new)
    runs = [run for run in runs if run.run_id not in started]
    if not runs:
        return dg.SensorResult(skip_reason="no run waits for provider batches")
    poller = _BatchPoller(models.cache(), models, context.log, time.time())
    requests, open_ids = [], set()
    for run in runs:
        batches = listed(run.tags.get(BATCHES_TAG))
        # every batch is looked at (not `all()`, which stops at the first open one), so each record stays current
        ended = [poller.ended(local_id, run.tags.get("sctc/model")) for local_id in batches]
        if not all(ended):
            open_ids.update(local_id for local_id, done in zip(batches, ended) if not done)
            continue
        selection = _selection(context, run)
        if not selection:
            context.log.warning(f"run {run.run_id} waited for batches {', '.join(batches)}, but its job "
                                f"{run.job_name!r} is no longer defined: materialize its partition again yourself")
            stop_waiting(instance, run.run_id)
            continue
        requests.append(dg.RunRequest(
            run_key=f"{SENSOR}:{run.run_id}", asset_selection=selection,
            asset_check_keys=list(run.asset_check_selection) if run.asset_check_selection else None,
            partition_key=run.tags.get(PARTITION_TAG), run_config=run.run_config, tags=retry_tags(run)))
        context.log.info(f"batches {', '.join(batches)} ended: starting the run of "
                         f"{run.tags.get(PARTITION_TAG) or 'the assets'} that waited for them ({run.run_id})")
    if not requests:
        return dg.SensorResult(skip_reason=f"{len(runs)} run(s) wait for {len(open_ids)} open batch(es) "
                                           f"({poller.polled} polled this tick)")
    return dg.SensorResult(run_requests=requests)
