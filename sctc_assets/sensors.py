"""Keeps the `models` dynamic partitions in step with the registry file, so new models appear in the UI."""

import dagster as dg

from sctc_assets.partitions import MODELS_PARTITION_NAME
from sctc_assets.resources.registry import ModelRegistryResource


@dg.sensor(minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING)
def model_registry_sensor(context: dg.SensorEvaluationContext, models: ModelRegistryResource) -> dg.SensorResult:
    """Adds a `models` partition for every registry entry that has none (partitions are never deleted, so
    removing an entry keeps its past results)."""
    known = set(context.instance.get_dynamic_partitions(MODELS_PARTITION_NAME))
    new = sorted(set(models.entries()) - known)
    if not new:
        return dg.SensorResult(skip_reason=f"{len(known)} models, all registered")
    return dg.SensorResult(dynamic_partitions_requests=[dg.AddDynamicPartitionsRequest(MODELS_PARTITION_NAME, new)])
