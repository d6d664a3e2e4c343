"""The `openai` backend's client speed, and what two processes on one model pay twice, against a local stub server.

1. Speed: the same N requests at concurrency C against an endpoint with a fixed latency, through the backend, raw
   httpx and the openai SDK, side by side in one run. The server runs in its own process (asyncio), so the client
   has this one to itself. For each: wall time, the fraction of the ideal speed-up (ideal wall = ceil(N/C) ×
   latency), and the client's CPU milliseconds per request (this process's CPU time / N).
2. Two processes: two processes ask the same prompts of one model through one response cache at once, as two
   `sctc run`s would; the server counts requests per distinct body. Prints the requests paid twice as a ratio of
   the prompts (target ≤ concurrency / prompts) and how many of each process's answers differ from the cache's.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

# Run as a plain script from a checkout: make the repository importable without installing it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sctc_assets.backends.openai_backend import OpenAIBackend  # noqa: E402
from sctc_assets.lib.cache import ResponseCache, cache_key  # noqa: E402
from sctc_assets.lib.generation import GenerationRequest  # noqa: E402
from sctc_assets_tests.openai_stub_server import AsyncStubServer  # noqa: E402

CLIENTS = ("backend", "httpx", "sdk")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--requests", type=int, default=640, help="requests per client and latency")
    parser.add_argument("--concurrency", type=int, default=64, help="requests in flight at once")
    parser.add_argument("--latencies", type=float, nargs="+", default=[1.0, 0.2], help="server seconds per request")
    parser.add_argument("--clients", nargs="+", choices=CLIENTS, default=list(CLIENTS))
    parser.add_argument("--two-process-prompts", type=int, default=1320,
                        help="prompts both processes ask in the two-process case (0 skips it)")
    parser.add_argument("--two-process-concurrency", type=int, default=8)
    parser.add_argument("--two-process-latency", type=float, default=0.02)
    return parser.parse_args(argv)


def _body(index: int) -> dict:
    return {"model": "stub-model", "messages": [{"role": "user", "content": f"bench prompt {index}"}],
            "temperature": 0.0, "max_tokens": 512}


def run_backend(base_url: str, count: int, concurrency: int) -> None:
    # The stub ignores authentication; an empty api_key_env makes the backend send the local-server key.
    backend = OpenAIBackend(model="stub-model", base_url=base_url, api_key_env="", concurrency=concurrency)
    results = backend.generate([GenerationRequest.user(f"bench prompt {index}") for index in range(count)])
    failed = [result for result in results if result.outcome != "ok"]
    if failed:
        raise SystemExit(f"backend: {len(failed)} of {count} requests failed: {failed[0].message}")


async def _run_httpx(base_url: str, count: int, concurrency: int) -> None:
    import httpx

    slots = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(timeout=600, limits=httpx.Limits(max_connections=concurrency)) as client:
        async def one(index: int) -> None:
            async with slots:
                response = await client.post(f"{base_url}/chat/completions", json=_body(index),
                                             headers={"Authorization": "Bearer EMPTY"})
                response.raise_for_status()
                response.json()

        await asyncio.gather(*(one(index) for index in range(count)))


async def _run_sdk(base_url: str, count: int, concurrency: int) -> None:
    import openai

    slots = asyncio.Semaphore(concurrency)
    async with openai.AsyncOpenAI(api_key="EMPTY", base_url=base_url, max_retries=0, timeout=600) as client:
        async def one(index: int) -> None:
            async with slots:
                await client.chat.completions.create(**_body(index))

        await asyncio.gather(*(one(index) for index in range(count)))


def run_client(name: str, base_url: str, count: int, concurrency: int) -> None:
    if name == "backend":
        run_backend(base_url, count, concurrency)
    elif name == "httpx":
        asyncio.run(_run_httpx(base_url, count, concurrency))
    else:
        asyncio.run(_run_sdk(base_url, count, concurrency))


def speed(args: argparse.Namespace) -> None:
    import httpx  # noqa: F401  (imported before timing: import cost is not per-request cost)
    import openai  # noqa: F401

    print(f"1. client speed: {args.requests} requests at concurrency {args.concurrency}, server in its own process")
    print(f"{'latency':>8} {'client':>8} {'wall s':>8} {'ideal s':>8} {'of ideal':>9} {'CPU ms/request':>15}")
    for latency in args.latencies:
        ideal = math.ceil(args.requests / args.concurrency) * latency
        with AsyncStubServer(latency_s=latency) as server:
            for name in args.clients:
                run_client(name, server.base_url, min(args.concurrency, args.requests), args.concurrency)  # warm-up
                wall, cpu = time.perf_counter(), time.process_time()
                run_client(name, server.base_url, args.requests, args.concurrency)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                print(f"{latency:>7g}s {name:>8} {wall:>8.2f} {ideal:>8.2f} {ideal / wall:>9.2f} "
                      f"{1000 * cpu / args.requests:>15.2f}")


def _two_process_worker(base_url: str, cache_path: str, prompts: int, concurrency: int, start, results) -> None:
    backend = OpenAIBackend(model="stub-model", base_url=base_url, api_key_env="", concurrency=concurrency,
                            temperature=0.7)
    requests = [GenerationRequest.user(f"shared prompt {index}") for index in range(prompts)]
    cache = ResponseCache(cache_path)
    start.wait()
    answers = backend.generate(requests, cache=cache)
    stored = cache.get_many([cache_key(backend.identity(), request) for request in requests])
    keys = [cache_key(backend.identity(), request) for request in requests]
    disagree = sum(answer.text != stored[key].text for answer, key in zip(answers, keys))
    results.put((sum(not answer.cached for answer in answers), disagree))


def two_processes(args: argparse.Namespace) -> None:
    prompts, concurrency = args.two_process_prompts, args.two_process_concurrency
    context = multiprocessing.get_context("spawn")
    start, results = context.Barrier(2), context.Queue()
    with tempfile.TemporaryDirectory() as folder, AsyncStubServer(latency_s=args.two_process_latency) as server:
        cache_path = str(Path(folder) / "responses.sqlite")
        ResponseCache(cache_path)
        workers = [context.Process(target=_two_process_worker,
                                   args=(server.base_url, cache_path, prompts, concurrency, start, results))
                   for _ in range(2)]
        for worker in workers:
            worker.start()
        outcomes = [results.get(timeout=1800) for _ in workers]
        for worker in workers:
            worker.join(60)
        stats = server.stats()
    paid_twice = stats["requests"] - stats["bodies"]
    print(f"\n2. two processes, one model, one cache: {prompts} prompts, concurrency {concurrency}, "
          f"temperature 0.7 (no seed: every answer differs)")
    print(f"requests sent: {stats['requests']} for {stats['bodies']} distinct prompts; asked by each process: "
          f"{outcomes[0][0]} and {outcomes[1][0]}")
    print(f"paid twice: {paid_twice} = {paid_twice / prompts:.4f} of the prompts "
          f"(target ≤ concurrency / prompts = {concurrency / prompts:.4f})")
    print(f"answers that differ from the cache: {outcomes[0][1]} and {outcomes[1][1]} (of {prompts} each)")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.requests and args.clients:
        speed(args)
    if args.two_process_prompts:
        two_processes(args)


if __name__ == "__main__":
    main()
