"""Keeps the `models` dynamic partitions in step with the registry file: new models appear in the UI, and keys that
left the registry (or were typed into "Add a partition" by mistake) go away unless results were stored under them."""

from __future__ import annotations

import json
import time
from typing import Iterable

import dagster as dg

from sctc_assets.partitions import MODELS_PARTITION_NAME
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
