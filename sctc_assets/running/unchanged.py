"""Which model-independent inputs `sctc run` can leave as they are: nothing they are computed from changed.

Built on Dagster's staleness: an input is unchanged when Dagster reports it FRESH (materialized, its
`code_version` the one its last materialization recorded, the data versions of everything upstream the ones
that materialization consumed; observable source assets upstream are observed first, so new upstream data shows
as a new data version). Dagster cannot see two things, so they are compared as well: the op config of the last
materializing run (e.g. `--name-seed`), and the `.dagster/sctc_settings` tag (hidden in the UI), a digest of the
`SCTC_*` settings that point the resources at their data (upstream locations, registries, the data folder) together
with the size and modification time of the local files they name (of every file below an upstream folder) and of
the repository's `data/*.yaml`. An asset without a `code_version` is never taken as unchanged: Dagster would call it
fresh after any materialization.

The same test decides which model partitions (answers, scores, per-model tables) `sctc run` leaves as they are.
For those, the settings digest leaves out the registry file and adds the registry entries that matter to the
partition instead (the model's own and those of judges named in the config or the environment), so editing one
model's entry re-runs that model only. One `Staleness` (one Dagster stale-status resolver, its queries cached)
answers for a whole benchmark of a run.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import dagster as dg

from sctc_assets.running.dagster_internals import (AssetGraphView, AssetKeyPartitionKey, CachingStaleStatusResolver,
                                                   DagsterEventType, PartitionKeyFilter, StaleStatus, TemporalContext,
                                                   get_current_datetime, observe)

SETTINGS_TAG = ".dagster/sctc_settings"  # hidden from the Runs page's tags, as `instance`'s bookkeeping
LEGACY_SETTINGS_TAG = "sctc/settings"  # where runs of earlier versions carry it
# Per-run limits and how a run spreads its work, not data: a new budget must not re-materialize the prompts.
_NOT_DATA = {"SCTC_MAX_CALLS", "SCTC_MAX_COST_USD", "SCTC_BUDGET_SCOPE", "SCTC_WORKER_PROCESSES",
             "SCTC_CONCURRENT_MODELS", "SCTC_STAGES_PER_ENDPOINT",
             # Whether answers come through provider batches, and whether a run waits for them: the same answers
             # (batches are not part of the cache key), so `sctc run --batch` leaves what a run without it made.
             "SCTC_BATCH_MODELS", "SCTC_BATCH_WAIT",
             # The item-set registries name benchmarks of their own (`terms_<set>`), which are always re-run: a set
             # added must not make the other benchmarks' results look stale.
             "SCTC_ITEM_SETS", "SCTC_ITEM_SET_ENTRY"}
_NOT_DATA_FILES = {"item_sets.yaml"}
NOT_DATA_SETTINGS = frozenset(_NOT_DATA)
_REPOSITORY_DATA = Path(__file__).resolve().parents[2] / "data"


def _stat(value: str) -> list | None:
    """Size and modification time of a regular file (an archive, a registry); None for anything else: a folder's
    time changes with every file written below it (the data folder)."""
    try:
        found = os.stat(value)
    except (OSError, ValueError):
        return None
    return [found.st_size, found.st_mtime_ns] if stat.S_ISREG(found.st_mode) else None


def _tree_state(folder: str) -> str:
    """A digest of the relative path, size and modification time of every file below `folder` (an extracted
    upstream copy: some 1,600 files, milliseconds)."""
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            try:
                found = os.stat(path)
            except OSError:
                continue
            digest.update(f"{os.path.relpath(path, folder)}|{found.st_size}|{found.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def _setting_state(name: str, value: str) -> Any:
    """What of a setting's target is data: a file's size and time; every file below an upstream folder."""
    if "UPSTREAM" in name and os.path.isdir(value):
        return _tree_state(value)
    return _stat(value)


def settings_digest(environ: Mapping[str, str] | None = None, *, registry: bool = True) -> str:
    """A digest of the settings that choose the inputs' data; stored as a run tag, never the values themselves.

    `registry=False` leaves out the model registry (`$SCTC_MODELS`, `data/models.yaml`): a model partition digests
    the entries it uses instead (`model_settings_digest`)."""
    environ = os.environ if environ is None else environ
    settings = {name: [value, _setting_state(name, value)] for name, value in sorted(environ.items())
                if name.startswith("SCTC_") and name not in _NOT_DATA and (registry or name != "SCTC_MODELS")}
    files = {path.name: _stat(str(path)) for path in sorted(_REPOSITORY_DATA.glob("*.yaml"))
             if (registry or path.name != "models.yaml") and path.name not in _NOT_DATA_FILES}
    payload = json.dumps({"settings": settings, "files": files}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _entry_data(entry: Any) -> dict:
    """What of a registry entry can change answers or scores: backend, settings, benchmark settings; not its
    description, default flag, source file or budget. (Not the files a setting names either: a backend's log of
    its calls changes with every call.)"""
    return {"backend": getattr(entry, "backend", None), "settings": dict(getattr(entry, "settings", {}) or {}),
            "benchmarks": dict(getattr(entry, "benchmarks", {}) or {}), "enabled": getattr(entry, "enabled", True)}


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def model_settings_digest(settings: str, entries: Mapping[str, Any], model: str, op_config: Mapping[str, Any],
                          environ: Mapping[str, str] | None = None, served_epoch: str | None = None) -> str:
    """The settings digest of one model's partitions: `settings` (a `settings_digest(registry=False)`), the
    model's registry entry, and the entries of the other models its config or the `SCTC_*` environment names
    (judges); for an observed entry (`observe:`) also the epoch tag of its latest observed served version, so a
    partition answered under another served version is not unchanged (the digest of an entry never observed is
    the one it always was)."""
    environ = os.environ if environ is None else environ
    named = set(_strings(op_config)) | {value for name, value in environ.items()
                                        if name.startswith("SCTC_") and name not in _NOT_DATA}
    used = sorted({model} | {key for key in named if key in entries})
    data: dict[str, Any] = {"settings": settings, "entries": {key: _entry_data(entries.get(key)) for key in used}}
    if served_epoch:
        data["served_epoch"] = served_epoch
    payload = json.dumps(data, sort_keys=True, default=str)
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


def error_counts(materialization: Any) -> tuple[int, int, int]:
    """(answers, errors, published errors) of a materialization whose metadata counts its `outcomes` (answers,
    judgements); a replay's published errors (`published_errors`) are data, the other errors failed model calls."""
    outcomes = materialization.metadata.get("outcomes")
    counts = outcomes.value if outcomes is not None else None
    if not isinstance(counts, dict):
        return 0, 0, 0
    published = materialization.metadata.get("published_errors")
    replayed = published.value if published is not None and isinstance(published.value, int) else 0
    return sum(counts.values()), int(counts.get("error", 0) or 0), replayed


def unpublished_errors(materialization: Any) -> int:
    """The model calls of a materialization that ended in an error (its published errors left out)."""
    _, errors, replayed = error_counts(materialization)
    return max(errors - replayed, 0)


class Staleness:
    """Why each asset (partition) must run again, for one stage after another of a run: one Dagster stale-status
    resolver with its cached queries, the runs of the latest materializations fetched once each."""

    def __init__(self, defs: dg.Definitions, instance: dg.DagsterInstance):
        self._defs = defs
        self._instance = instance
        graph = self._graph = defs.resolve_asset_graph()
        view = AssetGraphView(temporal_context=TemporalContext(effective_dt=get_current_datetime(), last_event_id=None),
                              instance=instance, asset_graph=graph)
        self._resolver = CachingStaleStatusResolver(instance=instance, asset_graph=graph, loading_context=view)
        self._runs: dict[str, Any] = {}

    def _latest_record(self, key: dg.AssetKey, partition_key: str | None) -> Any:
        return self._resolver.instance_queryer.get_latest_materialization_or_observation_record(
            AssetKeyPartitionKey(key, partition_key))

    def _run(self, run_id: str) -> Any:
        if run_id not in self._runs:
            self._runs[run_id] = self._instance.get_run_by_id(run_id)
        return self._runs[run_id]

    def _new_unobserved_source(self, cause: Any) -> bool:
        """Whether a stale cause is only a dependency on a source asset that the last materialization predates
        (Dagster: "has a new dependency on …") and that was never observed for the partition, as `served_model` of a
        model without `observe:` in an instance made before it existed: nothing came through it, so the asset is what
        this version would make. Once observed, a changed data version makes the asset stale as it should."""
        dependency = getattr(cause, "dependency", None)
        return (dependency is not None and str(cause.reason).startswith("has a new dependency on")
                and not self._graph.get(dependency.asset_key).is_materializable
                and self._latest_record(dependency.asset_key, dependency.partition_key) is None)

    def reasons(self, names: Sequence[str], op_config: Mapping[str, Any], settings: str, *,
                partition_key: str | None = None,
                stored: Callable[[dg.AssetKey], bool] = lambda key: True) -> dict[str, str]:
        """Asset name → why it must run again, for every asset of `names` (at `partition_key`) that is not
        unchanged (absent: unchanged). `settings`: the digest its last materializing run must carry."""
        reasons: dict[str, str] = {}
        for name in names:
            key = dg.AssetKey(name)
            assets_def = self._defs.resolve_assets_def(key)
            if assets_def.code_versions_by_key.get(key) is None:
                reasons[name] = "no code version"
                continue
            status = self._resolver.get_status(key, partition_key)
            if status != StaleStatus.FRESH:
                causes = [cause for cause in self._resolver.get_stale_causes(key, partition_key)
                          if not self._new_unobserved_source(cause)]
                if status == StaleStatus.MISSING or causes or status != StaleStatus.STALE:
                    reasons[name] = ("never materialized" if status == StaleStatus.MISSING else
                                     "; ".join(cause.reason for cause in causes) or "stale")
                    continue
            if not stored(key):
                reasons[name] = "its stored table is gone"
                continue
            record = self._latest_record(key, partition_key)
            run = self._run(record.run_id) if record is not None and record.asset_materialization else None
            errors = unpublished_errors(record.asset_materialization) if run is not None else 0
            if run is None:
                reasons[name] = "no run recorded for its last materialization"
            elif errors:
                reasons[name] = f"{errors} model call(s) ended in an error when it was last materialized (retried)"
            elif (run.tags.get(SETTINGS_TAG) or run.tags.get(LEGACY_SETTINGS_TAG)) != settings:
                reasons[name] = "data settings changed (or last materialized outside sctc run)"
            elif ((run.run_config.get("ops") or {}).get(assets_def.node_def.name, {}).get("config")
                  != op_config.get(name)):
                reasons[name] = "config changed"
        return reasons

    def check_failures(self, names: Sequence[str], partition_key: str) -> list[tuple[dg.AssetCheckSeverity, str]]:
        """(severity, message) of each check on the partitions of `names` left unchanged whose latest evaluation did
        not pass (they are not run again); one query of the instance's index for all of them."""
        wanted = {dg.AssetKey(name) for name in names}
        keys = [check_key for checks_def in self._defs.asset_checks or [] for check_key in checks_def.check_keys
                if check_key.asset_key in wanted]
        if not keys:
            return []
        records = self._instance.event_log_storage.get_latest_asset_check_execution_by_key(
            keys, partition_filter=PartitionKeyFilter(key=partition_key))
        evaluations = []
        for check_key, record in sorted(records.items(), key=lambda item: item[0].to_user_string()):
            event = record.event.dagster_event if record.event is not None else None
            evaluations.append((check_key, event.event_specific_data if event is not None else None))
        # A check without partitions of its own: its evaluation in the run that last materialized the partition.
        for check_key in sorted(set(keys) - set(records), key=lambda key: key.to_user_string()):
            record = self._latest_record(check_key.asset_key, partition_key)
            if record is None:
                continue
            for entry in self._instance.all_logs(record.run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION):
                evaluation = entry.dagster_event.event_specific_data
                if evaluation.asset_check_key == check_key:
                    evaluations.append((check_key, evaluation))
        failed = []
        for check_key, evaluation in evaluations:
            if isinstance(evaluation, dg.AssetCheckEvaluation) and not evaluation.passed:
                details = {name: value.value for name, value in evaluation.metadata.items()}
                failed.append((evaluation.severity,
                               f"asset check {check_key.name} on {check_key.asset_key.to_user_string()} {partition_key} "
                               f"did not pass at its last evaluation ({details})"))
        return failed


def unchanged_inputs(defs: dg.Definitions, names: Sequence[str], instance: dg.DagsterInstance,
                     op_config: Mapping[str, Any], settings: str,
                     stored: Callable[[dg.AssetKey], bool] = lambda key: True) -> dict[str, str]:
    """Input name → why it must run again, for every input in `names` that is not unchanged (absent: unchanged).

    `stored(key)` says whether the asset's stored value still exists (a storage folder wiped under the instance)."""
    return Staleness(defs, instance).reasons(names, op_config, settings, stored=stored)


def latest_check_failures(defs: dg.Definitions, names: Sequence[str],
                          instance: dg.DagsterInstance) -> list[tuple[dg.AssetCheckSeverity, str]]:
    """(severity, message) of each check on `names` whose latest evaluation did not pass (they are not run
    again)."""
    keys = [check_key for checks_def in defs.asset_checks or [] for check_key in checks_def.check_keys
            if check_key.asset_key.to_user_string() in names]
    failed = []
    for check_key, record in instance.event_log_storage.get_latest_asset_check_execution_by_key(keys).items():
        evaluation = record.event.dagster_event.event_specific_data if record.event and record.event.dagster_event else None
        if isinstance(evaluation, dg.AssetCheckEvaluation) and not evaluation.passed:
            details = {key: value.value for key, value in evaluation.metadata.items()}
            failed.append((evaluation.severity, f"asset check {check_key.name} on {check_key.asset_key.to_user_string()}"
                                                f" did not pass at its last evaluation ({details})"))
    return failed
