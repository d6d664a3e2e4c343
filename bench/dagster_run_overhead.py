"""Dagster's own cost per `sctc run` stage, by instance setting, measured side by side in one invocation.

Each setting runs in a fresh process against a fresh DAGSTER_HOME: `--runs` in-process runs of a three-asset,
model × lang partitioned job that does no work (the shape of `term_model_lang`), through the runner's own stage
code (`Runner`: worker thread, named job, tags, the file logger). Printed: CPU seconds per run of the process and
its children (compute-log capture starts `tail` and a `watch_orphans` Python process per step), and the ratio to
the instance `sctc ui` uses.

Settings:
- `ui`: the instance as `sctc ui` / `dagster dev` open it (LocalComputeLogManager: stdout/stderr of every step
  captured to files);
- `cli`: what `sctc run` uses (`sctc_assets.running.instance.cli_instance`): the same storage files, no
  compute-log capture (NoOpComputeLogManager), events written by `FastSqliteEventLogStorage` (one open connection
  per shard);
- `cli-dagster-events`: `cli` with Dagster's own `SqliteEventLogStorage` (a new engine and connection per event),
  what `sctc run` used before;
- `cli+batch`: `cli` with `DAGSTER_EVENT_BATCH_SIZE=100` (Dagster's batched event writes);
- `cli+consolidated`: `cli` with one SQLite event log for all runs instead of one file per run.

    python bench/dagster_run_overhead.py --runs 20
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's sctc_assets, not an installed one
from sctc_assets.lib.term.terms import LANGS as TERM_LANGS  # noqa: E402

SETTINGS = ("ui", "cli", "cli-dagster-events", "cli+batch", "cli+consolidated")
CONSOLIDATED = """
event_log_storage:
  module: dagster._core.storage.event_log
  class: ConsolidatedSqliteEventLogStorage
  config:
    base_dir: {home}/history
"""


def _child(setting: str, runs: int) -> None:
    import dagster as dg

    from sctc_assets.assets.partitions import model_lang_partitions
    from sctc_assets.running.instance import cli_instance
    from sctc_assets.benchmarks.spec import BenchmarkSpec
    from sctc_assets.running.runner import Runner

    partitions = model_lang_partitions(TERM_LANGS)

    @dg.asset(partitions_def=partitions, code_version="1")
    def answers() -> None:
        return None

    @dg.asset(partitions_def=partitions, deps=[answers], code_version="1")
    def labels() -> None:
        return None

    @dg.asset(partitions_def=partitions, deps=[labels], code_version="1")
    def scores() -> None:
        return None

    defs = dg.Definitions(assets=[answers, labels, scores],
                          jobs=[dg.define_asset_job("bench_model_lang", selection=[answers, labels, scores])])
    plan = BenchmarkSpec.of_stages(name="bench", langs=TERM_LANGS, inputs=(), per_model_lang=("answers", "labels", "scores"),
                         per_model=(), cross_model=())
    if setting == "ui":
        instance = dg.DagsterInstance.get()
    elif setting == "cli-dagster-events":
        from dagster._core.instance.ref import InstanceRef

        from sctc_assets.running.instance import NO_COMPUTE_LOGS

        instance = dg.DagsterInstance.from_ref(InstanceRef.from_dir(os.environ["DAGSTER_HOME"],
                                                                    overrides={"compute_logs": NO_COMPUTE_LOGS}))
    else:
        instance = cli_instance()
    models = [f"m{index}" for index in range(max(runs // 2, 1) + 1)]  # the first one warms up
    runner = Runner(defs, instance, {}, log=lambda line: None)
    runner.run(plan, models[:1], {})  # warm-up: imports, schema creation
    before = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    report = runner.run(plan, models[1:], {})
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = sum(b.ru_utime + b.ru_stime - (a.ru_utime + a.ru_stime) for a, b in zip(before, after))
    count = len(report.run_ids)
    print(json.dumps({"setting": setting, "runs": count, "cpu_s": cpu, "wall_s": wall, "ok": report.ok}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20, help="runs measured per setting (default 20)")
    parser.add_argument("--child", choices=SETTINGS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.runs)
        return
    results = {}
    for setting in SETTINGS:
        with tempfile.TemporaryDirectory() as home:
            config = "telemetry:\n  enabled: false\n"
            if setting == "cli+consolidated":
                config += CONSOLIDATED.format(home=home)
            Path(home, "dagster.yaml").write_text(config)
            env = {**os.environ, "DAGSTER_HOME": home, "SCTC_DATA_DIR": home}
            if setting == "cli+batch":
                env["DAGSTER_EVENT_BATCH_SIZE"] = "100"
            out = subprocess.run([sys.executable, __file__, "--child", setting, "--runs", str(args.runs)], env=env,
                                 capture_output=True, text=True, check=True).stdout
            results[setting] = json.loads(out.strip().splitlines()[-1])
    base = results["ui"]["cpu_s"] / results["ui"]["runs"]
    print(f"{'setting':18} {'runs':>5} {'CPU s/run':>10} {'vs ui':>7} {'wall s/run':>11}")
    for setting, result in results.items():
        per_run = result["cpu_s"] / result["runs"]
        print(f"{setting:18} {result['runs']:>5} {per_run:>10.3f} {per_run / base:>7.2f} "
              f"{result['wall_s'] / result['runs']:>11.3f}" + ("" if result["ok"] else "  (a run failed)"))


if __name__ == "__main__":
    main()
