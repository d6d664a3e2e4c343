"""A cold and a warm `sctc run` of the SC-TC-Bench re-analysis, side by side in one invocation.

    python bench/reanalysis_run.py [--benchmarks term name] [--models KEY …] [--keep DIR]

Cold: a fresh data folder ($SCTC_DATA_DIR, with $DAGSTER_HOME inside it): no Dagster instance, no stored tables,
no response cache, no parsed replay files, no converted tokenizer vocabularies, no extracted upstream copy; only
the embedded model file is linked in (from this checkout's `data/models`). Warm: the same command again, nothing
changed, the same `--out`. Each run is a child process (`python -m sctc_assets.cli run … --no-report`); its CPU seconds (user +
sys) and peak RSS come from the kernel's accounting of the child, wall seconds from the clock. The machine may be
shared, so CPU seconds are the figure to compare. Also printed: the Dagster runs and materializations each `sctc
run` added to the instance, and whether the two runs exported the same tables (hashed after each run; the warm
run exports them from storage, leaving files already exported from the same stored files as they are). Needs $SCTC_UPSTREAM (the SC-TC-Bench archive or folder).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAPER_MODELS = ["paper-qwen", "paper-baichuan2", "paper-chatglm2", "paper-breeze", "paper-taiwan-llm", "paper-ds",
                "paper-gpt4o", "paper-gpt4", "paper-gpt3.5", "paper-llama3-70b", "paper-llama3-8b"]


_COUNTS = """
import sys
import dagster as dg
import sqlalchemy as db
from dagster._core.instance.ref import InstanceRef
from dagster._core.storage.event_log.schema import SqlEventLogStorageTable as events
instance = dg.DagsterInstance.from_ref(InstanceRef.from_dir(sys.argv[1]))
with instance.event_log_storage.index_connection() as connection:
    count = connection.execute(db.select(db.func.count()).select_from(events).where(
        events.c.dagster_event_type == "ASSET_MATERIALIZATION")).scalar()
print(instance.get_runs_count(), count)
"""


def _instance_counts(home: Path) -> tuple[int, int]:
    """(runs, asset materializations) in the instance at `home`."""
    out = subprocess.run([sys.executable, "-c", _COUNTS, str(home)], capture_output=True, text=True, check=True,
                         cwd=REPO).stdout.split()
    return int(out[0]), int(out[1])


def _tables_digest(folder: Path) -> dict[str, str]:
    """Exported table → its content hash over every column (the project's `table_hash`, volatile ones too)."""
    import pandas as pd

    from sctc_assets.lib.content_hash import table_hash

    return {path.name: table_hash(pd.read_parquet(path), ignore=()) for path in sorted(folder.glob("*.parquet"))}


def _run(command: list[str], env: dict[str, str], log: Path) -> dict[str, float]:
    """CPU seconds, wall seconds and peak RSS of one child process, from the kernel's accounting of that child."""
    started = time.perf_counter()
    with log.open("w") as handle:
        child = subprocess.Popen(command, env=env, cwd=REPO, stdout=handle, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(command[:6])} … exited with {child.returncode}; see {log}")
    return {"cpu": usage.ru_utime + usage.ru_stime, "wall": wall, "rss_gb": usage.ru_maxrss / 1024 / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmarks", nargs="+", default=["term", "name"])
    parser.add_argument("--models", nargs="+", default=PAPER_MODELS)
    parser.add_argument("--keep", type=Path, help="data folder to use and keep (must not exist); default a temp one")
    args = parser.parse_args()
    if not os.environ.get("SCTC_UPSTREAM"):
        raise SystemExit("set SCTC_UPSTREAM to the SC-TC-Bench archive or folder")

    data = args.keep or Path(tempfile.mkdtemp(prefix="sctc-reanalysis-"))
    data.mkdir(parents=True, exist_ok=True)
    if any(path.name != "models" for path in data.iterdir()):
        raise SystemExit(f"{data} is not empty: a cold run needs an empty data folder")
    models = REPO / "data" / "models"
    if models.exists() and not (data / "models").exists():
        (data / "models").symlink_to(models.resolve())
    env = {name: value for name, value in os.environ.items() if name not in ("SCTC_MODELS", "DAGSTER_HOME")}
    env.update(SCTC_DATA_DIR=str(data), DAGSTER_HOME=str(data / "dagster_home"), HF_HUB_OFFLINE="1")
    results = {}
    counts = [(0, 0)]
    try:
        out = data / "out"  # the same --out both times, as a user reruns the same command
        for name in ("cold", "warm"):
            command = [sys.executable, "-m", "sctc_assets.cli", "run", "--benchmarks", *args.benchmarks,
                       "--models", *args.models, "--no-report", "--out", str(out)]
            results[name] = _run(command, env, data / f"{name}.log")
            counts.append(_instance_counts(data / "dagster_home"))
            results[name]["runs"] = counts[-1][0] - counts[-2][0]
            results[name]["materializations"] = counts[-1][1] - counts[-2][1]
            results[name]["tables"] = _tables_digest(out)
    finally:
        if args.keep is None:
            shutil.rmtree(data, ignore_errors=True)

    print(f"sctc run --benchmarks {' '.join(args.benchmarks)} over {len(args.models)} models, "
          f"{os.cpu_count()} CPUs (shared: compare CPU seconds)")
    print(f"{'':6} {'CPU s':>8} {'wall s':>8} {'peak RSS GB':>12} {'Dagster runs':>13} {'materializations':>17}")
    for name, result in results.items():
        print(f"{name:6} {result['cpu']:8.1f} {result['wall']:8.1f} {result['rss_gb']:12.2f} {result['runs']:13d} "
              f"{result['materializations']:17d}")
    cold, warm = results["cold"], results["warm"]
    print(f"warm / cold: CPU {warm['cpu'] / cold['cpu']:.3f}, wall {warm['wall'] / cold['wall']:.3f}")
    same = cold["tables"] == warm["tables"]
    print(f"exported tables: {len(cold['tables'])} cold, {len(warm['tables'])} warm, "
          f"{'identical' if same else 'DIFFERENT: ' + str(sorted(set(cold['tables'].items()) ^ set(warm['tables'].items())))}")


if __name__ == "__main__":
    main()
