"""The part of `sctc run` after validation: run each benchmark's stages, export and summarize, report what failed.

Exit status: 0 when everything passed, 1 when a stage or an ERROR check failed (one line per failed stage; the
stack traces are in the log file whose path is printed, or on the terminal with `--debug`), 130 when Ctrl-C or
SIGTERM stopped it (every answer that arrived is stored; rerunning continues from the response cache), 3 when the
only stages that did not finish wait for provider batches still running (`--no-wait`: the same command collects them).
"""

from __future__ import annotations

import os
import sqlite3
import sys
import threading
import time
import traceback
import warnings
from pathlib import Path
from collections.abc import Callable, Mapping
from typing import Any, Sequence

from sctc_assets.lib.cache import database_url, open_cache
from sctc_assets.lib.interrupt import clear_stop, stop_reason
from sctc_assets.lib.model_selection import ModelSelection
from sctc_assets.lib.paths import default_cache_path, default_outputs_dir
from sctc_assets.running.signals import EXIT_INTERRUPTED, EXIT_WAITING, PENDING_ERROR, stop_on_signals


def answers_stored_since(cache_path: Path, since: float) -> int:
    """Answers the response cache received since `since` (time.time()), by every process."""
    if database_url():
        cache = open_cache()
        try:
            return cache.count_since(since)
        finally:
            cache.close()
    if not cache_path.exists():
        return 0
    with sqlite3.connect(f"file:{cache_path}?mode=ro", uri=True, timeout=30) as connection:
        return int(connection.execute("SELECT COUNT(*) FROM responses WHERE created_at >= ?", (since,)).fetchone()[0])


def _quiet_dagster_warnings() -> None:
    import dagster as dg

    for category in (dg.BetaWarning, dg.PreviewWarning, dg.SupersessionWarning):
        warnings.filterwarnings("ignore", category=category)


def run_benchmarks(args: Any, options: Mapping[str, Any], selection: ModelSelection, project: Any = None,
                   failures: list | None = None,
                   call_errors: dict | None = None, summaries: list | None = None,
                   first_errors: dict | None = None) -> int:
    """Run `args.benchmarks` for the models of the validated `selection` (each benchmark runs its served models,
    `lib.model_selection`); see the module docstring for the exit status.

    `project` (tests): an object with `specs`, `defs` and `resources` instead of the project's own. `failures`,
    when given, receives every stage failure of every benchmark (the caller reports halted stages from it);
    `call_errors`, the model calls of each (asset, partition) that ended in an error after retries, and
    `first_errors`, the first error message of each; `summaries`, the summary each benchmark printed."""
    from sctc_assets.running.logs import RunLog, new_log_path

    debug = bool(getattr(args, "debug", False))
    home = Path(os.environ["DAGSTER_HOME"])
    run_log = RunLog(new_log_path(home / "logs"), print, debug=debug)
    if not debug:
        _quiet_dagster_warnings()
    started = time.time()
    clear_stop()  # a stop requested during an earlier run in this process is not this run's
    try:
        with stop_on_signals():
            status = _run_benchmarks(args, options, selection, run_log, project,
                                         failures if failures is not None else [],
                                         call_errors if call_errors is not None else {},
                                         summaries if summaries is not None else [],
                                         first_errors if first_errors is not None else {})
    except Exception as exc:
        if debug:
            raise
        run_log.write(traceback.format_exc())
        print(f"error: {type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''} "
              f"(full trace in {run_log.path})", file=sys.stderr)
        return 1
    finally:
        run_log.close()
    if stop_reason() is not None:
        stored = answers_stored_since(default_cache_path(), started)
        print(f"interrupted; {stored} answers stored, rerun to continue", file=sys.stderr)
        return EXIT_INTERRUPTED
    if status and not debug:
        print(f"full log with stack traces: {run_log.path}", file=sys.stderr)
    return status


class _TablesOnDemand(Mapping):
    """Exported tables by asset, each read from its file when first asked for: the summary needs a few small
    ones, not the million-row answer tables."""

    def __init__(self, paths: Mapping[str, Path], read: Any):
        self._paths, self._read, self._frames = dict(paths), read, {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._frames:
            self._frames[name] = self._read(self._paths[name])
        return self._frames[name]

    def __iter__(self):
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)


class BackgroundExports:
    """`export(work)` on a thread per call, one at a time (they share the folder's manifest), so the dispatcher
    that calls `start` goes on handing out stages meanwhile: a name export takes seconds, and Parquet's reads and
    writes let go of the GIL. A failed export is left to the export after the run, which writes what is missing
    and reports what fails."""

    def __init__(self, export: Callable[[Any], None]):
        self._export = export
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def _run(self, work: Any) -> None:
        with self._lock:
            try:
                self._export(work)
            except Exception:
                pass

    def start(self, work: Any) -> None:
        thread = threading.Thread(target=self._run, args=(work,), name="sctc-export", daemon=True)
        thread.start()
        self._threads.append(thread)

    def join(self) -> None:
        for thread in self._threads:
            thread.join()


def _project() -> Any:
    from types import SimpleNamespace

    from sctc_assets.benchmarks import SPECS
    from sctc_assets.definitions import defs, shared_resources

    return SimpleNamespace(specs=SPECS, defs=defs, resources=shared_resources())


def _error_rows_view(path: Path, dimension: str) -> Any:
    """A responses table's `model`, partition and `outcome` columns, with the text and message of its error rows
    only (read with a filter: the answer texts of a large table are never loaded)."""
    import pandas as pd
    import pyarrow.parquet as pq

    names = set(pq.read_schema(path).names)
    keys = [column for column in ("model", dimension, "outcome") if column in names]
    frame = pq.read_table(path, columns=keys).to_pandas()
    if "outcome" not in names or not {"response", "outcome_message"} <= names:
        return frame
    errors = pq.read_table(path, columns=["response", "outcome_message"],
                           filters=[("outcome", "=", "error")]).to_pandas()
    frame["response"], frame["outcome_message"] = "", pd.NA  # rows other than errors are never failed calls
    where = frame.index[frame["outcome"] == "error"]
    frame.loc[where, "response"] = errors["response"].to_numpy()
    frame.loc[where, "outcome_message"] = errors["outcome_message"].to_numpy()
    return frame


def _missing_answers(spec: Any, written: Mapping[str, Path], served: Sequence[str], entries: Mapping[str, Any]) -> str:
    """The summary's lines on models whose calls ended in an error (errors are never results): "no answers" where
    a partition has none, with the first error message, else how many answers are missing."""
    from sctc_assets.lib.backend_catalog import traits
    from sctc_assets.lib.missing_answers import missing_answer_lines

    if not spec.response_asset or spec.response_asset not in written:
        return ""
    lines = missing_answer_lines(
        _error_rows_view(Path(written[spec.response_asset]), spec.dimension), spec.dimension, served,
        published=lambda model: model in entries and traits(entries[model].backend).replays_benchmark(spec.name))
    return "".join(f"\n{line}" for line in lines)


def _batch_answers(spec: Any, written: Mapping[str, Path], served: Sequence[str], entries: Mapping[str, Any]) -> str:
    """The summary's lines on answers that came through a provider batch, per model, with their cost at the batch
    price (a table without the `batch_id` column has none)."""
    import pyarrow.parquet as pq

    from sctc_assets.lib.batch_usage import BATCH_COLUMN, USAGE_READ, batch_summary_lines

    if not spec.response_asset or spec.response_asset not in written:
        return ""
    path = Path(written[spec.response_asset])
    names = set(pq.read_schema(path).names)
    if BATCH_COLUMN not in names:
        return ""
    frame = pq.read_table(path, columns=[column for column in USAGE_READ if column in names],
                          filters=[(BATCH_COLUMN, "!=", "")]).to_pandas()
    return "".join(f"\n{line}" for line in batch_summary_lines(frame, served, entries))


def _run_benchmarks(args: Any, options: Mapping[str, Any], selection: ModelSelection, run_log: Any, project: Any,
                    failures: list, call_errors: dict, summaries: list, first_errors: dict) -> int:
    import pandas as pd

    from sctc_assets.resources.io_manager import ParquetIOManager, read_table
    from sctc_assets.running.runner import BenchmarkWork, Runner, export_tables
    from sctc_assets.running.schedule import run_all
    from sctc_assets.running.instance import cli_instance, report_dead_runs
    from sctc_assets.running.processes import give_back_memory

    project = project or _project()
    entries = selection.entries
    defs, resources = project.defs, project.resources
    out_dir = (args.out or default_outputs_dir()).resolve()
    instance = cli_instance()
    runner = Runner(defs, instance, resources, run_log=run_log)
    print(f"DAGSTER_HOME={os.environ['DAGSTER_HOME']}")
    report_dead_runs(instance)
    status = 0
    works = []
    for name in args.benchmarks:
        spec = project.specs[name]
        served = selection.served(spec)
        skipped = selection.skipped(spec)
        if skipped:
            print(f"{name}: skipping {', '.join(skipped)} (no answers for this benchmark)")
        print(f"{name}: models {', '.join(served) or '(none: model-independent assets only)'}")
        works.append(BenchmarkWork(spec.for_run(options), served, options))
    io_manager = resources.get("io_manager")
    io_manager = io_manager if isinstance(io_manager, ParquetIOManager) else ParquetIOManager()

    def export_before_cross(work: BenchmarkWork) -> None:
        """The tables the cross-model stage does not write, exported while it runs (the export below then finds
        them written from the same files and leaves them)."""
        export_tables(work.spec, work.models, io_manager, out_dir, defs,
                      names=[name for name in work.spec.tables if name not in work.spec.cross_model])
        give_back_memory()  # the joined answer tables, while the workers still run

    early_exports = BackgroundExports(export_before_cross)
    try:
        reports = run_all(runner, works, early_exports.start)
    finally:
        early_exports.join()  # before the export below, and before the report forks its figure workers
    for work, report in zip(works, reports):
        name, spec, served = work.spec.name, work.spec, work.models
        failures += report.failures
        call_errors.update(report.call_errors)
        first_errors.update(report.first_errors)
        if report.interrupted is not None:
            break
        tables: dict[str, pd.DataFrame] = {}
        if report.inputs_failed:
            print(f"\n{name}: the inputs stage failed, so nothing else ran; no tables written", file=sys.stderr)
        else:
            written = export_tables(spec, served, io_manager, out_dir, defs)
            tables = _TablesOnDemand(written, read_table)
            summary = f"\n{spec.summary(tables, served)}{_missing_answers(spec, written, served, entries)}" \
                      f"{_batch_answers(spec, written, served, entries)}\n\n" \
                      f"{len(written)} tables written to {out_dir}: {', '.join(sorted(written))}"
            print(summary)
            summaries.append(summary)
        failed = [failure for failure in report.failures if PENDING_ERROR not in (failure.message or "")]
        if not report.ok and not failed:  # only stages waiting for provider batches (`--no-wait`): listed at the end
            status = max(status, EXIT_WAITING)
        elif not report.ok:
            status = 1
            print(f"\n{len(failed)} stage(s) or check(s) failed:", file=sys.stderr)
            for failure in failed:
                print(f"  {failure.stage}: {failure.message}", file=sys.stderr)
        if report.failed_models:
            print(f"\n{name}: stages failed for {', '.join(report.failed_models)}", file=sys.stderr)
            for model, names in report.earlier_rows(spec, tables).items():
                print(f"  {model}: its rows in {', '.join(names)} (and the summary above) are from an earlier run,"
                      " not this one", file=sys.stderr)
    return status
