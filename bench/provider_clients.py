"""The live path of each API backend (`openai`, `anthropic`, `gemini`) against a loopback stub, through the project's
HTTP client and through the provider's official SDK, side by side.

The same N requests at concurrency C against a stub with a fixed latency (1 s by default), in the API's own shape
(chat completions, Messages, generateContent). The stub runs in its own process (asyncio), so the client has this one
to itself. For each backend and client: wall time, the ratio to ideal (ideal wall = ceil(N/C) × latency; 1.00 is
ideal) and the client's CPU milliseconds per request. `client` is the backend itself (`generate()`: the h11 client,
the work queue, result callbacks, no cache); `sdk` is the SDK's async client with the same concurrency (`openai`,
`anthropic`, `google-genai`), its own retries off. A missing SDK is skipped with a line saying so.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import math
import sys
import time
from pathlib import Path

# Run as a plain script from a checkout: make the repository importable without installing it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sctc_assets.backends.anthropic_backend import AnthropicBackend  # noqa: E402
from sctc_assets.backends.gemini_backend import GeminiBackend  # noqa: E402
from sctc_assets.backends.openai_backend import OpenAIBackend  # noqa: E402
from sctc_assets.lib.generation import GenerationRequest  # noqa: E402
from sctc_assets_tests.openai_stub_server import AsyncStubServer  # noqa: E402

BACKENDS = {"openai": OpenAIBackend, "anthropic": AnthropicBackend, "gemini": GeminiBackend}
SDK_MODULES = {"openai": "openai", "anthropic": "anthropic", "gemini": "google.genai"}
SDK_PACKAGES = {"openai": "openai", "anthropic": "anthropic", "gemini": "google-genai"}
CLIENTS = ("client", "sdk")
MODEL = "stub-model"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--requests", type=int, default=640, help="requests per backend and client")
    parser.add_argument("--concurrency", type=int, default=64, help="requests in flight at once")
    parser.add_argument("--latency", type=float, default=1.0, help="server seconds per request")
    parser.add_argument("--backends", nargs="+", choices=sorted(BACKENDS), default=list(BACKENDS))
    parser.add_argument("--clients", nargs="+", choices=CLIENTS, default=list(CLIENTS))
    return parser.parse_args(argv)


def _prompt(index: int) -> str:
    return f"bench prompt {index}"


def run_client(backend: str, base_url: str, count: int, concurrency: int) -> None:
    # The stub ignores authentication; an empty api_key_env makes the backend send the local-server key.
    model = BACKENDS[backend](model=MODEL, base_url=base_url, api_key_env="", concurrency=concurrency,
                              max_retries=0, timeout_s=600)
    results = model.generate([GenerationRequest.user(_prompt(index)) for index in range(count)])
    failed = [result for result in results if result.outcome != "ok"]
    if failed:
        raise SystemExit(f"{backend}: {len(failed)} of {count} requests failed: {failed[0].message}")


async def _sdk_calls(one, count: int, concurrency: int) -> None:
    slots = asyncio.Semaphore(concurrency)

    async def bounded(index: int) -> None:
        async with slots:
            await one(index)

    await asyncio.gather(*(bounded(index) for index in range(count)))


async def _run_sdk(backend: str, base_url: str, count: int, concurrency: int) -> None:
    if backend == "openai":
        import openai

        async with openai.AsyncOpenAI(api_key="EMPTY", base_url=base_url, max_retries=0, timeout=600) as client:
            await _sdk_calls(lambda index: client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": _prompt(index)}], temperature=0.0,
                max_tokens=512), count, concurrency)
    elif backend == "anthropic":
        import anthropic

        async with anthropic.AsyncAnthropic(api_key="EMPTY", base_url=base_url, max_retries=0,
                                            timeout=600) as client:
            # The anthropic SDK 2.x has no sampling parameters (API version 2026-10-21 refuses them).
            await _sdk_calls(lambda index: client.messages.create(
                model=MODEL, messages=[{"role": "user", "content": _prompt(index)}], max_tokens=512),
                count, concurrency)
    else:
        from google import genai
        from google.genai import types

        client = genai.Client(api_key="EMPTY", http_options=types.HttpOptions(base_url=base_url,
                                                                              api_version="v1beta", timeout=600_000))
        config = types.GenerateContentConfig(temperature=0.0, max_output_tokens=512)
        await _sdk_calls(lambda index: client.aio.models.generate_content(
            model=MODEL, contents=_prompt(index), config=config), count, concurrency)


def run(backend: str, client: str, base_url: str, count: int, concurrency: int) -> None:
    if client == "client":
        run_client(backend, base_url, count, concurrency)
    else:
        asyncio.run(_run_sdk(backend, base_url, count, concurrency))


def sdk_available(backend: str) -> bool:
    try:
        return importlib.util.find_spec(SDK_MODULES[backend]) is not None
    except ModuleNotFoundError:  # google.genai's parent package `google` is absent
        return False


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    ideal = math.ceil(args.requests / args.concurrency) * args.latency
    print(f"{args.requests} requests at concurrency {args.concurrency}, server latency {args.latency:g}s in its own "
          f"process; ideal wall {ideal:.2f}s")
    print(f"{'backend':>10} {'client':>7} {'wall s':>8} {'of ideal':>9} {'CPU ms/request':>15}")
    for backend in args.backends:
        with AsyncStubServer(latency_s=args.latency, api=backend) as server:
            for client in args.clients:
                if client == "sdk" and not sdk_available(backend):
                    print(f"{backend:>10} {client:>7}  skipped: the {SDK_PACKAGES[backend]} package is not "
                          f"installed (pip install {SDK_PACKAGES[backend]})")
                    continue
                if client == "sdk":
                    importlib.import_module(SDK_MODULES[backend])  # import cost is not per-request cost
                run(backend, client, server.base_url, min(args.concurrency, args.requests), args.concurrency)
                server.reset()
                wall, cpu = time.perf_counter(), time.process_time()
                run(backend, client, server.base_url, args.requests, args.concurrency)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                answered = server.stats()["requests"]
                if answered != args.requests:
                    raise SystemExit(f"{backend} {client}: the stub answered {answered} of {args.requests} requests")
                print(f"{backend:>10} {client:>7} {wall:>8.2f} {ideal / wall:>9.2f} "
                      f"{1000 * cpu / args.requests:>15.2f}")


if __name__ == "__main__":
    main()
