"""Materialize `audit_report` in-process into the persistent instance (what `sctc report` and `sctc run` do).

An unchanged rerun does not build the report again: `<out>/report/.sctc-report.json` records a digest of what the
report was built from, and a report whose digest is the same (and whose HTML file is the one written then) is
left as it is. The digest covers every input the report reads: the size and modification time of every file in
the storage folder (the tables, the interval tables, the response tables read for provenance); the newest
materialization of every other asset in the instance (the backends, upstream commits and times the provenance
section quotes); the registry files and the `SCTC_*` settings; the options (models, output folder); and the code
that draws it (every file of the `sctc_assets` package, and the versions of Python and the libraries it uses).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Sequence

import dagster as dg

from sctc_assets.definitions import defs, every_asset, shared_resources
from sctc_assets.lib.atomic_files import write_text
from sctc_assets.lib.model_registry import overlay_dir
from sctc_assets.lib.paths import default_outputs_dir
from sctc_assets.lib.run_record import file_states
from sctc_assets.assets.partitions import MODELS_PARTITION_NAME
from sctc_assets.resources.io_manager import ParquetIOManager
from sctc_assets.resources.model_registry import ModelRegistryResource
from sctc_assets.running.unchanged import NOT_DATA_SETTINGS

REPORT_RECORD = ".sctc-report.json"
REPORT_ASSET = dg.AssetKey("audit_report")
PACKAGE = Path(__file__).resolve().parents[1]
# The libraries whose output the report contains (tables, statistics, figures) or quotes (provenance).
# Settings that limit or spread a run, or skip the report, without changing what it reads.
NOT_REPORT_SETTINGS = NOT_DATA_SETTINGS | {"SCTC_NO_REPORT"}
LIBRARIES = ("dagster", "pandas", "numpy", "scipy", "statsmodels", "matplotlib", "pyarrow", "jinja2", "markdown")


@dataclass
class ReportRun:
    ok: bool
    html: str | None
    message: str
    skipped: bool = False


def _files_state(folder: Path) -> list:
    """Relative path, size and modification time of every file below `folder`, writers' temporary files left out."""
    return [[os.path.relpath(path, folder), size, mtime] for path, size, mtime in file_states(folder)]


def _file_state(path: Path) -> list | None:
    try:
        state = path.stat()
    except OSError:
        return None
    return [state.st_size, state.st_mtime_ns]


def _code_version() -> str:
    """A digest of every file of the package (the report's sections, tables and figures come from all over it)."""
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(PACKAGE):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            path = Path(root, name)
            digest.update(str(path.relative_to(PACKAGE)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {"python": sys.version}
    for name in LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def _materializations(instance: dg.DagsterInstance) -> dict[str, int]:
    """Asset → the event-log id of its newest materialization, the report's own left out (one query of the
    instance's asset index)."""
    found = {}
    for record in instance.get_asset_records():
        entry = record.asset_entry
        if entry.asset_key != REPORT_ASSET and entry.last_materialization_storage_id is not None:
            found[entry.asset_key.to_user_string()] = entry.last_materialization_storage_id
    return found


def report_digest(instance: dg.DagsterInstance, models: Sequence[str] | None, out_dir: Path) -> str:
    """A digest of everything the report at `out_dir/report/` would be built from (see the module docstring)."""
    io_manager = shared_resources().get("io_manager")
    storage = (io_manager if isinstance(io_manager, ParquetIOManager) else ParquetIOManager())._root()
    registry = Path(ModelRegistryResource().path())
    overlays = overlay_dir(registry)
    state = {
        "storage": [str(storage), _files_state(storage)],
        "materializations": _materializations(instance),
        "registry": [str(registry), _file_state(registry), _files_state(overlays) if overlays.is_dir() else None],
        "settings": {key: value for key, value in sorted(os.environ.items())
                     if key.startswith("SCTC_") and key not in NOT_REPORT_SETTINGS},
        "options": {"models": list(models) if models else None, "out_dir": str(out_dir)},
        "code": _code_version(), "versions": _versions(),
    }
    return hashlib.sha256(json.dumps(state, sort_keys=True, default=str).encode()).hexdigest()


def _unchanged_report(record_path: Path, digest: str) -> dict[str, Any] | None:
    """The record of the report built into this folder from the same inputs, if its HTML file is still the one
    written then; None otherwise."""
    try:
        record = json.loads(record_path.read_text())
        html = Path(record["html"])
        written = html.stat()
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if record.get("digest") != digest or record.get("html_state") != [written.st_size, written.st_mtime_ns]:
        return None
    return record


def materialize_report(instance: dg.DagsterInstance, *, models: Sequence[str] | None = None,
                       out_dir: Path | None = None, force: bool = False) -> ReportRun:
    """Build the report from the tables in the storage; the path of its HTML file, or why it failed. A report
    built into the same folder from the same inputs is left as it is (`skipped`), unless `force`."""
    folder = (out_dir or default_outputs_dir()) / "report"
    record_path = folder / REPORT_RECORD
    digest = report_digest(instance, models, out_dir or default_outputs_dir())
    record = None if force else _unchanged_report(record_path, digest)
    if record is not None:
        return ReportRun(True, record["html"], f"unchanged since {record['built_at']}: skipped", skipped=True)
    outcome = _materialize(instance, models, out_dir)
    if outcome.ok and outcome.html:
        written = Path(outcome.html).stat()
        built_at = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        write_text(record_path, json.dumps({"digest": digest, "built_at": built_at, "html": outcome.html,
                                            "html_state": [written.st_size, written.st_mtime_ns],
                                            "message": outcome.message}, indent=1))
    else:
        record_path.unlink(missing_ok=True)  # a failed build may have replaced part of the folder
    return outcome


def _materialize(instance: dg.DagsterInstance, models: Sequence[str] | None, out_dir: Path | None) -> ReportRun:
    # The per-model tables are read over the `model` partitions, which the registry sensor and `sctc run` fill;
    # registering the registry's enabled models here reads every model's tables however the instance was filled
    # (an example, `enabled: false`, has none and never becomes a partition).
    known = set(instance.get_dynamic_partitions(MODELS_PARTITION_NAME))
    new = [key for key in ModelRegistryResource().enabled_entries() if key not in known]
    if new:
        instance.add_dynamic_partitions(MODELS_PARTITION_NAME, new)
    assets = every_asset(defs)
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
