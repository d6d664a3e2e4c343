"""The response cache on PostgreSQL against SQLite, side by side in one run (issue #25's goals).

- look-ups and stores per second for N keys (default 100,000): stores one by one (`store`, as answers arrive),
  look-ups in batches of 500 (`get_many`, as `generate()` reads a partition) and one by one (`get`);
  goal: PostgreSQL ≥ 0.5 × SQLite;
- claim overhead per request at concurrency 64: 64 threads, each claiming its key, storing its answer (which drops
  the claim), as the backends do per request, against the same stores without claims; goal ≤ 1 ms;
- the floor under any one-key operation on a server: `SELECT 1` round trips per second on one connection (TCP, as
  the cache connects, and the server's Unix socket), and the highest ratio to SQLite that this floor allows for
  `get` and `store`, measured in the same run.

Starts its own throwaway PostgreSQL server (`sctc_assets_tests/postgres.py`, as the tests do) and prints the
numbers and the load average.

    PYTHONPATH=. python bench/cache_backends.py [--keys 100000] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sctc_assets.lib.cache import new_claim_owner, open_cache  # noqa: E402
from sctc_assets.lib.generation import GenerationRequest, GenerationResult  # noqa: E402
from sctc_assets_tests.postgres import missing_reason, start_server  # noqa: E402

IDENTITY = {"backend": "bench", "model": "m"}
REQUEST = GenerationRequest.user("问题")
RESULT = GenerationResult("答案 " * 20, input_tokens=10, output_tokens=40)


def _rate(count: int, seconds: float) -> float:
    return count / seconds if seconds else float("inf")


def stores_and_lookups(cache, keys: list[str]) -> dict[str, float]:
    started = time.perf_counter()
    for key in keys:
        cache.store(key, IDENTITY, REQUEST, RESULT)
    stores = _rate(len(keys), time.perf_counter() - started)
    started = time.perf_counter()
    for start in range(0, len(keys), 500):
        assert len(cache.get_many(keys[start : start + 500])) == len(keys[start : start + 500])
    batched = _rate(len(keys), time.perf_counter() - started)
    sample = keys[:: max(1, len(keys) // 20000)]
    started = time.perf_counter()
    for key in sample:
        cache.get(key)
    single = _rate(len(sample), time.perf_counter() - started)
    return {"stores/s": stores, "look-ups/s (get_many 500)": batched, "look-ups/s (get)": single}


def round_trips_per_s(url: str, count: int, **connect) -> float:
    """`SELECT 1` statements per second on one autocommit connection: a server's floor for any one-key operation."""
    import psycopg

    with psycopg.connect(url, autocommit=True, **connect) as connection:
        for _ in range(200):
            connection.execute("SELECT 1").fetchall()
        started = time.perf_counter()
        for _ in range(count):
            connection.execute("SELECT 1").fetchall()
        return _rate(count, time.perf_counter() - started)


def per_request_ms(cache, prefix: str, requests: int, concurrency: int, claim: bool) -> float:
    """Wall time per request of `concurrency` threads each storing (and, with `claim`, first claiming) its keys."""
    per_thread = requests // concurrency

    def work(thread: int) -> None:
        owner = new_claim_owner()
        for index in range(per_thread):
            key = f"{prefix}-{thread}-{index}"
            if claim:
                assert cache.claim([key], owner, lease_s=60).claimed == [key]
            cache.store(key, IDENTITY, REQUEST, RESULT)

    threads = [threading.Thread(target=work, args=(thread,)) for thread in range(concurrency)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return (time.perf_counter() - started) * 1000 / (per_thread * concurrency)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--claim-requests", type=int, default=6400)
    args = parser.parse_args()
    reason = missing_reason()
    if reason:
        print(f"cannot start PostgreSQL: {reason}", file=sys.stderr)
        return 2
    server = start_server()
    try:
        with tempfile.TemporaryDirectory() as folder:
            stores = {"sqlite": open_cache(Path(folder) / "cache.sqlite"),
                      "postgresql": open_cache(server.create_database("bench"))}
            keys = [f"{index:064x}" for index in range(args.keys)]
            numbers = {name: stores_and_lookups(cache, keys) for name, cache in stores.items()}
            print(f"{args.keys} keys, one process; load average before: {os.getloadavg()}")
            print(f"{'':28} {'SQLite':>12} {'PostgreSQL':>12} {'ratio':>7}")
            for measure in numbers["sqlite"]:
                sqlite, postgres = numbers["sqlite"][measure], numbers["postgresql"][measure]
                print(f"{measure:28} {sqlite:12,.0f} {postgres:12,.0f} {postgres / sqlite:7.2f}")
            url = server.url()
            floor = {"TCP": round_trips_per_s(url, 20_000),
                     "Unix socket": round_trips_per_s(url, 20_000, host=str(server.folder))}
            print("\nthe floor of one round trip (`SELECT 1` on one connection), and the ratio it allows at best:")
            for how, rate in floor.items():
                print(f"{how:12} {rate:10,.0f}/s; at best get {min(1.0, rate / numbers['sqlite']['look-ups/s (get)']):.2f}"
                      f" and store {min(1.0, rate / numbers['sqlite']['stores/s']):.2f} of SQLite")
            print(f"\nclaim overhead per request, {args.concurrency} threads, {args.claim_requests} requests:")
            for name, cache in stores.items():
                plain = per_request_ms(cache, "plain", args.claim_requests, args.concurrency, claim=False)
                claimed = per_request_ms(cache, "claimed", args.claim_requests, args.concurrency, claim=True)
                print(f"{name:12} store only {plain:.3f} ms, claim + store {claimed:.3f} ms: "
                      f"overhead {claimed - plain:.3f} ms per request")
            stores["postgresql"].close()  # (SQLite's connections belong to the threads that opened them)
        print(f"\nload average after: {os.getloadavg()} ({os.cpu_count()} cores)")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
