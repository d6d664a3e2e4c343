"""Many API models at once: `sctc run` over 1 model and over 4 models behind 4 endpoints, side by side in one run.

Starts 4 OpenAI-compatible stub servers (asyncio, each in its own process, `--latency` seconds per request),
registers one API model per endpoint in a temporary registry and runs `sctc run --benchmarks term` (one prompt
variant, one trial: 110 prompts per language) as a subprocess, in one data folder and one Dagster home:
1. a warm-up model, so the model-independent inputs are materialized (and skipped, unchanged, by the runs below);
2. one model;
3. four models, one per endpoint, concurrently (the default path; target: ≤ 1.3 × the time of one);
4. the same four models one after another (`$SCTC_CONCURRENT_MODELS=0`, the path before), unless `--no-sequential`.
Every run asks new model names, so nothing comes from the response cache. Prints wall and CPU seconds (the
`sctc run` process and its children), the asking phase (first request to last answer, as the stub servers saw
them: the part that overlaps; the rest of a run is CPU work per model and per run) and the ratios, and the cost of one new Python process importing the
definitions: what each step process of Dagster's multiprocess executor pays on top, the alternative not taken.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sctc_assets_tests.openai_stub_server import AsyncStubServer  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cli_speed import timed  # noqa: E402  (the benches' one way to time a child process)

ENDPOINTS = 4


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--latency", type=float, default=1.0, help="server seconds per request")
    parser.add_argument("--concurrency", type=int, default=16, help="each model's requests in flight at once")
    parser.add_argument("--no-sequential", action="store_true", help="skip the one-after-another run")
    return parser.parse_args(argv)


def write_registry(path: Path, urls: list[str], concurrency: int) -> None:
    lines = ["models:"]
    for run in ("warm", "one", "four", "seq"):
        for number, url in enumerate(urls):
            key = f"{run}-{number}"
            lines.append(f"  {key}: {{backend: openai, model: {key}, base_url: '{url}', api_key_env: '',"
                         f" concurrency: {concurrency}, max_retries: 2, timeout_s: 60,"
                         " benchmarks: {term: {trials: 1, prompt_variants: [1]}}}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def sctc_run(models: list[str], registry: Path, work: Path, **env: str) -> tuple[float, float]:
    """(wall s, CPU s) of one `sctc run --benchmarks term --models …`."""
    command = [sys.executable, "-m", "sctc_assets.cli", "run", "--benchmarks", "term", "--models", *models,
               "--registry", str(registry), "--out", str(work / "out")]
    environment = {**os.environ, "SCTC_DATA_DIR": str(work / "data"), "DAGSTER_HOME": str(work / "home"),
                   "SCTC_NO_REPORT": "1", **env}
    wall, cpu, _ = timed(command, environment)  # exits naming the command and its stderr when it fails
    return wall, cpu


def import_cost() -> tuple[float, float]:
    """(wall s, CPU s) of a new process that imports the definitions, as each multiprocess step does."""
    wall, cpu, _ = timed([sys.executable, "-c", "import sctc_assets.definitions"], dict(os.environ))
    return wall, cpu


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not os.environ.get("SCTC_UPSTREAM"):
        raise SystemExit("set $SCTC_UPSTREAM to the SC-TC-Bench data (e.g. ../shared/upstream/SC-TC-Bench-aaad554.tar.xz)")
    with tempfile.TemporaryDirectory(prefix="multi-endpoint-") as folder:
        work = Path(folder)
        (work / "home").mkdir()
        (work / "home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
        servers = [AsyncStubServer(latency_s=args.latency, workdir=work / f"stub{number}")
                   for number in range(ENDPOINTS)]
        for number, server in enumerate(servers):
            (work / f"stub{number}").mkdir()
            server.__enter__()
        try:
            registry = work / "models.yaml"
            write_registry(registry, [server.base_url for server in servers], args.concurrency)
            rounds = -(-110 // args.concurrency)
            print(f"{ENDPOINTS} stub endpoints, {args.latency:g} s per request; term benchmark, 110 prompts per "
                  f"language × 2 languages per model, concurrency {args.concurrency} "
                  f"(ideal model time per model: {2 * rounds * args.latency:g} s)")
            sctc_run(["warm-0"], registry, work)
            plans = {"1 model": (["one-0"], {}),
                     "4 models, concurrent": ([f"four-{n}" for n in range(ENDPOINTS)], {})}
            if not args.no_sequential:
                plans["4 models, one after another"] = ([f"seq-{n}" for n in range(ENDPOINTS)],
                                                        {"SCTC_CONCURRENT_MODELS": "0"})
            runs, asking, stats = {}, {}, []
            for name, (models, env) in plans.items():
                for server in servers:
                    server.reset()
                runs[name] = sctc_run(models, registry, work, **env)
                seen = [server.stats() for server in servers]
                used = [stat for stat in seen if stat["requests"]]
                asking[name] = max(stat["last_answer_at"] for stat in used) - min(stat["first_request_at"]
                                                                                 for stat in used)
                stats.append((name, seen))
        finally:
            for server in servers:
                server.__exit__(None, None, None)
    one_wall, one_asking = runs["1 model"][0], asking["1 model"]
    print(f"\n{'run':30} {'wall s':>7} {'CPU s':>7} {'wall/1':>7} {'asking s':>9} {'asking/1':>9}")
    for name, (wall, cpu) in runs.items():
        print(f"{name:30} {wall:7.1f} {cpu:7.1f} {wall / one_wall:7.2f} {asking[name]:9.1f} "
              f"{asking[name] / one_asking:9.2f}")
    print("(asking: from the first request any endpoint received to the last answer any endpoint sent)")
    for label, value in (("whole sctc run", runs["4 models, concurrent"][0] / one_wall),
                         ("asking phase", asking["4 models, concurrent"] / one_asking)):
        print(f"4 models behind 4 endpoints / 1 model, {label}: {value:.2f} (target ≤ 1.3: "
              f"{'met' if value <= 1.3 else 'NOT met'})")
    for name, seen in stats:
        print(f"{name}: requests per endpoint {[stat['requests'] for stat in seen]}, paid twice "
              f"{sum(stat['paid_twice'] for stat in seen)}, peak in flight {[stat['peak_in_flight'] for stat in seen]}")
    wall, cpu = import_cost()
    print(f"a new process importing sctc_assets.definitions (each step process of the multiprocess executor): "
          f"{wall:.1f} s wall, {cpu:.1f} CPU s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
