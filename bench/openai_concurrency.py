"""How much `OpenAIBackend`'s concurrency buys against an endpoint with a fixed per-request latency.

Starts the local stub server from the test suite, sends the same requests once one at a time and once N at a time
(no cache, so both runs really call the server), and prints both wall times and the ratio. With a latency-bound
endpoint the ideal speed-up is min(N, requests); the gap to it is client overhead.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

# Run as a plain script from a checkout: make the repository importable without installing it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sctc_assets.backends.openai_backend import OpenAIBackend  # noqa: E402
from sctc_assets.lib.generation import GenerationRequest  # noqa: E402
from sctc_assets_tests.openai_stub_server import StubOpenAIServer  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Time OpenAIBackend.generate at concurrency 1 and at N against a local stub server "
        "with a fixed per-request latency, and print the speed-up.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--requests", type=int, default=64, help="number of distinct requests per run")
    parser.add_argument("--latency", type=float, default=0.1, help="seconds the server takes per request")
    parser.add_argument("--concurrency", type=int, default=16, help="concurrency N of the parallel run")
    return parser.parse_args(argv)


def timed_run(base_url: str, requests: list[GenerationRequest], concurrency: int) -> float:
    # The stub ignores authentication; an empty api_key_env makes the backend send the local-server key.
    backend = OpenAIBackend(model="stub-model", base_url=base_url, api_key_env="", concurrency=concurrency)
    started = time.perf_counter()
    results = backend.generate(requests)
    elapsed = time.perf_counter() - started
    failed = [result for result in results if result.outcome != "ok"]
    if failed:
        raise SystemExit(f"{len(failed)} of {len(results)} requests failed at concurrency {concurrency}")
    return elapsed


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    requests = [GenerationRequest.user(f"bench prompt {index}") for index in range(args.requests)]
    with StubOpenAIServer(latency_s=args.latency) as server:
        serial = timed_run(server.base_url, requests, concurrency=1)
        parallel = timed_run(server.base_url, requests, concurrency=args.concurrency)
        peak = server.max_in_flight
    print(f"requests: {args.requests}, server latency: {args.latency:g}s")
    print(f"concurrency {1:>3}: {serial:7.2f}s")
    print(f"concurrency {args.concurrency:>3}: {parallel:7.2f}s  (peak in flight: {peak})")
    print(f"speedup: {serial / parallel:.1f}x (ideal {min(args.concurrency, args.requests)}x)")


if __name__ == "__main__":
    main()
