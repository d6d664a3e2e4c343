"""Declarative automation, opt-in: with the `sctc_automation` sensor on, materializing one model's answers brings
that model's scoring, its per-model tables and the cross-model tables up to date, without a backfill.

The model under test is asked again on one occasion only: a registry entry with `observe:` whose served model
changed (a new observed data version of its `served_model` partition, `assets/served_models.py`) starts that model's
answers (the GENERATION assets, model × lang) again, only the partitions that were answered before. Otherwise its
answers are materialized by `sctc run`, a UI run or a backfill only. Everything downstream is automated:
- per model × lang and per model: `eager()` (when a parent partition updates, or once all parents exist);
- cross-model tables read every model's partitions, and a registered model that was never run is a missing parent
  partition for ever: `eager()` that waits for missing model-independent parents only (never-run models are skipped
  when read), and that does not materialize a table only because it is missing.
Model-independent inputs (read from upstream files and registries) are not automated.

The sensor is off unless `SCTC_AUTOMATION=1` is set when the code location loads (or you turn it on in the UI:
Automation → sctc_automation); the Dagster daemon must run (`sctc ui` / `dagster dev` start it).
"""

from __future__ import annotations

import os

import dagster as dg

from sctc_assets.resources.served_epoch import SERVED_MODEL_KEY

AUTOMATION_ENV_VAR = "SCTC_AUTOMATION"
AUTOMATION_SENSOR_NAME = "sctc_automation"

PER_PARTITION = dg.AutomationCondition.eager()
# SERVED_MODEL_KEY: the served models' source asset (assets/served_models.py), a dependency of every model × lang
# answers asset.
SERVED_MODEL_CHANGED = (
    dg.AutomationCondition.any_deps_match(dg.AutomationCondition.data_version_changed()).allow(
        dg.AssetSelection.keys(SERVED_MODEL_KEY))
    & ~dg.AutomationCondition.missing()
    & ~dg.AutomationCondition.in_progress()
).with_label("served_model_changed")
# The per-model stages, whose never-run models are missing partitions (the IO manager skips them when reading).
MODEL_PARTITIONED = dg.AssetSelection.tag("sctc/stage", "model_lang") | dg.AssetSelection.tag("sctc/stage", "per_model")
CROSS_MODEL = (
    dg.AutomationCondition.any_deps_updated().since_last_handled()
    & ~dg.AutomationCondition.any_deps_missing().ignore(MODEL_PARTITIONED)
    & ~dg.AutomationCondition.any_deps_in_progress()
    & ~dg.AutomationCondition.in_progress()
).with_label("cross_model_eager")


def condition_for(stage: str, calls: str | None) -> dg.AutomationCondition | None:
    """The automation condition of an asset of this stage (`catalog.STAGES`) that makes these model calls."""
    if calls == "generation":
        return SERVED_MODEL_CHANGED if stage == "model_lang" else None
    if stage == "inputs":
        return None
    return CROSS_MODEL if stage == "cross_model" else PER_PARTITION


def automation_enabled() -> bool:
    return os.environ.get(AUTOMATION_ENV_VAR, "").strip().lower() in {"1", "true", "yes", "on"}


def automation_sensor() -> dg.AutomationConditionSensorDefinition:
    return dg.AutomationConditionSensorDefinition(
        AUTOMATION_SENSOR_NAME,
        target=dg.AssetSelection.all(),
        default_status=dg.DefaultSensorStatus.RUNNING if automation_enabled() else dg.DefaultSensorStatus.STOPPED,
        minimum_interval_seconds=30,
        run_tags={"sctc/launched_by": "automation"},
        description="Opt-in declarative automation: when a model's answers are materialized, materializes that "
                    "model's labels, per-model tables and the cross-model tables. It asks the model under test only "
                    "when the served model of an entry with `observe:` changed (its answered partitions). "
                    f"Off unless ${AUTOMATION_ENV_VAR}=1 (or switched on here); needs the Dagster daemon.",
    )
