"""Materialize benchmarks in-process into a persistent Dagster instance (what `sctc run` does).

The stages mirror the partitioning: model-independent inputs, then each model × lang partition, then each model,
then the cross-model tables. Every stage leaves out what is unchanged since its last materialization (Dagster's
staleness: code version, upstream data versions; and the op config, data settings and registry entries, see
`sctc_assets.running.unchanged`) unless something it depends on runs again in this run; a stage with nothing left
launches no run. A partition whose last answers include model-call errors always runs again (the calls are
retried). Each stage is one run of the
benchmark's named job (`term_model_lang`, …; the UI lists them under that job, tagged `sctc/benchmark`,
`sctc/model`, `sctc/lang`) through the same assets, checks, resources, IO manager and response cache as a
backfill launched from the Dagster UI, so both paths share results. Runs execute in a worker thread, so Ctrl-C
reaches `sctc run` (see `sctc_assets.running.signals`) instead of failing the step under way. The partitions of API
models behind different endpoints run concurrently, one thread per model and a bound per endpoint; local models
and replays run one after another (see `sctc_assets.running.concurrent`).
"""

from __future__ import annotations

import hashlib
import io
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import dagster as dg
import pandas as pd

from sctc_assets.benchmarks.spec import BenchmarkSpec
from sctc_assets.lib.missing_answers import shown_message
from sctc_assets.lib.table_store import StorePath, change_marker, is_local, location, write_bytes
from sctc_assets.lib.interrupt import stop_reason
from sctc_assets.assets.partitions import MODELS_PARTITION_NAME
from sctc_assets.resources.io_manager import ParquetIOManager, concat_tables, forget_reads, read_table
from sctc_assets.resources.served_epoch import latest_epoch
from sctc_assets.running.concurrent import Slot, endpoint_of, run_models, share_yaml_log_handlers
from sctc_assets.running.dagster_internals import default_job_io_manager, execute_in_process_reusing
from sctc_assets.running.instance import process_tags
from sctc_assets.running.logs import LOGGER_KEY, RunLog
from sctc_assets.running.signals import in_worker_thread
from sctc_assets.running.unchanged import (SETTINGS_TAG, Staleness, error_counts, latest_check_failures,
                                           model_settings_digest, observe_sources, settings_digest, unchanged_inputs,
                                           unpublished_errors)

# The backend's exception when it stopped asking (Ctrl-C, budget) after storing what had arrived (contract 3).
HALTED_ERROR = "GenerationHalted"


@dataclass
class StageFailure:
    stage: str
    partition: str | None
    message: str
    model: str | None = None  # the model whose stage failed; None for model-independent stages and checks
    wrote: bool = False  # the stage still wrote its tables (every call failed: the error rows are stored)
    halted: bool = False  # the backend stopped asking (Ctrl-C, budget) after storing what had arrived


@dataclass
class BenchmarkWork:
    """One benchmark of a `sctc run`: its spec, the models it serves, the run's options."""

    spec: BenchmarkSpec
    models: list[str]
    options: Mapping[str, Any]


@dataclass
class RunReport:
    failures: list[StageFailure] = field(default_factory=list)
    written: dict[str, Path] = field(default_factory=dict)
    inputs_failed: bool = False  # nothing downstream ran: the tables on disk are all from earlier runs
    interrupted: str | None = None  # why the run stopped before its last stage (Ctrl-C, SIGTERM)
    run_ids: list[str] = field(default_factory=list)  # the Dagster runs this report's stages launched
    # (asset, model or None, lang or None) of every partition materialized by this run
    materialized: set[tuple[str, str | None, str | None]] = field(default_factory=set)
    skipped_inputs: list[str] = field(default_factory=list)  # unchanged since their last materialization
    # (asset, model, lang or None) of every model partition left as it was: unchanged since its last materialization
    unchanged: set[tuple[str, str | None, str | None]] = field(default_factory=set)
    # the asset keys the model stages selected to run (what the cross-model stage compares against)
    ran: set[dg.AssetKey] = field(default_factory=set)
    # (asset, partition) → its model calls that ended in an error after retries in this run: no answer stored, a
    # rerun asks them again (a replay's published errors are data, not counted)
    call_errors: dict[tuple[str, str | None], int] = field(default_factory=dict)
    # (asset, partition) → the message of its first such call (`first_error` in the metadata; keys redacted)
    first_errors: dict[tuple[str, str | None], str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failures and self.interrupted is None

    def merge(self, other: "RunReport") -> None:
        """Add what `other` (some stages of the same benchmark, run on another thread or process) recorded."""
        self.failures += other.failures
        self.run_ids += other.run_ids
        self.materialized |= other.materialized
        self.unchanged |= other.unchanged
        self.ran |= other.ran
        self.call_errors.update(other.call_errors)
        self.first_errors.update(other.first_errors)
        self.skipped_inputs += other.skipped_inputs
        self.inputs_failed = self.inputs_failed or other.inputs_failed
        self.interrupted = self.interrupted or other.interrupted

    @property
    def failed_models(self) -> list[str]:
        return list(dict.fromkeys(failure.model for failure in self.failures if failure.model is not None))

    @property
    def stale_models(self) -> list[str]:
        """Failed models whose stages wrote nothing this run."""
        return list(dict.fromkeys(failure.model for failure in self.failures
                                  if failure.model is not None and not failure.wrote))

    def earlier_rows(self, spec: BenchmarkSpec, tables: Mapping[str, pd.DataFrame]) -> dict[str, list[str]]:
        """Failed model → the exported tables whose rows of it this run did not write (they are an earlier run's).

        A partition counts as this run's when this run materialized it or left it unchanged; a cross-model table
        when this run materialized it from none but this run's partitions of the model.
        """
        found: dict[str, list[str]] = {}
        for model in self.failed_models:
            earlier = []
            for name in spec.per_model_lang + spec.per_model:
                frame = tables.get(name)
                if frame is None or "model" not in frame.columns:
                    continue
                rows = frame[frame["model"] == model]
                if rows.empty:
                    continue
                current = self.materialized | self.unchanged  # unchanged partitions are as this run would write
                if name in spec.per_model:
                    if (name, model, None) not in current:
                        earlier.append(name)
                    continue
                langs = rows[spec.dimension].dropna().unique() if spec.dimension in rows.columns else spec.langs
                if any((name, model, str(lang)) not in current for lang in langs):
                    earlier.append(name)
            for name in spec.cross_model:
                frame = tables.get(name)
                if frame is None or "model" not in frame.columns or not (frame["model"] == model).any():
                    continue
                if earlier or (name, None, None) not in self.materialized | self.unchanged:
                    earlier.append(name)
            if earlier:
                found[model] = earlier
        return found


def _unpassed_checks(result: dg.ExecuteInProcessResult, severity: dg.AssetCheckSeverity) -> list[str]:
    """Asset checks that did not pass at this severity: they fail no step, so `result.success` misses them."""
    failed = []
    for evaluation in result.get_asset_check_evaluations():
        if not evaluation.passed and evaluation.severity == severity:
            details = {key: value.value for key, value in evaluation.metadata.items()}
            failed.append(f"asset check {evaluation.check_name} on {evaluation.asset_key.to_user_string()} did not"
                          f" pass ({details})")
    return failed


def _call_errors(result: dg.ExecuteInProcessResult) -> dict[tuple[str, str | None], int]:
    """(asset, partition) → the model calls of this run's materializations that ended in an error."""
    found = {}
    for event in result.get_asset_materialization_events():
        materialization = event.event_specific_data.materialization
        errors = unpublished_errors(materialization)
        if errors:
            found[(materialization.asset_key.to_user_string(), materialization.partition)] = errors
    return found


def _first_errors(result: dg.ExecuteInProcessResult) -> dict[tuple[str, str | None], str]:
    """(asset, partition) → the first error message of the materializations with failed model calls."""
    found = {}
    for event in result.get_asset_materialization_events():
        materialization = event.event_specific_data.materialization
        first = materialization.metadata.get("first_error")
        if unpublished_errors(materialization) and first is not None:
            found[(materialization.asset_key.to_user_string(), materialization.partition)] = \
                shown_message(first.value)
    return found


def _all_calls_failed(result: dg.ExecuteInProcessResult) -> list[str]:
    """Materializations whose every model call ended as an `error` (endpoint down, key refused after retries…).

    The error rows are stored, as every outcome is, but a partition of nothing else has no answers and no result
    (no benchmark scores an error): the run fails, naming the first error. A replay's errors are published data
    (metadata `published_errors`, e.g. the API errors of a Pro-study result file), scored as its code scores them:
    a partition of only those is a result, not a failure.
    """
    failed = []
    for event in result.get_asset_materialization_events():
        materialization = event.event_specific_data.materialization
        calls, errors, replayed = error_counts(materialization)
        if calls and errors == calls and replayed < errors:
            first = materialization.metadata.get("first_error")
            failed.append(f"{materialization.asset_key.to_user_string()}: no answers: all {calls} model calls ended "
                          f"in an error (the first: {shown_message(first.value if first is not None else None)}; "
                          "every error row and its message are in the table); no score, rate, verdict or test")
    return failed


def _step_errors(result: dg.ExecuteInProcessResult) -> list[tuple[str, Any]]:
    """(step key, the error the asset raised) of each failed step, unwrapped from Dagster's step execution error."""
    errors = []
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data and event.step_failure_data.error:
            error = event.step_failure_data.error
            while error.cause is not None and (error.cls_name or "").startswith("Dagster"):
                error = error.cause
            errors.append((event.step_key, error))
    return errors


def _one_line(error: Any) -> str:
    """The error's last line, its class without the module path (`UpstreamError: …`, not `sctc_assets.lib….`)."""
    lines = (error.message or "").strip().splitlines()
    line = lines[-1] if lines else str(error.cls_name or "error")
    name, sep, rest = line.partition(": ")
    if sep and error.cls_name and name.endswith(f".{error.cls_name}"):
        line = f"{error.cls_name}: {rest}"
    return line


def _failure_message(result: dg.ExecuteInProcessResult) -> str:
    """Each failed step with the error the asset raised, in one line."""
    return "; ".join(f"{step}: {_one_line(error)}" for step, error in _step_errors(result)) or "run failed"


def _halted(result: dg.ExecuteInProcessResult) -> bool:
    return any(error.cls_name == HALTED_ERROR for _, error in _step_errors(result))


class Runner:
    def __init__(self, defs: dg.Definitions, instance: dg.DagsterInstance, resources: Mapping[str, Any],
                 log: Callable[[str], None] = print, run_log: RunLog | None = None):
        self.defs = defs
        self.instance = instance
        share_yaml_log_handlers(instance)  # stages of several models start runs at once
        self.resources = dict(resources)
        self.log = log
        self.run_log = run_log or RunLog(None, log)
        self._graph = defs.resolve_asset_graph()
        self._jobs: dict[tuple[str, tuple[str, ...]], dg.JobDefinition] = {}
        self._ephemeral_jobs: dict = {}  # what Dagster builds to run a job's selection, kept for its next run
        self._jobs_lock = threading.Lock()
        self._staleness_lock = threading.Lock()
        self._resolvers: dict[str, Staleness] = {}
        self._settings = settings_digest()
        self._settings_without_registry = settings_digest(registry=False)
        self._entries: Mapping[str, Any] = {}
        self._tags = {"sctc/launched_by": "sctc run", SETTINGS_TAG: self._settings, **process_tags()}

    def after_fork(self) -> None:
        """In a forked worker process: its own instance (connections) from the same instance ref, runs that name this
        process (so a killed worker's runs are marked failed later), its own staleness resolvers. Every ancestor's
        instance stays referenced (a process forked from a worker inherits two): closing a copied SQLite connection
        would drop this process's locks on the file."""
        self._inherited_instances = [*getattr(self, "_inherited_instances", ()), self.instance]
        self.instance = dg.DagsterInstance.from_ref(self.instance.get_ref())
        share_yaml_log_handlers(self.instance)
        self._tags.update(process_tags())
        self._resolvers = {}

    def staleness(self, benchmark: str) -> Staleness:
        """This process's resolver for the model stages of `benchmark`, made on first use (after its inputs)."""
        with self._staleness_lock:
            if benchmark not in self._resolvers:
                self._resolvers[benchmark] = Staleness(self.defs, self.instance)
            return self._resolvers[benchmark]

    def backend_of(self, model: str) -> str | None:
        """The registry backend of `model` (after `prepare_run`); None without a registry entry."""
        return getattr(self._entries.get(model), "backend", None)

    def ensure_model_partitions(self, models: Sequence[str]) -> None:
        known = set(self.instance.get_dynamic_partitions(MODELS_PARTITION_NAME))
        new = [model for model in models if model not in known]
        if new:
            self.instance.add_dynamic_partitions(MODELS_PARTITION_NAME, new)

    def _job(self, name: str, selection: Sequence[str]) -> dg.JobDefinition:
        """The named job with the run log attached; where the definitions lack it, Dagster's implicit asset job."""
        cache_key = (name, tuple(selection))
        with self._jobs_lock:  # models' threads ask for jobs at once
            if cache_key not in self._jobs:
                try:
                    job = self.defs.resolve_job_def(name)
                except dg.DagsterInvariantViolationError:
                    job = self.defs.resolve_implicit_job_def_def_for_assets([dg.AssetKey(n) for n in selection])
                self._jobs[cache_key] = job.with_logger_defs({LOGGER_KEY: self.run_log.logger_def})
            return self._jobs[cache_key]

    def _execute(self, job: dg.JobDefinition, selection: Sequence[str], *, partition_key: Any = None,
                 run_config: dict | None = None, tags: Mapping[str, str]) -> dg.ExecuteInProcessResult:
        run_config = {**(run_config or {}), "loggers": {LOGGER_KEY: {}}}
        # Resources the definitions bind stay theirs (Dagster refuses a second object for the same key).
        bound = {key for key, resource in job.resource_defs.items() if resource is not default_job_io_manager}
        resources = {key: value for key, value in self.resources.items() if key not in bound}
        return in_worker_thread(lambda: execute_in_process_reusing(
            job, self._ephemeral_jobs, run_config=run_config, instance=self.instance, partition_key=partition_key,
            asset_selection=[dg.AssetKey(name) for name in selection], resources=resources,
            tags={**self._tags, **tags}))

    def _stage(self, report: RunReport, spec: BenchmarkSpec, stage: str, label: str, selection: Sequence[str],
               config: Mapping[str, Any], *, model: str | None = None, lang: str | None = None,
               partition_key: Any = None, settings: str | None = None) -> bool:
        if not selection:
            return True
        if stop_reason() is not None:
            report.interrupted = report.interrupted or stop_reason()
            return False
        job = self._job(spec.job_name(stage), selection)
        self.log(f"[{label}] {job.name}: {', '.join(selection)}")
        tags = spec.run_tags(stage, model=model, key=lang)
        if settings is not None:
            tags[SETTINGS_TAG] = settings
        run_config = {"ops": {name: {"config": config[name]} for name in selection if name in config}}
        try:
            result = self._execute(job, selection, partition_key=partition_key, run_config=run_config, tags=tags)
        finally:
            # A run that wrote no model-independent table leaves those it read for the next model's run.
            forget_reads(keep_lasting=all(self._graph.get(dg.AssetKey(name)).partitions_def is not None
                                          for name in selection))
        report.run_ids.append(result.run_id)
        for event in result.get_asset_materialization_events():
            report.materialized.add((event.asset_key.to_user_string(), model, lang))
        partition = str(partition_key) if partition_key is not None else None
        if not result.success:
            message = _failure_message(result)
            halted = _halted(result)
            report.failures.append(StageFailure(label, partition, message, model, halted=halted))
            self.log(f"[{label}] {'STOPPED' if halted else 'FAILED'}: {message}")
        report.call_errors.update(_call_errors(result))
        report.first_errors.update(_first_errors(result))
        for message in _all_calls_failed(result):
            report.failures.append(StageFailure(label, partition, message, model, wrote=True))
            self.log(f"[{label}] FAILED: {message}")
        for message in _unpassed_checks(result, dg.AssetCheckSeverity.ERROR):
            report.failures.append(StageFailure(label, partition, message))
            self.log(f"[{label}] CHECK FAILED: {message}")
        for message in _unpassed_checks(result, dg.AssetCheckSeverity.WARN):
            self.log(f"[{label}] check warning: {message}")
        if stop_reason() is not None:
            report.interrupted = stop_reason()
        return result.success

    def _inputs(self, report: RunReport, spec: BenchmarkSpec, config: Mapping[str, Any],
                names: Sequence[str] | None = None, label: str | None = None, observe: bool = True,
                isolate: Callable[[Callable[[], Any]], Any] | None = None) -> bool:
        """Materialize the inputs of `names` (default all the spec's) that changed, and what depends on them among
        them; say which did not. With `observe`, the observable sources upstream of all the spec's inputs are
        observed first (the second group of `input_groups` leaves that to the first)."""
        names = list(spec.inputs if names is None else names)
        label = label or f"{spec.name}: inputs"
        if not names:
            return True
        if observe:
            observed = observe_sources(self.defs, [dg.AssetKey(name) for name in spec.inputs], self.instance,
                                       self.resources, self._tags)
            if observed is not None:
                report.run_ids.append(observed.run_id)
        reasons = unchanged_inputs(self.defs, names, self.instance, config, self._settings, self._stored)
        changed = {dg.AssetKey(name) for name in reasons}
        for key in list(changed):  # an input computed from a changed one is recomputed with it
            changed |= self._descendants(key)
        to_run = [name for name in names if dg.AssetKey(name) in changed]
        unchanged = [name for name in names if name not in to_run]
        self.run_log.write("\n".join(f"[{label}] {name} runs again: {reason}" for name, reason in reasons.items()))
        if unchanged:
            report.skipped_inputs += unchanged
            self.log(f"[{label}] unchanged since their last materialization (code version, upstream data, settings),"
                     f" not materialized again: {', '.join(unchanged)}")
            self._report_checks(report, label, latest_check_failures(self.defs, unchanged, self.instance))
        if isolate is None or not to_run:
            return self._stage(report, spec, "inputs", label, to_run, config)

        def stage() -> tuple[bool, RunReport]:
            staged = RunReport()
            return self._stage(staged, spec, "inputs", label, to_run, config), staged

        ok, staged = isolate(stage)
        report.merge(staged)
        return ok

    def input_groups(self, spec: BenchmarkSpec) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(the inputs that the model stages read, directly or through other inputs; the others, which can be
        computed beside the models: Table 37's tokenizers, say). One group, (all, ()), where either would be
        empty. No input of the first group depends on one of the second: it would be read by the models too."""
        model_assets = [dg.AssetKey(name) for name in spec.per_model_lang + spec.per_model]
        read = set().union(*(self._graph.get_ancestor_asset_keys(key) for key in model_assets))
        first = tuple(name for name in spec.inputs if dg.AssetKey(name) in read)
        second = tuple(name for name in spec.inputs if name not in first)
        return (first, second) if first and second else (spec.inputs, ())

    def _report_checks(self, report: RunReport, label: str, failures: Sequence[tuple[dg.AssetCheckSeverity, str]],
                       partition: str | None = None, model: str | None = None) -> None:
        """The checks that did not pass at the last evaluation of what this run left unchanged: an error fails the
        run as a failed check of this run would, a warning is printed."""
        for severity, message in failures:
            if severity == dg.AssetCheckSeverity.ERROR:
                report.failures.append(StageFailure(label, partition, message, model))
                self.log(f"[{label}] CHECK FAILED: {message}")
            elif severity == dg.AssetCheckSeverity.WARN:
                self.log(f"[{label}] check warning: {message}")

    def _stored(self, key: dg.AssetKey, partition_key: Any = None) -> bool:
        """Whether the project's Parquet file of an asset (partition) exists (True for other IO managers)."""
        assets_def = self.defs.resolve_assets_def(key)
        output_name = assets_def.get_output_name_for_asset_key(key)
        io_key = assets_def.node_def.output_def_named(output_name).io_manager_key
        io_manager = self.resources.get(io_key) or (self.defs.resources or {}).get(io_key)
        if not isinstance(io_manager, ParquetIOManager):
            return True
        if partition_key is None:
            return io_manager.path_for(key).exists()
        return io_manager.path_for(key, assets_def.partitions_def, str(partition_key)).exists()

    def _registry_entries(self) -> Mapping[str, Any]:
        """The registry's entries, for the per-model settings digest; none when the resources have no registry."""
        registry = self.resources.get("models") or (self.defs.resources or {}).get("models")
        try:
            return registry.entries() if registry is not None and hasattr(registry, "entries") else {}
        except Exception:  # a broken registry fails the stage that reads it, with its own message
            return {}

    def _to_run(self, report: RunReport, staleness: Staleness, spec: BenchmarkSpec, label: str,
                names: Sequence[str], config: Mapping[str, Any], settings: str, ran: set[dg.AssetKey], *,
                model: str | None = None, lang: str | None = None, partition_key: Any = None) -> list[str]:
        """The assets of `names` to materialize (at `partition_key`): those not unchanged, and those downstream of
        one that runs again (in this stage, or in an earlier stage of this run: `ran`). The others are left as
        they are; the checks that failed when they were last materialized are reported again."""
        pk = str(partition_key) if partition_key is not None else None
        if not spec.skip_unchanged:
            return list(names)
        reasons = staleness.reasons(names, config, settings, partition_key=pk,
                                    stored=lambda key: self._stored(key, partition_key))
        changed = {dg.AssetKey(name) for name in reasons} | set(ran)
        grew = True
        while grew:  # in any order of `names`: what depends on an asset that runs, runs
            grew = False
            for name in names:
                key = dg.AssetKey(name)
                if key not in changed and self._graph.get_ancestor_asset_keys(key) & changed:
                    reasons[name] = "an asset it depends on runs again"
                    changed.add(key)
                    grew = True
        to_run = [name for name in names if name in reasons]
        unchanged = [name for name in names if name not in reasons]
        self.run_log.write("\n".join(f"[{label}] {name} runs again: {reason}" for name, reason in reasons.items()))
        for name in unchanged:
            report.unchanged.add((name, model, lang))
        if unchanged and pk is not None:
            self._report_checks(report, label, staleness.check_failures(unchanged, pk), pk, model)
        if unchanged and pk is None:
            self._report_checks(report, label, latest_check_failures(self.defs, unchanged, self.instance))
        return to_run

    def _model_settings(self, model: str, config: Mapping[str, Any]) -> str:
        entry = self._entries.get(model)
        observed = entry is not None and getattr(entry, "observe_hours", None) is not None
        return model_settings_digest(self._settings_without_registry, self._entries, model, config,
                                     served_epoch=latest_epoch(self.instance, model) if observed else None)

    def _say_unchanged(self, report: RunReport, spec: BenchmarkSpec, model: str | None) -> None:
        """One line for a model (or the cross-model tables): what this run left as it was."""
        names = [name for name in spec.per_model_lang + spec.per_model + spec.cross_model
                 if any(found[0] == name and found[1] == model for found in report.unchanged)]
        if not names:
            return
        parts = []
        for name in names:
            langs = [lang for lang in spec.langs if (name, model, lang) in report.unchanged]
            parts.append(f"{name} ({', '.join(langs)})" if langs else name)
        label = f"{spec.name}: {model}" if model is not None else f"{spec.name}: across models"
        self.log(f"[{label}] unchanged since their last materialization, not materialized again: {', '.join(parts)}")

    def _descendants(self, key: dg.AssetKey) -> set[dg.AssetKey]:
        found, todo = set(), [key]
        while todo:
            for child in self._graph.get(todo.pop()).child_keys:
                if child not in found:
                    found.add(child)
                    todo.append(child)
        return found

    def run_model(self, spec: BenchmarkSpec, model: str, config: Mapping[str, Any], slot: Slot,
                  staleness: Staleness) -> RunReport:
        """One model's partitions, then its per-model stage, each leaving out what is unchanged; `slot()` around
        each stage that asks the model. The report's `ran` names the assets its stages selected."""
        report = RunReport()
        model_ok = True
        settings = self._model_settings(model, config)
        model_ran: set[dg.AssetKey] = set()
        for lang in spec.langs:
            key = dg.MultiPartitionKey({"model": model, spec.dimension: lang})
            label = f"{spec.name}: {model}/{lang}"
            with self._staleness_lock:  # one resolver and its caches, shared by the models' threads
                selection = self._to_run(report, staleness, spec, label, spec.per_model_lang, config, settings, set(),
                                         model=model, lang=lang, partition_key=key)
            model_ran |= {dg.AssetKey(name) for name in selection}
            with slot():
                model_ok &= self._stage(report, spec, "per_model_lang", label, selection, config, model=model,
                                        lang=lang, partition_key=key, settings=settings)
        if model_ok:
            label = f"{spec.name}: {model}"
            with self._staleness_lock:
                selection = self._to_run(report, staleness, spec, label, spec.per_model, config, settings, model_ran,
                                         model=model, partition_key=model if spec.per_model else None)
            model_ran |= {dg.AssetKey(name) for name in selection}
            self._stage(report, spec, "per_model", label, selection, config, model=model, partition_key=model,
                        settings=settings)
        report.ran = model_ran
        self._say_unchanged(report, spec, model)
        return report

    def endpoints(self, models: Sequence[str]) -> dict[str, str | None]:
        """Model → the endpoint its calls go to (None: local, replay, or no registry entry to tell), from the
        entries `run` read for the settings digest."""
        return {model: endpoint_of(self._entries[model]) if model in self._entries else None for model in models}

    def run_inputs(self, spec: BenchmarkSpec, options: Mapping[str, Any],
                   names: Sequence[str] | None = None) -> tuple[RunReport, bool]:
        """The inputs stage (of `names`, default all the spec's inputs), then the partitioned inputs; (report,
        whether the model stages may go on). The report says `inputs_failed` when the inputs stage failed
        (nothing downstream may run)."""
        report = RunReport()
        config = spec.config(options)
        if not self._inputs(report, spec, config, names):
            if report.interrupted is None:
                report.inputs_failed = True
            return report, False
        for selection, keys in spec.partitioned_inputs(options):
            for key in keys:
                self._stage(report, spec, "partitioned_inputs", f"{spec.name}: {key}", selection, config,
                            partition_key=key)
        return report, True

    def run_side_inputs(self, spec: BenchmarkSpec, options: Mapping[str, Any], names: Sequence[str],
                        isolate: Callable[[Callable[[], Any]], Any] | None = None) -> RunReport:
        """The second group of `input_groups`, beside the models: its failure is a failed stage, not failed inputs
        (the models and the cross-model tables do not read it). `isolate(stage)` runs the stage, when something is
        left to materialize, and returns what `stage()` returns (in a forked process, say)."""
        report = RunReport()
        self._inputs(report, spec, spec.config(options), names, f"{spec.name}: inputs beside the models",
                     observe=False, isolate=isolate)
        return report

    def run_cross(self, spec: BenchmarkSpec, models: Sequence[str], config: Mapping[str, Any],
                  ran: set[dg.AssetKey], staleness: Staleness) -> RunReport:
        """The cross-model stage, after every model's stages (`ran`: the assets they selected)."""
        report = RunReport()
        # Cross-model tables need some model's results, unless the benchmark has no per-model stage at all.
        if models or not (spec.per_model_lang or spec.per_model):
            label = f"{spec.name}: across models"
            selection = self._to_run(report, staleness, spec, label, spec.cross_model, config, self._settings, ran)
            self._stage(report, spec, "cross_model", label, selection, config)
            self._say_unchanged(report, spec, None)
        if stop_reason() is not None:
            report.interrupted = stop_reason()
        return report

    def prepare_run(self, works: Sequence[BenchmarkWork]) -> None:
        """What every stage of these benchmarks reads from this process: the models' partitions, the registry
        entries of the settings digests."""
        self.ensure_model_partitions(list(dict.fromkeys(model for work in works for model in work.models)))
        self._entries = self._registry_entries()

    def run(self, spec: BenchmarkSpec, models: Sequence[str], options: Mapping[str, Any],
            report: RunReport | None = None) -> RunReport:
        """One benchmark's stages in this process: inputs, the models (API models behind different endpoints
        concurrently, `sctc_assets.running.concurrent`), then the cross-model tables; the stages these options
        leave out (`BenchmarkSpec.for_run`) are not run, as in `sctc run`."""
        report = report or RunReport()
        spec = spec.for_run(options)
        self.prepare_run([BenchmarkWork(spec, list(models), options)])
        config = spec.config(options)
        inputs, go_on = self.run_inputs(spec, options)
        report.merge(inputs)
        if not go_on:
            return report
        # One resolver for every stage after the inputs: their new data versions are what the partitions compare.
        staleness = Staleness(self.defs, self.instance)
        for part in run_models(models, self.endpoints(models),
                               lambda model, slot: self.run_model(spec, model, config, slot, staleness)):
            report.merge(part)
        report.merge(self.run_cross(spec, models, config, set(report.ran), staleness))
        return report


EXPORT_MANIFEST = ".sctc-export.json"


def _file_state(path: StorePath) -> list:
    """Size and time of a local file; what changes when a stored object is replaced (size, ETag...) otherwise."""
    if is_local(path):
        found = path.stat()
        return [found.st_size, found.st_mtime_ns]
    return list((change_marker(path) or ("", None, None))[1:])


def _file_digest(path: StorePath) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def export_tables(spec: BenchmarkSpec, models: Sequence[str], io_manager: ParquetIOManager,
                  out_dir: str | StorePath, defs: dg.Definitions,
                  names: Sequence[str] | None = None) -> dict[str, StorePath]:
    """Write each table asset (of `names`, default all the spec's) as `<out_dir>/<asset>.parquet`; partitioned
    tables keep the chosen models only. `out_dir` is a folder or an fsspec URL, like the table store; each file
    is written whole or not at all.

    An export already current stays as it is (its bytes and modification time): a table whose stored files (the
    same ones, same sizes and times) were exported to the same, untouched file before is not read again, and one
    whose stored files were written again with the same content (a stage run again) is read and compared by the
    content digest of the file it would write, which replaces the export only when it differs.
    `<out_dir>/.sctc-export.json` records what each file was written from and its digest."""
    out_dir = location(out_dir)
    if is_local(out_dir):
        out_dir.mkdir(parents=True, exist_ok=True)
    manifest_path = out_dir / EXPORT_MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError):
        manifest = {}
    written = {}
    for name in spec.tables if names is None else names:
        assets_def = defs.get_assets_def(name)
        partitions_def = assets_def.partitions_def
        if partitions_def is None:
            paths = [io_manager.path_for(dg.AssetKey(name))]
        else:
            paths = [io_manager.path_for(dg.AssetKey(name), partitions_def, str(key))
                     for key in _partition_keys(partitions_def, spec, models)]
        paths = [path for path in paths if path.exists()]
        if not paths:
            continue
        target = out_dir / f"{name}.parquet"
        sources = [[str(path), *_file_state(path)] for path in paths]
        recorded = manifest.get(name) or {}
        current = _file_state(target) if target.exists() else None
        if current is not None and recorded.get("sources") == sources and recorded.get("target") == current:
            written[name] = target
            continue
        # An empty table (no judge configured, nothing to review) is written too, with its columns, so an older
        # file of the same name in --out never passes for this run's result; partitions join as the IO manager
        # joins them for a cross-model asset.
        buffer = io.BytesIO()
        concat_tables([read_table(path) for path in paths]).to_parquet(buffer, index=False)
        content = buffer.getvalue()
        digest = hashlib.sha256(content).hexdigest()
        existing = None if current is None else \
            recorded.get("sha256") if recorded.get("target") == current else _file_digest(target)
        if digest != existing:
            write_bytes(target, content)  # whole or not at all, in a folder or an object store
        manifest[name] = {"sources": sources, "target": _file_state(target), "sha256": digest}
        written[name] = target
    write_bytes(manifest_path, json.dumps(manifest, indent=0, sort_keys=True).encode("utf-8"))
    return written


def _partition_keys(partitions_def: dg.PartitionsDefinition, spec: BenchmarkSpec, models: Sequence[str]) -> list:
    if isinstance(partitions_def, dg.MultiPartitionsDefinition):
        return [dg.MultiPartitionKey({"model": model, spec.dimension: lang}) for model in models for lang in spec.langs]
    return list(models)
