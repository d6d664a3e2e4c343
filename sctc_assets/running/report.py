"""Materialize `audit_report` in-process into the persistent instance (what `sctc report` and `sctc run` do)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import dagster as dg

from sctc_assets.definitions import defs, shared_resources
from sctc_assets.partitions import MODELS_PARTITION_NAME
from sctc_assets.resources.model_registry import ModelRegistryResource


@dataclass
class ReportRun:
    ok: bool
    html: str | None
    message: str


def materialize_report(instance: dg.DagsterInstance, *, models: Sequence[str] | None = None,
                       out_dir: Path | None = None) -> ReportRun:
    """Build the report from the tables in the storage; the path of its HTML file, or why it failed."""
    # The per-model tables are read over the `model` partitions, which the registry sensor and `sctc run` fill;
    # registering the registry's enabled models here reads every model's tables however the instance was filled
    # (an example, `enabled: false`, has none and never becomes a partition).
    known = set(instance.get_dynamic_partitions(MODELS_PARTITION_NAME))
    new = [key for key in ModelRegistryResource().enabled_entries() if key not in known]
    if new:
        instance.add_dynamic_partitions(MODELS_PARTITION_NAME, new)
    graph = defs.resolve_asset_graph()
    assets = list({id(a): a for a in (defs.get_assets_def(key) for key in graph.get_all_asset_keys())}.values())
    config = {"models": list(models) if models else None, "out_dir": str(out_dir) if out_dir else None}
    result = dg.materialize(assets, selection=[dg.AssetKey("audit_report")], instance=instance,
                            resources=shared_resources(), raise_on_error=False,
                            run_config={"ops": {"audit_report": {"config": config}},
                                        "loggers": {"console": {"config": {"log_level": "ERROR"}}}},
                            tags={"sctc/launched_by": "sctc report"})
    if not result.success:
        errors = [event.step_failure_data.error for event in result.all_events
                  if event.is_step_failure and event.step_failure_data and event.step_failure_data.error]
        while errors and errors[0].cause is not None and (errors[0].cls_name or "").startswith("Dagster"):
            errors[0] = errors[0].cause
        message = errors[0].message.strip().splitlines()[-1] if errors and errors[0].message else "run failed"
        return ReportRun(False, None, message)
    materialization = result.asset_materializations_for_node("audit_report")[0]
    html = str(materialization.metadata["report"].value)
    missing = materialization.metadata["missing_parts"].value
    return ReportRun(True, html, f"{materialization.metadata['models'].value} model(s), "
                                 f"{materialization.metadata['figures'].value} figures"
                                 + (f", {missing} part(s) missing (listed in the report)" if missing else ""))
