"""Declarative automation, opt-in: with the `sctc_automation` sensor on, materializing one model's answers brings
that model's scoring, its per-model tables and the cross-model tables up to date, without a backfill.

Nothing here ever asks the model under test: its answers (the GENERATION assets) are materialized by `sctc run`, a
UI run or a backfill only, so automation never spends model calls on its own. Everything downstream is automated:
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

AUTOMATION_ENV_VAR = "SCTC_AUTOMATION"
AUTOMATION_SENSOR_NAME = "sctc_automation"

PER_PARTITION = dg.AutomationCondition.eager()
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
    if calls == "generation" or stage == "inputs":
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
                    "model's labels, per-model tables and the cross-model tables. It never asks the model under "
                    f"test. Off unless ${AUTOMATION_ENV_VAR}=1 (or switched on here); needs the Dagster daemon.",
    )
