"""`sctc run` on a data folder the same command left complete and nothing has changed since: the stored summary in
about a second (`sctc_assets.lib.run_record`), before Dagster, pandas or the definitions are imported; and, at the
end of a complete run, the record that makes this possible."""

from __future__ import annotations

import argparse
import importlib.util
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from sctc_assets.lib import run_record
from sctc_assets.lib.cache_postgres import DATABASE_URL_ENV
from sctc_assets.lib.paths import data_dir, default_outputs_dir, shipped_data_dir

# The benchmarks whose stages are all skipped when unchanged, and whose every input is a local file the record can
# watch or a setting in the command. The sovereignty and reviews benchmarks run their model stages every time (they
# read files outside Dagster's lineage); item sets may be URLs and always rerun their item stage; the corpus
# benchmark reads the corpora its registry names, anywhere; other packages' benchmarks have code outside this one.
RECORDED_BENCHMARKS = frozenset({"term", "name"})
# The command's digest as it started: the run itself adds settings (a budget's scope) that are not the command's.
_started: dict[str, str] = {}


def record_path() -> Path:
    return data_dir() / run_record.RECORD_NAME


def _folders(args: argparse.Namespace) -> list[Path]:
    out = Path(args.out).resolve() if args.out else default_outputs_dir()
    return [data_dir(), Path(os.environ["DAGSTER_HOME"]), out, shipped_data_dir()]


def _settings() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key.startswith("SCTC_")}


def replay(args: argparse.Namespace, argv: Sequence[str]) -> int | None:
    """0 after printing the last complete run's summary, when this command on this folder would change nothing;
    None when the run must go ahead (the default whenever anything is in doubt)."""
    _started["command"] = run_record.command_digest(argv, os.environ)
    if args.dry_run or args.recheck or os.environ.get(DATABASE_URL_ENV):
        return None
    record = run_record.unchanged(record_path(), _started["command"])
    if record is None:
        return None
    print(f"unchanged since the complete run of {record['finished_at']}: the same command, settings, code, registry "
          f"and files, so every stage, export and the report would be left as they are (--recheck checks each "
          f"stage again). Its summary:")
    print(record["summary"], end="" if record["summary"].endswith("\n") else "\n")
    return 0


def _backend_modules(entries: Sequence[Any]) -> list[str]:
    """The files of backends named `module:Class` (code outside this package, which the record watches too)."""
    found = []
    for entry in entries:
        backend = str(getattr(entry, "backend", ""))
        module = backend.partition(":")[0] if ":" in backend else ""
        try:
            spec = importlib.util.find_spec(module) if module else None
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.origin:
            found.append(spec.origin)
    return found


def remember(args: argparse.Namespace, benchmarks: Sequence[str], entries: Mapping[str, Any],
             models: Sequence[str], summary: str, complete: bool) -> None:
    """After a run: record it when it completed and everything it read can be watched; otherwise drop any older
    record (this run may have changed what it described)."""
    path = record_path()
    settings = _settings()
    command = _started.pop("command", None)
    eligible = (complete and command is not None and not os.environ.get(DATABASE_URL_ENV)
                and set(benchmarks) <= RECORDED_BENCHMARKS and not run_record.remote_values([vars(args), settings]))
    if not eligible:
        run_record.forget(path)
        return
    chosen = [entries[model] for model in models if model in entries]
    watched = run_record.watched_paths(vars(args), settings, chosen, _backend_modules(chosen))
    run_record.save(path, command=command, folders=_folders(args),
                    watched=watched, summary=summary)
