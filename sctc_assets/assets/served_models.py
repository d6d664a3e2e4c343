"""The model each observed endpoint serves (`observe:` in the registry, `lib/served_model.py`), as observed data
versions of the `served_model` source asset, partitioned by model as the responses are.

The `sctc_served_models` sensor observes every enabled entry with `observe:` when it is due (at most once a day per
entry; its cursor keeps each entry's last observation time) and records the served model and fingerprint as an
observation whose data version is their hash. The responses assets depend on `served_model`, and their automation
condition (`assets/automation.py`) starts a model's already-answered partitions when its observed data version
changes, and only those; the new answers carry the observed version's epoch tag (`resources/model_registry.py`), so
the drift table compares the two versions' answers. Replays and the embedded model are never observed.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from typing import Any, Callable, Mapping

import dagster as dg

from sctc_assets.lib.model_registry import ModelEntry
from sctc_assets.lib.served_model import ObserveError, ServedVersion, due, observe_endpoint
from sctc_assets.assets.partitions import models_partitions
from sctc_assets.resources.model_registry import ModelRegistryResource
from sctc_assets.resources.served_epoch import DATA_VERSION_TAG, SERVED_MODEL_KEY, latest_version

SENSOR_NAME = "sctc_served_models"
# How often the sensor looks for due entries (each entry is observed at most once per its `observe` interval).
INTERVAL_ENV_VAR = "SCTC_SERVED_MODELS_INTERVAL_S"

def observation(model: str, version: ServedVersion) -> dg.AssetObservation:
    return dg.AssetObservation(
        asset_key=SERVED_MODEL_KEY, partition=model, tags={DATA_VERSION_TAG: version.data_version},
        metadata={"served_model": version.served_model, "system_fingerprint": version.fingerprint,
                  "epoch": version.epoch},
    )


def observe_due(entries: Mapping[str, ModelEntry], last: Mapping[str, float], now: float,
                known: Callable[[str], str | None] = lambda key: None,
                observe: Callable[[Mapping[str, Any]], ServedVersion] | None = None
                ) -> tuple[list[dg.AssetObservation], dict[str, float], list[str]]:
    """Probe the enabled observed entries that are due, each with its probe (`observe.probe`: a chat call or the
    model listing; `observe` replaces them, given an entry's settings); the observations of those whose served
    version differs from the one `known` (the latest recorded data version) names, each entry's time of last probe
    after them, and the errors of endpoints that could not be observed (tried again at the next interval; a model
    the listing does not know is one). An unchanged version is not recorded again: every recorded observation counts
    as an update to the automation."""
    events, times, errors = [], dict(last), []
    for key, entry in sorted(entries.items()):
        if not entry.enabled or entry.observe_hours is None or not due(last.get(key), entry.observe_hours, now):
            continue
        times[key] = now
        try:
            version = observe(entry.settings) if observe is not None else \
                observe_endpoint(entry.settings, entry.observe_probe)
        except ObserveError as exc:
            errors.append(f"{key}: {exc}")
            continue
        if version.data_version != known(key):
            events.append(observation(key, version))
    return events, times, errors


def _observe_registry(models: ModelRegistryResource, last: Mapping[str, float],
                      context: Any) -> tuple[list[dg.AssetObservation], dict[str, float]]:
    """`observe_due` over the registry's enabled entries now, against the versions the instance last recorded; the
    endpoints that could not be observed are warned about in `context`'s log (the asset's, or the sensor's)."""
    events, times, errors = observe_due(models.enabled_entries(), last, time.time(),
                                        lambda key: latest_version(context.instance, key))
    for error in errors:
        context.log.warning(error)
    return events, times


# `observable_source_asset` is beta in Dagster 1.13; the warning would be printed by every process that loads the
# definitions (the daemon's runs included).
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Function `observable_source_asset`", category=dg.BetaWarning)

    @dg.observable_source_asset(
        key=SERVED_MODEL_KEY, partitions_def=models_partitions, group_name="served_models",
        description="The model an observed endpoint serves behind a registry key (`observe:` in the registry), at most "
                    "daily by the `sctc_served_models` sensor; its data version is a hash of the served model id and "
                    "system fingerprint, and a change starts the model's answers again (automation on). Observing it "
                    "here probes every observed entry now (a changed version is recorded).")
    def served_model(context: dg.AssetExecutionContext, models: ModelRegistryResource) -> dg.DataVersionsByPartition:
        # every observed entry now (none observed before in this call: all due); only the changed versions, as the
        # sensor records them
        events, _ = _observe_registry(models, {}, context)
        return dg.DataVersionsByPartition({event.partition: event.tags[DATA_VERSION_TAG] for event in events})


@dg.sensor(name=SENSOR_NAME, minimum_interval_seconds=int(os.environ.get(INTERVAL_ENV_VAR) or 3600),
           default_status=dg.DefaultSensorStatus.RUNNING,
           description="Observes the model each registry entry with `observe:` serves (one one-token chat call, or "
                       "the provider's model listing with `probe: models`; at most daily per entry) and records it "
                       "on the `served_model` asset when it changed; with automation on, a change starts that "
                       "model's answers again. Entries without `observe:` cost nothing.")
def served_models_sensor(context: dg.SensorEvaluationContext, models: ModelRegistryResource) -> dg.SensorResult:
    events, times = _observe_registry(models, json.loads(context.cursor) if context.cursor else {}, context)
    return dg.SensorResult(asset_events=events, cursor=json.dumps(times, sort_keys=True))
