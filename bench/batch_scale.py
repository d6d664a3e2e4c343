"""Provider batches at scale (issue #40): N requests end to end through `ModelBackend.generate()` with `batch: true`,
a real SQLite response cache in a temporary folder and the in-memory batch API of
`sctc_assets_tests/fake_batch_client.py` (batches of at most 50,000 lines, OpenAI's limit; every line answered).

For each size (default 10,000 and 100,000), in a fresh process of its own: CPU seconds per 1,000 requests
(`time.process_time` around `generate()`: record, submit, poll, stream the results into the cache line by line, read
them back) and the peak memory `generate()` adds (tracemalloc's peak in a second, traced run; and the growth of the
process's peak RSS in the timed run). Goal: both flat in the number of requests, i.e. the per-request figures of
100 k within a small factor of 10 k (the ratios printed side by side). Memory per request includes the fake
provider's copy of the lines and the list `generate()` returns, both proportional to N by nature. Prints the
CPU model, its vector extensions and the load average, since the machine is shared.

    PYTHONPATH=. python bench/batch_scale.py [--sizes 10000 100000] [--no-tracemalloc]
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
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VECTOR_FLAGS = ("sse4_2", "avx", "avx2", "avx512f", "avx512bw", "avx512_vnni", "amx_tile", "neon", "asimd", "sve")


def cpu_description() -> str:
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "lscpu not available"
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    model = fields.get("Model name", "?").strip()
    flags = set(fields.get("Flags", "").split())
    vectors = [flag for flag in VECTOR_FLAGS if flag in flags]
    return f"{model}; {fields.get('CPU(s)', '?').strip()} CPUs; vector extensions: {' '.join(vectors) or 'none'}"


def one_size(count: int, traced: bool) -> dict[str, float]:
    """Run `count` requests through generate() (in this process) and measure it."""
    from sctc_assets.lib.cache import open_cache
    from sctc_assets.lib.generation import GenerationRequest
    from sctc_assets_tests import test_batch_driver as driver_tests
    from sctc_assets_tests.fake_batch_client import FakeBatchClient

    os.environ["SCTC_BATCH_WAIT"] = "foreground"
    driver_tests.CLIENTS["default"] = client = FakeBatchClient(max_requests=50_000, max_bytes=200_000_000)
    requests = [GenerationRequest.user(f"請用一個詞回答：第 {index} 個問題是什麼？") for index in range(count)]
    with tempfile.TemporaryDirectory() as folder:
        cache = open_cache(Path(folder) / "cache.sqlite")
        backend = driver_tests.BatchTestBackend(batch_retry_sync_max=20)
        backend.set_batch_context(on_progress=lambda line: None)
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        if traced:
            tracemalloc.start()
        cpu, wall = time.process_time(), time.perf_counter()
        results = backend.generate(requests, cache=cache)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        peak = tracemalloc.get_traced_memory()[1] if traced else 0
        if traced:
            tracemalloc.stop()
        rss_growth = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) * 1024
        outcome = backend.batch_outcome()
        assert sum(result.outcome == "ok" for result in results) == count and cache.count() == count
        assert client.paid_twice == 0 and outcome.lines_submitted == count
        cache.close()
    return {"requests": count, "cpu_s": cpu, "wall_s": wall, "peak_bytes": peak, "rss_growth_bytes": rss_growth,
            "batches": outcome.batches_submitted, "polls": outcome.polls}


def measure(count: int, traced: bool) -> dict[str, float]:
    """`one_size` in a fresh interpreter, so that one size's memory does not carry into the next."""
    process = subprocess.run([sys.executable, __file__, "--one", str(count)] + (["--traced"] if traced else []),
                             capture_output=True, text=True, cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    if process.returncode:
        raise SystemExit(f"{count} requests failed:\n{process.stderr[-3000:]}")
    return json.loads(process.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--no-tracemalloc", action="store_true", help="skip the traced run (RSS growth only)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--traced", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_size(args.one, args.traced)))
        return
    print(f"CPU: {cpu_description()}")
    print(f"load average before: {' '.join(f'{value:.2f}' for value in os.getloadavg())}")
    rows = []
    for count in args.sizes:
        timed = measure(count, traced=False)
        if not args.no_tracemalloc:
            timed["peak_bytes"] = measure(count, traced=True)["peak_bytes"]
        rows.append(timed)
        print(f"{count:>7} requests: {timed['cpu_s']:.2f} CPU-s ({timed['cpu_s'] / count * 1000:.3f} per 1,000), "
              f"{timed['wall_s']:.2f} s wall, {timed['batches']} batch(es), {timed['polls']} polls; peak traced "
              f"{timed['peak_bytes'] / 2**20:.1f} MiB ({timed['peak_bytes'] / count:.0f} B per request), RSS growth "
              f"{timed['rss_growth_bytes'] / 2**20:.1f} MiB ({timed['rss_growth_bytes'] / count:.0f} B per request)",
              flush=True)
    if len(rows) >= 2:
        small, large = rows[0], rows[-1]

        def ratio(name: str) -> str:
            per_small, per_large = small[name] / small["requests"], large[name] / large["requests"]
            return f"{per_large / per_small:.2f}" if per_small else "n/a"

        print(f"per request, {large['requests']:,} / {small['requests']:,}: CPU-s {ratio('cpu_s')}, peak traced "
              f"memory {ratio('peak_bytes')}, RSS growth {ratio('rss_growth_bytes')}  (1.00 = flat)")
    print(f"load average after: {' '.join(f'{value:.2f}' for value in os.getloadavg())}")


if __name__ == "__main__":
    main()
