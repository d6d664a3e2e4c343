"""A 4-partition backfill on the Dagster instance on PostgreSQL against the same on SQLite, side by side in one
run (issue #25's goals).

Each round makes a fresh data folder and `$DAGSTER_HOME` with sctc's settings (`lib/dagster_home.py`): SQLite,
or `$SCTC_DATABASE_URL` on a throwaway PostgreSQL server (`sctc_assets_tests/postgres.py`), which moves the response
cache there too, as a deployment does. It materializes the term benchmark's inputs, starts `dagster-daemon run`
(queued run coordinator) and `dagster-webserver`, launches a backfill of four replay-model partitions of
`term_model_lang` through GraphQL (one run process per partition) and times it from launch to the daemon marking
it done (paced by the backfill daemon's 30 s ticks), from the first run's creation to the last run's end (the
queue, four run processes and their storage), and the mean time of one run (its start to its end, as the run
records say). Rounds alternate (SQLite, PostgreSQL, PostgreSQL, SQLite, …) so that a drift in the machine's
load hits both alike.

    PYTHONPATH=. SCTC_UPSTREAM=… python bench/instance_backfill.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sctc_assets.lib.dagster_home import write_instance_settings  # noqa: E402
from sctc_assets.lib.paths import default_upstream_cache_dir  # noqa: E402
from sctc_assets.lib.sctc_upstream import SCTC_ENV_VAR, SCTC_MARKERS  # noqa: E402
from sctc_assets.lib.upstream_source import UpstreamSource  # noqa: E402
from sctc_assets_tests.daemon_backfill import REPO, Servers, partitions  # noqa: E402
from sctc_assets_tests.postgres import missing_reason, start_server  # noqa: E402

PREPARE = "import sys; from pathlib import Path; from sctc_assets_tests.daemon_backfill import prepare_inputs; " \
          "prepare_inputs(Path(sys.argv[1]))"


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def one_round(kind: str, url: str | None, folder: Path) -> tuple[float, float, float]:
    """Seconds on a fresh instance: from launch to the end of the backfill, from the first run's creation to the
    last run's end, and of one run (mean)."""
    data, home = folder / "data", folder / "data" / "dagster_home"
    home.mkdir(parents=True)
    env = {"SCTC_DATA_DIR": str(data), "DAGSTER_HOME": str(home), "SCTC_MODELS": str(REPO / "data" / "models.yaml")}
    if url:
        env["SCTC_DATABASE_URL"] = url
    saved = {key: os.environ.get(key) for key in [*env, "SCTC_DATABASE_URL"]}
    os.environ.pop("SCTC_DATABASE_URL", None)
    os.environ.update(env)
    try:
        write_instance_settings(home)
        # In a process of its own: the definitions read the data folder when first imported.
        subprocess.run([sys.executable, "-c", PREPARE, str(home)], cwd=REPO, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with Servers(home, folder / "logs") as servers:
            _, runs, elapsed = servers.backfill(partitions(), timeout=600)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    durations = [run["endTime"] - run["startTime"] for run in runs]
    span = max(run["endTime"] for run in runs) - min(run["creationTime"] for run in runs)
    print(f"  {kind:10} launch to end {elapsed:5.1f} s, runs created to ended {span:5.1f} s, one run "
          f"{statistics.mean(durations):4.1f} s (runs: {', '.join(f'{value:.1f}' for value in durations)})",
          flush=True)
    return elapsed, span, statistics.mean(durations)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="rounds per instance kind (default 2)")
    args = parser.parse_args()
    reason = missing_reason()
    if reason:
        print(f"cannot start PostgreSQL: {reason}", file=sys.stderr)
        return 2
    location = os.environ.get(SCTC_ENV_VAR)
    if not location:
        print(f"set ${SCTC_ENV_VAR} to the SC-TC-Bench data (the replay models' answers)", file=sys.stderr)
        return 2
    # Extracted once, into the usual data folder; every round reads it from there.
    os.environ[SCTC_ENV_VAR] = str(UpstreamSource.open(location, cache_dir=default_upstream_cache_dir(),
                                                       markers=SCTC_MARKERS).root)
    order = [kind for index in range(args.rounds) for kind in
             (("sqlite", "postgresql") if index % 2 == 0 else ("postgresql", "sqlite"))]
    print(f"before: {uptime()} ({os.cpu_count()} cores)")
    results: dict[str, list[tuple[float, float, float]]] = {"sqlite": [], "postgresql": []}
    server = start_server()
    try:
        for kind in order:
            with tempfile.TemporaryDirectory(prefix=f"sctc-bench-{kind}-") as folder:
                url = server.create_database("bench") if kind == "postgresql" else None
                results[kind].append(one_round(kind, url, Path(folder)))
    finally:
        server.stop()
    print(f"after:  {uptime()}")
    print(f"\n4-partition backfill (term_model_lang, replay models), mean of {args.rounds} round(s):")
    print(f"{'':26} {'SQLite':>8} {'PostgreSQL':>11} {'ratio':>6}")
    # The first is paced by the backfill daemon, which looks at backfills every 30 s (Dagster's daemon interval):
    # it is about two of its ticks either way. The other two are where the storage shows.
    for index, measure in enumerate(("launch to end (s)", "runs created to ended (s)", "one run (s)")):
        sqlite = statistics.mean(result[index] for result in results["sqlite"])
        postgres = statistics.mean(result[index] for result in results["postgresql"])
        print(f"{measure:26} {sqlite:8.1f} {postgres:11.1f} {postgres / sqlite:6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
