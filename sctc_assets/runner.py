"""Materialize benchmarks in-process into a persistent Dagster instance (what `sctc run` does).

The stages mirror the partitioning: model-independent inputs, then each model × lang partition, then each model,
then the cross-model tables. Every stage goes through the same assets, resources, IO manager and response cache
as a backfill launched from the Dagster UI, so both paths share results.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import dagster as dg
import pandas as pd

from sctc_assets.partitions import MODELS_PARTITION_NAME
from sctc_assets.resources.io_manager import ParquetIOManager


@dataclass(frozen=True)
class BenchmarkPlan:
    """The assets of one benchmark, by stage, and what `sctc run` needs to know about it.

    `langs` are the keys of the benchmark's second partition dimension (named `dimension`, "lang" by default).
    `config(options)` turns the parsed `sctc run` options into `{asset name: op config}`; `add_arguments` adds the
    benchmark's own options to `sctc run`; `summary(tables, models)` renders the end-of-run table.
    `prepare(options)` runs before `sctc run` reads the registry (e.g. to import published results as registry
    entries) and returns model keys to run besides the default ones; `serves(entry)` says whether a registry entry
    can answer the benchmark at all (a replay of another benchmark's published answers cannot).
    `default_models`: whether `sctc run` without `--models` runs the registry's default models; when false it
    materializes only the model-independent inputs.
    `partitioned_inputs(options)` lists model-independent but partitioned work to run after the inputs, as
    `(asset names, partition keys)` pairs (corpus shards).
    """

    name: str
    langs: tuple[str, ...]
    inputs: tuple[str, ...]
    per_model_lang: tuple[str, ...]
    per_model: tuple[str, ...]
    cross_model: tuple[str, ...]
    dimension: str = "lang"
    config: Callable[[Mapping[str, Any]], dict] = field(default=lambda options: {})
    add_arguments: Callable[[Any], None] = field(default=lambda parser: None)
    summary: Callable[[Mapping[str, pd.DataFrame], list[str]], str] = field(default=lambda tables, models: "")
    prepare: Callable[[Mapping[str, Any]], list[str]] = field(default=lambda options: [])
    serves: Callable[[Any], bool] = field(default=lambda entry: True)
    default_models: bool = True
    partitioned_inputs: Callable[[Mapping[str, Any]], list[tuple[tuple[str, ...], list[str]]]] = field(
        default=lambda options: [])

    @property
    def tables(self) -> tuple[str, ...]:
        return self.inputs + self.per_model_lang + self.per_model + self.cross_model


@dataclass
class StageFailure:
    stage: str
    partition: str | None
    message: str
    model: str | None = None  # the model whose stage failed; None for model-independent stages and checks
    wrote: bool = False  # the stage still wrote its tables (every call failed: the error rows are stored)


@dataclass
class RunReport:
    failures: list[StageFailure] = field(default_factory=list)
    written: dict[str, Path] = field(default_factory=dict)
    inputs_failed: bool = False  # nothing downstream ran: the tables on disk are all from earlier runs

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def failed_models(self) -> list[str]:
        return list(dict.fromkeys(failure.model for failure in self.failures if failure.model is not None))

    @property
    def stale_models(self) -> list[str]:
        """Failed models whose tables this run did not write: what the tables hold of them is from earlier runs."""
        return list(dict.fromkeys(failure.model for failure in self.failures
                                  if failure.model is not None and not failure.wrote))


def stale_tables(tables: Mapping[str, pd.DataFrame], models: Sequence[str]) -> dict[str, list[str]]:
    """Model → the tables that still hold its rows. For models whose stages failed those rows come from an earlier
    run: the partitions and cross-model tables keep what the last successful materialization wrote."""
    found: dict[str, list[str]] = {}
    for model in models:
        names = [name for name, frame in tables.items() if "model" in frame.columns and (frame["model"] == model).any()]
        if names:
            found[model] = sorted(names)
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


def _all_calls_failed(result: dg.ExecuteInProcessResult) -> list[str]:
    """Materializations whose every model call ended as an `error` (endpoint down, key refused after retries…).

    The error rows are stored, as every outcome is, but a partition of nothing else is no result: the run fails.
    A replay's errors are published data (metadata `published_errors`, e.g. the API errors of a Pro-study result
    file), scored as its code scores them: a partition of only those is a result, not a failure.
    """
    failed = []
    for event in result.get_asset_materialization_events():
        materialization = event.event_specific_data.materialization
        outcomes = materialization.metadata.get("outcomes")
        counts = outcomes.value if outcomes is not None else {}
        calls = sum(counts.values()) if isinstance(counts, dict) else 0
        published = materialization.metadata.get("published_errors")
        replayed = published.value if published is not None and isinstance(published.value, int) else 0
        errors = counts.get("error", 0) if isinstance(counts, dict) else 0
        if calls and errors == calls and replayed < errors:
            failed.append(f"{materialization.asset_key.to_user_string()}: all {calls} model calls ended in an error "
                          "(the error rows and their messages are in the table)")
    return failed


def _failure_message(result: dg.ExecuteInProcessResult) -> str:
    """Each failed step with the error the asset raised, unwrapped from Dagster's step execution error."""
    messages = []
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data and event.step_failure_data.error:
            error = event.step_failure_data.error
            while error.cause is not None and (error.cls_name or "").startswith("Dagster"):
                error = error.cause
            messages.append(f"{event.step_key}: {error.message.strip().splitlines()[-1] if error.message else error}")
    return "; ".join(messages) or "run failed"


class Runner:
    def __init__(self, defs: dg.Definitions, instance: dg.DagsterInstance, resources: Mapping[str, Any],
                 log: Callable[[str], None] = print, log_level: str = "INFO"):
        self.defs = defs
        self.log_level = log_level
        self.instance = instance
        self.resources = dict(resources)
        self.log = log
        graph = defs.resolve_asset_graph()
        self._assets = [defs.get_assets_def(key) for key in graph.get_all_asset_keys()]
        self._assets = list({id(a): a for a in self._assets}.values())
        self._checks = list(defs.asset_checks or [])

    def ensure_model_partitions(self, models: Sequence[str]) -> None:
        known = set(self.instance.get_dynamic_partitions(MODELS_PARTITION_NAME))
        new = [model for model in models if model not in known]
        if new:
            self.instance.add_dynamic_partitions(MODELS_PARTITION_NAME, new)

    def _materialize(self, selection: Sequence[str], *, partition_key: str | None = None,
                     run_config: dict | None = None, with_checks: bool = False) -> dg.ExecuteInProcessResult:
        assets: list = [*self._assets, *(self._checks if with_checks else [])]
        keys = [dg.AssetKey(name) for name in selection]
        chosen = dg.AssetSelection.assets(*keys)
        if with_checks:
            chosen = chosen | dg.AssetSelection.checks_for_assets(*keys)
        # Step-level DEBUG events drown the progress lines on a terminal; the UI still has every event.
        run_config = {**(run_config or {}), "loggers": {"console": {"config": {"log_level": self.log_level}}}}
        return dg.materialize(assets, selection=chosen, partition_key=partition_key, instance=self.instance,
                              resources=self.resources, run_config=run_config, raise_on_error=False,
                              tags={"sctc/launched_by": "sctc run"})

    def _stage(self, report: RunReport, label: str, selection: Sequence[str], model: str | None = None,
               **kwargs: Any) -> bool:
        if not selection:
            return True
        self.log(f"[{label}] materializing {', '.join(selection)}")
        result = self._materialize(selection, **kwargs)
        partition = kwargs.get("partition_key")
        if not result.success:
            message = _failure_message(result)
            report.failures.append(StageFailure(label, partition, message, model))
            self.log(f"[{label}] FAILED: {message}")
        for message in _all_calls_failed(result):
            report.failures.append(StageFailure(label, partition, message, model, wrote=True))
            self.log(f"[{label}] FAILED: {message}")
        for message in _unpassed_checks(result, dg.AssetCheckSeverity.ERROR):
            report.failures.append(StageFailure(label, partition, message))
            self.log(f"[{label}] CHECK FAILED: {message}")
        for message in _unpassed_checks(result, dg.AssetCheckSeverity.WARN):
            self.log(f"[{label}] check warning: {message}")
        return result.success

    def run(self, plan: BenchmarkPlan, models: Sequence[str], options: Mapping[str, Any],
            report: RunReport | None = None) -> RunReport:
        report = report or RunReport()
        self.ensure_model_partitions(models)
        config_for_inputs = {"ops": {name: {"config": c} for name, c in plan.config(options).items() if name in plan.inputs}}
        if not self._stage(report, f"{plan.name}: inputs", plan.inputs, with_checks=True, run_config=config_for_inputs):
            report.inputs_failed = True
            return report
        config = plan.config(options)

        def ops(selection: Sequence[str]) -> dict:
            return {"ops": {name: {"config": config[name]} for name in selection if name in config}}

        for selection, keys in plan.partitioned_inputs(options):
            for key in keys:
                self._stage(report, f"{plan.name}: {key}", selection, partition_key=key, run_config=ops(selection))

        for model in models:
            model_ok = True
            for lang in plan.langs:
                key = dg.MultiPartitionKey({"model": model, plan.dimension: lang})
                model_ok &= self._stage(report, f"{plan.name}: {model}/{lang}", plan.per_model_lang, model=model,
                                        partition_key=key, run_config=ops(plan.per_model_lang))
            if model_ok:
                self._stage(report, f"{plan.name}: {model}", plan.per_model, model=model, partition_key=model,
                            run_config=ops(plan.per_model))
        # Cross-model tables need some model's results, unless the benchmark has no per-model stage at all.
        if models or not (plan.per_model_lang or plan.per_model):
            self._stage(report, f"{plan.name}: across models", plan.cross_model, run_config=ops(plan.cross_model))
        return report


def export_tables(plan: BenchmarkPlan, models: Sequence[str], io_manager: ParquetIOManager, out_dir: Path,
                  defs: dg.Definitions) -> dict[str, Path]:
    """Write each table asset as `<out_dir>/<asset>.parquet`; partitioned tables keep the chosen models only."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    for name in plan.tables:
        assets_def = defs.get_assets_def(name)
        partitions_def = assets_def.partitions_def
        if partitions_def is None:
            path = io_manager.path_for(dg.AssetKey(name))
            frames = [pd.read_parquet(path)] if path.exists() else []
        else:
            paths = [io_manager.path_for(dg.AssetKey(name), partitions_def, str(key))
                     for key in _partition_keys(partitions_def, plan, models)]
            frames = [pd.read_parquet(path) for path in paths if path.exists()]
        if not frames:
            continue
        # An empty table (no judge configured, nothing to review) is written too, with its columns, so an older
        # file of the same name in --out never passes for this run's result.
        frames = [frame for frame in frames if not frame.empty] or frames[:1]
        target = out_dir / f"{name}.parquet"
        pd.concat(frames, ignore_index=True).to_parquet(target, index=False)
        written[name] = target
    return written


def _partition_keys(partitions_def: dg.PartitionsDefinition, plan: BenchmarkPlan, models: Sequence[str]) -> list:
    if isinstance(partitions_def, dg.MultiPartitionsDefinition):
        return [dg.MultiPartitionKey({"model": model, plan.dimension: lang}) for model in models for lang in plan.langs]
    return list(models)
