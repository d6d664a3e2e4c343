"""Which model-independent inputs `sctc run` can leave as they are: nothing they are computed from changed.

Built on Dagster's staleness: an input is unchanged when Dagster reports it FRESH (materialized, its
`code_version` the one its last materialization recorded, the data versions of everything upstream the ones
that materialization consumed; observable source assets upstream are observed first, so new upstream data shows
as a new data version). Dagster cannot see two things, so they are compared as well: the op config of the last
materializing run (e.g. `--name-seed`), and the `sctc/settings` tag, a digest of the `SCTC_*` settings that point
the resources at their data (upstream locations, registries, the data folder) together with the size and
modification time of the local files they name and of the repository's `data/*.yaml`. An asset without a
`code_version` is never taken as unchanged: Dagster would call it fresh after any materialization.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import dagster as dg
from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
from dagster._core.definitions.observe import observe
from dagster._time import get_current_datetime

SETTINGS_TAG = "sctc/settings"
# Per-run limits, not data: a new budget must not re-materialize the prompts.
_NOT_DATA = {"SCTC_MAX_CALLS", "SCTC_MAX_COST_USD", "SCTC_BUDGET_SCOPE"}
_REPOSITORY_DATA = Path(__file__).resolve().parents[2] / "data"


def _stat(value: str) -> list | None:
    """Size and modification time of a regular file (an archive, a registry); None for anything else: a folder's
    time changes with every file written below it (the data folder)."""
    try:
        found = os.stat(value)
    except (OSError, ValueError):
        return None
    return [found.st_size, found.st_mtime_ns] if stat.S_ISREG(found.st_mode) else None


def settings_digest(environ: Mapping[str, str] | None = None) -> str:
    """A digest of the settings that choose the inputs' data; stored as a run tag, never the values themselves."""
    environ = os.environ if environ is None else environ
    settings = {name: [value, _stat(value)] for name, value in sorted(environ.items())
                if name.startswith("SCTC_") and name not in _NOT_DATA}
    files = {path.name: _stat(str(path)) for path in sorted(_REPOSITORY_DATA.glob("*.yaml"))}
    payload = json.dumps({"settings": settings, "files": files}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def observe_sources(defs: dg.Definitions, keys: Iterable[dg.AssetKey], instance: dg.DagsterInstance,
                    resources: Mapping[str, Any], tags: Mapping[str, str]) -> dg.ExecuteInProcessResult | None:
    """Observe the observable source assets upstream of `keys`, so their data versions are current."""
    graph = defs.resolve_asset_graph()
    ancestors = {ancestor for key in keys for ancestor in graph.get_ancestor_asset_keys(key)}
    sources = [key for key in ancestors if graph.get(key).is_observable]
    if not sources:
        return None
    assets = list({id(a): a for a in (defs.resolve_assets_def(key) for key in sources)}.values())
    return observe(assets, instance=instance, resources=dict(resources), raise_on_error=False, tags=dict(tags))


def unchanged_inputs(defs: dg.Definitions, names: Sequence[str], instance: dg.DagsterInstance,
                     op_config: Mapping[str, Any], settings: str,
                     stored: Callable[[dg.AssetKey], bool] = lambda key: True) -> dict[str, str]:
    """Input name → why it must run again, for every input in `names` that is not unchanged (absent: unchanged).

    `stored(key)` says whether the asset's stored value still exists (a storage folder wiped under the instance)."""
    graph = defs.resolve_asset_graph()
    view = AssetGraphView(temporal_context=TemporalContext(effective_dt=get_current_datetime(), last_event_id=None),
                          instance=instance, asset_graph=graph)
    resolver = CachingStaleStatusResolver(instance=instance, asset_graph=graph, loading_context=view)
    reasons: dict[str, str] = {}
    for name in names:
        key = dg.AssetKey(name)
        assets_def = defs.resolve_assets_def(key)
        if assets_def.code_versions_by_key.get(key) is None:
            reasons[name] = "no code version"
            continue
        status = resolver.get_status(key)
        if status != StaleStatus.FRESH:
            causes = [cause.reason for cause in resolver.get_stale_causes(key)]
            reasons[name] = "never materialized" if status == StaleStatus.MISSING else "; ".join(causes) or "stale"
            continue
        if not stored(key):
            reasons[name] = "its stored table is gone"
            continue
        event = instance.get_latest_materialization_event(key)
        run = instance.get_run_by_id(event.run_id) if event is not None else None
        if run is None:
            reasons[name] = "no run recorded for its last materialization"
        elif run.tags.get(SETTINGS_TAG) != settings:
            reasons[name] = "data settings changed (or last materialized outside sctc run)"
        elif (run.run_config.get("ops") or {}).get(assets_def.node_def.name, {}).get("config") != op_config.get(name):
            reasons[name] = "config changed"
    return reasons


def latest_check_failures(defs: dg.Definitions, names: Sequence[str], instance: dg.DagsterInstance,
                          severity: dg.AssetCheckSeverity) -> list[str]:
    """The checks on `names` whose latest evaluation did not pass at `severity` (they are not run again)."""
    keys = [check_key for checks_def in defs.asset_checks or [] for check_key in checks_def.check_keys
            if check_key.asset_key.to_user_string() in names]
    failed = []
    for check_key, record in instance.event_log_storage.get_latest_asset_check_execution_by_key(keys).items():
        evaluation = record.event.dagster_event.event_specific_data if record.event and record.event.dagster_event else None
        if isinstance(evaluation, dg.AssetCheckEvaluation) and not evaluation.passed and evaluation.severity == severity:
            details = {key: value.value for key, value in evaluation.metadata.items()}
            failed.append(f"asset check {check_key.name} on {check_key.asset_key.to_user_string()} did not pass at "
                          f"its last evaluation ({details})")
    return failed
