"""Two runs on one model at once: what one of them fails to get but the other answers and stores is no error in its
table, and each run's answer checks describe the table that run wrote, not the other run's.

Real HTTP against the stub server and the real response cache for the first; the real term assets, Parquet IO
manager and checks for the second, the other run interposed at the moment the first run's checks load its table.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

import dagster as dg
import pytest

from sctc_assets.backends.openai_backend import OpenAIBackend
from sctc_assets.lib.cache import ResponseCache
from sctc_assets.lib.generation import GenerationRequest
from sctc_assets_tests.openai_stub_server import StubOpenAIServer, api_error, echo_reply

KEY_ENV = "SCTC_TEST_CONCURRENT_RUNS_KEY"


def _backend(server: StubOpenAIServer) -> OpenAIBackend:
    return OpenAIBackend(model="stub-model", base_url=server.base_url, api_key_env=KEY_ENV, max_retries=0,
                         concurrency=4, timeout_s=30)


def test_an_error_the_other_process_answered_meanwhile_is_the_answer(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    flaky, slow, other = "定义为'0'的是什么？", "定义为'1'的是什么？", "定义为'2'的是什么？"
    requests = [GenerationRequest.user(prompt) for prompt in (flaky, slow, other)]
    with StubOpenAIServer() as server:
        # The first run's call for `flaky` fails (no retries); its `slow` call is still in flight when the second
        # run, which takes the released key over, has answered and stored `flaky`.
        server.script(flaky, api_error(500, "The server had an error while processing your request."))
        server.script(slow, dataclasses.replace(echo_reply(slow), delay_s=3.0))
        first: dict[str, list] = {}
        thread = threading.Thread(target=lambda: first.setdefault(
            "results", _backend(server).generate(requests, cache=ResponseCache(tmp_path / "cache.sqlite"))))
        thread.start()
        try:
            deadline = time.monotonic() + 30
            while server.counts()["scripted"] < 2 and time.monotonic() < deadline:
                time.sleep(0.02)
            # Another process on the same model and cache asks the prompt the first one failed on.
            second = _backend(server).generate(requests[:1], cache=ResponseCache(tmp_path / "cache.sqlite"))
        finally:
            thread.join(timeout=60)
        assert not thread.is_alive()
    assert [result.outcome for result in second] == ["ok"]
    # The first run's table gets the answer the cache holds, not the error it saw.
    assert [(result.outcome, result.text) for result in first["results"]] == \
        [("ok", second[0].text), ("ok", f"echo: {slow}"), ("ok", f"echo: {other}")]
    assert first["results"][0].cached  # paid for by the other process
    # Each prompt was answered once: `flaky` failed once, then the second process asked it.
    kinds = [(request.prompt, request.kind) for request in server.requests]
    assert sorted(kinds) == sorted([(flaky, "scripted"), (flaky, "ok"), (slow, "scripted"), (other, "ok")])
    stored = ResponseCache(tmp_path / "cache.sqlite").count()
    assert stored == 3
