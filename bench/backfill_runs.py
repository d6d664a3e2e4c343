"""What one run per partition costs a UI backfill of an answer asset, against one run over the whole range, measured
side by side (issue 38, point 2: a range run gives every partition one data version, so it was dropped).

Two costs, each measured `--rounds` times in a fresh Python process, as a run the daemon launches starts:
- `run`: the process start and the import of the code location (`sctc_assets.definitions`), what every run process
  pays before its first step (Dagster's own per-run work comes on top, `bench/dagster_run_overhead.py`);
- `load`: loading the embedded local model (`qwen2.5-coder-0.5b-instruct`, transformers on the CPU, converted
  weights from the download cache): what a run of a local model pays before its first answer; a second backend of
  the same model in the same process pays nothing (the model is kept per process).

Then the backfill of N partitions (`--partitions`) both ways: a range run pays one start (and one load), one run per
partition pays N. Replay and API models load nothing. Wall seconds on a shared machine vary; CPU seconds less.

    python bench/backfill_runs.py --rounds 3 --partitions 2 4
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's sctc_assets, not an installed one

REPO = Path(__file__).resolve().parents[1]
MODEL_KEY = "qwen2.5-coder-0.5b-instruct"

CHILD_RUN = """
import json, resource, sys, time
started = time.perf_counter()
import sctc_assets.definitions  # noqa: F401
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"wall": time.perf_counter() - started, "cpu": usage.ru_utime + usage.ru_stime}))
"""

CHILD_LOAD = """
import json, resource, sys, time
from sctc_assets.resources.model_registry import ModelRegistryResource
registry = ModelRegistryResource()
before = resource.getrusage(resource.RUSAGE_SELF)
started = time.perf_counter()
registry.backend(sys.argv[1])._loaded()
loaded = time.perf_counter()
after = resource.getrusage(resource.RUSAGE_SELF)
registry.backend(sys.argv[1])._loaded()  # a second partition's backend in the same process
again = time.perf_counter()
cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
print(json.dumps({"wall": loaded - started, "cpu": cpu, "again": again - loaded}))
"""


def _child(code: str, *args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=REPO, env=env, capture_output=True, text=True,
                          check=False)
    if done.returncode:
        raise SystemExit(f"child failed ({done.returncode}):\n{done.stderr[-3000:]}")
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    measured["process"] = time.perf_counter() - started
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes per cost (default 3)")
    parser.add_argument("--partitions", type=int, nargs="+", default=[2, 4], help="backfill sizes to print")
    parser.add_argument("--model", default=MODEL_KEY, help=f"registry key of a local model (default {MODEL_KEY})")
    args = parser.parse_args()

    runs, loads = [], []
    for _ in range(args.rounds):  # interleaved, so that a change of the machine's load hits both alike
        runs.append(_child(CHILD_RUN))
        loads.append(_child(CHILD_LOAD, args.model))
    run_wall = statistics.median(r["process"] for r in runs)
    run_cpu = statistics.median(r["cpu"] for r in runs)
    load_wall = statistics.median(r["wall"] for r in loads)
    load_cpu = statistics.median(r["cpu"] for r in loads)
    print(f"one more run (process start + definitions import), median of {args.rounds}: "
          f"{run_wall:.2f} s wall, {run_cpu:.2f} CPU-s")
    print(f"loading {args.model}, median of {args.rounds}: {load_wall:.2f} s wall, {load_cpu:.2f} CPU-s "
          f"(a second backend in the same process: {statistics.median(r['again'] for r in loads) * 1000:.1f} ms)")
    print()
    print("| partitions | model | one range run (s wall) | one run per partition (s wall) | extra |")
    print("|---|---|---|---|---|")
    for n in args.partitions:
        for kind, per_run in (("local (loads)", run_wall + load_wall), ("replay / API", run_wall)):
            print(f"| {n} | {kind} | {per_run:.1f} | {n * per_run:.1f} | +{(n - 1) * per_run:.1f} |")


if __name__ == "__main__":
    main()
