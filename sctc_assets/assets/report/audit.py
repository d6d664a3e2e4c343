"""`audit_report`: every benchmark's tables as `<out>/report/index.html`, `report.md` and `figures/`.

Each table input is optional, so a partial audit still reports: a missing or empty table gives a section saying
what is missing and how to produce it. The response tables are read for provenance only (a few columns), as
dependencies rather than inputs, so their answer texts are never loaded.
"""

import datetime as dt
from pathlib import Path
from typing import Any, Optional

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.assets.catalog import catalogued
from sctc_assets.lib.paths import default_outputs_dir
from sctc_assets.benchmarks import REPORT_INPUTS, REPORT_TABLES, RESPONSE_TABLES, report_sections
from sctc_assets.lib.report import ReportInputs, build_report, response_usage
from sctc_assets.lib.report.inputs import interval_tables
from sctc_assets.resources.io_manager import OPTIONAL_INPUT, ParquetIOManager
from sctc_assets.resources.model_registry import ModelRegistryResource

GROUP = "report"
# Metadata of the inputs stages that says which upstream copy the tables were computed from.
UPSTREAM_ASSETS = ("regional_terms", "regional_names", "sovereignty_prompts", "raw_reviews")
UPSTREAM_KEYS = ("upstream", "upstream_commit", "upstream_note", "tsb_benchmark_commit", "tsb_pro_commit",
                 "red_flags", "red_flag_version", "source", "reviews_source")
# Figures are drawn in this many processes (the report's slowest part; see bench/report_build.py).
FIGURE_WORKERS = 2


class AuditReportConfig(dg.Config):
    models: Optional[list[str]] = Field(default=None, description="Only these models (default: every model with "
                                                                  "results in the tables).")
    out_dir: Optional[str] = Field(default=None, description="The report goes to OUT_DIR/report/ (default "
                                                             "data/outputs, as `sctc run --out`).")


def _upstream(instance: dg.DagsterInstance) -> dict[str, str]:
    found: dict[str, str] = {}
    for name in UPSTREAM_ASSETS:
        event = instance.get_latest_materialization_event(dg.AssetKey(name))
        if event is None or event.asset_materialization is None:
            continue
        for key, value in event.asset_materialization.metadata.items():
            if key in UPSTREAM_KEYS or "commit" in key:
                found.setdefault(f"{name}: {key}" if key in found else key, str(value.value))
    return found


# The newest materializations per response asset read for the backends that made the answers (one per partition),
# which every response asset records in its metadata under this key.
STORED_BACKEND_RECORDS = 5000
BACKEND_KEY = "backend"


def _stored_backends(instance: dg.DagsterInstance) -> dict[str, str]:
    """Model → the backend its newest stored answers were made with (answers stored before this was recorded have
    none; the report falls back on the registry for them). Model keys come last in every response partition key."""
    found: dict[str, str] = {}
    for asset in dict.fromkeys(RESPONSE_TABLES.values()):
        records = instance.fetch_materializations(dg.AssetKey(asset), limit=STORED_BACKEND_RECORDS).records
        for record in records:  # newest first
            materialization = record.asset_materialization
            value = materialization.metadata.get(BACKEND_KEY) if materialization is not None else None
            if value is not None and materialization.partition:
                found.setdefault(str(materialization.partition).split("|")[-1], str(value.value))
    return found


def _table_info(instance: dg.DagsterInstance, tables: dict[str, pd.DataFrame]) -> dict[str, dict[str, Any]]:
    info = {}
    for name, frame in tables.items():
        event = instance.get_latest_materialization_event(dg.AssetKey(name))
        when = dt.datetime.fromtimestamp(event.timestamp, dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC") \
            if event is not None else "never"
        info[name] = {"rows": len(frame), "materialized_at": when}
    return info


def _ins() -> dict[str, dg.AssetIn]:
    # OPTIONAL_INPUT applies to unpartitioned inputs; a partitioned one with no partition materialized loads empty.
    return {name: dg.AssetIn(metadata={OPTIONAL_INPUT: True}) for name in REPORT_TABLES}


@catalogued
@dg.asset(group_name=GROUP, kinds={"html"}, ins=_ins(), deps=list(RESPONSE_TABLES.values()))
def audit_report(context: dg.AssetExecutionContext, config: AuditReportConfig, models: ModelRegistryResource,
                 io_manager: dg.ResourceParam[ParquetIOManager], **tables: pd.DataFrame) -> dg.MaterializeResult:
    """The audit report: a scorecard (one row per model, each benchmark's headline with its 95 % interval and
    marks), the papers' figures and tables per benchmark, and the provenance of every number (platform, packages,
    upstream commits, registry entries without secrets, served model ids and fingerprints, cache, tokens, cost).
    Writes OUT_DIR/report/index.html (self-contained, opens without a server), report.md and figures/<name>.png and
    .svg; the metadata links the HTML file."""
    storage = io_manager._root()
    tables = {**tables, **interval_tables(storage, skip=tables)}
    out_dir = Path(config.out_dir) if config.out_dir else default_outputs_dir()
    inputs = ReportInputs(
        tables=tables, registry=models.entries(), models=config.models,
        usage=response_usage(storage, RESPONSE_TABLES, config.models), benchmark_tables=REPORT_INPUTS,
        sections=report_sections(), backends=_stored_backends(context.instance),
        provenance={"upstream": _upstream(context.instance), "tables": _table_info(context.instance, tables)})
    result = build_report(inputs, out_dir, workers=FIGURE_WORKERS)
    for note in result.missing:
        context.log.warning(f"audit_report: {note}")
    context.log.info(f"audit report of {len(result.models)} model(s), {len(result.figures)} figures: {result.html}")
    return dg.MaterializeResult(metadata={
        "report": dg.MetadataValue.path(str(result.html)),
        "report_url": dg.MetadataValue.url(result.html.resolve().as_uri()),
        "report_markdown": dg.MetadataValue.path(str(result.markdown)),
        "figures_dir": dg.MetadataValue.path(str(result.folder / "figures")),
        "models": len(result.models), "figures": len(result.figures), "missing_parts": len(result.missing),
        "missing": dg.MetadataValue.json(result.missing[:30]),
    })
