"""OpenAIBackend against a real local HTTP server: retries, refusals, errors, cache, secrecy and concurrency."""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import multiprocessing
import os
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from sctc_assets.backends.base import BackendUnavailable, GenerationHalted
from sctc_assets.backends.openai_backend import OpenAIBackend, _redact, _server_delay
from sctc_assets.lib import interrupt
from sctc_assets.lib.cache import ResponseCache, cache_key
from sctc_assets.lib.generation import GenerationRequest, GenerationResult, UsageTotals
from sctc_assets.resources.model_registry import ModelRegistryResource
from sctc_assets_tests.openai_stub_server import (
    DROP_CONNECTION,
    FaultPlan,
    StubOpenAIServer,
    StubReply,
    api_error,
    completion,
    garbled,
)

KEY_ENV = "SCTC_TEST_OPENAI_KEY"
FAKE_KEY = "sk-test-Zq8vX3kP0wLr7Nn2-DO-NOT-LEAK"
PROXY_PAGE = garbled(b"<html><body>Gateway login required</body></html>", "text/html")
CUT_SHORT = garbled(b'{"id": "chatcmpl-1", "object": "chat.completion", "choi')
NO_CHOICES_FIELD = garbled(b'{"id": "chatcmpl-1", "object": "chat.completion"}')
EMPTY_CHOICE = garbled(b'{"id": "chatcmpl-1", "object": "chat.completion", "choices": [{}]}')
AZURE_FILTER_MESSAGE = (
    "The response was filtered due to the prompt triggering Azure OpenAI's content management policy."
    " Please modify your prompt and retry."
)


@pytest.fixture(autouse=True)
def fake_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, FAKE_KEY)


@pytest.fixture
def server() -> Iterator[StubOpenAIServer]:
    with StubOpenAIServer() as stub:
        yield stub


def make_backend(server: StubOpenAIServer, **overrides: Any) -> OpenAIBackend:
    settings: dict[str, Any] = {
        "model": "stub-model",
        "base_url": server.base_url,
        "api_key_env": KEY_ENV,
        "backoff_initial_s": 0.01,
        "backoff_max_s": 2.0,
        "timeout_s": 5.0,
        **overrides,
    }
    return OpenAIBackend(**settings)


def ask(prompt: str) -> GenerationRequest:
    return GenerationRequest.user(prompt)


def test_rate_limit_waits_for_retry_after(server: StubOpenAIServer) -> None:
    server.script("busy", api_error(429, "slow down", code="rate_limit_exceeded", headers={"Retry-After": "1"}))

    [result] = make_backend(server).generate([ask("busy")])

    assert result.outcome == "ok" and result.text == "echo: busy"
    first, second = server.requests
    assert second.at - first.at >= 0.9


@pytest.mark.parametrize("failure", [api_error(500, "internal error"), DROP_CONNECTION], ids=["http-500", "dropped"])
def test_transient_failure_is_retried(server: StubOpenAIServer, failure: Any) -> None:
    server.script("flaky", failure)

    [result] = make_backend(server).generate([ask("flaky")])

    assert result.outcome == "ok" and result.text == "echo: flaky"
    assert server.prompts_seen() == ["flaky", "flaky"]


def test_retries_spent_give_an_error_result(server: StubOpenAIServer) -> None:
    server.script("down", *[api_error(502, "bad gateway")] * 3)

    [result] = make_backend(server, max_retries=2).generate([ask("down")])

    assert result.outcome == "error" and result.text is None
    assert "502" in result.message and "3 attempts" in result.message
    assert len(server.requests) == 3


def test_no_retry_when_max_retries_is_zero(server: StubOpenAIServer) -> None:
    server.script("unavailable", api_error(503, "overloaded"))

    [result] = make_backend(server, max_retries=0).generate([ask("unavailable")])

    assert result.outcome == "error" and "503" in result.message
    assert len(server.requests) == 1


def test_azure_content_filter_is_a_refusal(server: StubOpenAIServer) -> None:
    body = {"error": {"code": "content_filter", "message": AZURE_FILTER_MESSAGE, "param": "prompt", "status": 400}}
    server.script("sensitive", StubReply(400, body))

    [result] = make_backend(server).generate([ask("sensitive")])

    assert result.outcome == "refusal" and result.text is None
    assert result.message == AZURE_FILTER_MESSAGE
    assert len(server.requests) == 1


def test_filtered_completion_is_a_refusal_that_keeps_its_text(server: StubOpenAIServer) -> None:
    server.script("half", completion("partial ans", finish_reason="content_filter"))

    [result] = make_backend(server).generate([ask("half")])

    assert (result.outcome, result.text, result.finish_reason) == ("refusal", "partial ans", "content_filter")


def test_other_bad_request_is_an_error_without_retry(server: StubOpenAIServer) -> None:
    server.script("huge", api_error(400, "maximum context length is 8192 tokens", code="context_length_exceeded"))

    [result] = make_backend(server).generate([ask("huge")])

    assert result.outcome == "error" and "400" in result.message and "context length" in result.message
    assert len(server.requests) == 1


def test_garbled_200_bodies_are_retried(server: StubOpenAIServer) -> None:
    server.script("garbled", PROXY_PAGE, CUT_SHORT, NO_CHOICES_FIELD, EMPTY_CHOICE)

    [result] = make_backend(server, max_retries=4).generate([ask("garbled")])

    assert result.outcome == "ok" and result.text == "echo: garbled"
    assert len(server.requests) == 5


@pytest.mark.parametrize("reply", [PROXY_PAGE, CUT_SHORT, NO_CHOICES_FIELD, EMPTY_CHOICE])
def test_garbled_200_body_after_retries_is_an_uncached_error(
    server: StubOpenAIServer, tmp_path: Path, reply: StubReply
) -> None:
    cache = ResponseCache(tmp_path / "responses.sqlite")
    server.script("garbled", reply, reply)
    backend = make_backend(server, max_retries=1)

    [first] = backend.generate([ask("garbled"), ask("fine")], cache=cache)[:1]
    [second] = backend.generate([ask("garbled")], cache=cache)

    assert first.outcome == "error" and first.text is None
    assert server.base_url in first.message and "2 attempts" in first.message
    assert (second.outcome, second.cached) == ("ok", False)  # the error was not cached: asked again
    assert cache.count() == 2


def test_usage_is_summed_and_priced(server: StubOpenAIServer) -> None:
    server.script("a", completion("x", prompt_tokens=1000, completion_tokens=200))
    server.script("b", completion("y", prompt_tokens=3000, completion_tokens=800))
    backend = make_backend(server, price_input_per_mtok=2.5, price_output_per_mtok=10.0)

    results = backend.generate([ask("a"), ask("b")])

    totals = UsageTotals()
    for result in results:
        assert result.outcome == "ok" and result.latency_s is not None
        totals.add(result)
    assert (totals.input_tokens, totals.output_tokens) == (4000, 1000)
    assert totals.cost(*backend.pricing()) == pytest.approx((4000 * 2.5 + 1000 * 10.0) / 1e6)


def test_missing_usage_gives_no_token_counts(server: StubOpenAIServer) -> None:
    server.script("bare", completion(None, prompt_tokens=None, completion_tokens=None))

    [result] = make_backend(server).generate([ask("bare")])

    assert (result.text, result.input_tokens, result.output_tokens) == ("", None, None)


@pytest.mark.parametrize("status", [401, 403, 404])
def test_auth_and_missing_model_stop_the_backend(server: StubOpenAIServer, status: int) -> None:
    # OpenAI's real 401 text quotes the rejected key; the exception must not carry it on.
    server.script("p", api_error(status, f"Incorrect API key provided: {FAKE_KEY}"))

    with pytest.raises(BackendUnavailable) as raised:
        make_backend(server).generate([ask("p")])

    message = str(raised.value)
    assert str(status) in message and "stub-model" in message and server.base_url in message
    assert FAKE_KEY not in message


def test_missing_key_variable_is_reported(server: StubOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV)

    with pytest.raises(BackendUnavailable, match=KEY_ENV):
        make_backend(server).generate([ask("p")])
    assert server.requests == []


def test_key_from_a_crlf_env_file_is_trimmed(server: StubOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, f" {FAKE_KEY}\r\n")

    [result] = make_backend(server).generate([ask("p")])

    assert result.outcome == "ok"
    assert server.requests[0].authorization == f"Bearer {FAKE_KEY}"


@pytest.mark.parametrize("bad", [f"{FAKE_KEY}\r{FAKE_KEY}", f"{FAKE_KEY}\x1b", f"{FAKE_KEY}é", "\r\n"])
def test_key_with_control_characters_is_refused_without_quoting_it(
    server: StubOpenAIServer, monkeypatch: pytest.MonkeyPatch, bad: str
) -> None:
    monkeypatch.setenv(KEY_ENV, bad)

    with pytest.raises(BackendUnavailable, match=KEY_ENV) as raised:
        make_backend(server).generate([ask("p")])

    assert FAKE_KEY not in str(raised.value) and repr(bad)[1:-1] not in str(raised.value)
    assert server.requests == []


def test_redaction_covers_bearer_headers_and_escaped_keys() -> None:
    refused = "LocalProtocolError: Illegal header value b'Bearer sk-SECRET123\\r'"
    quoted = f"key was {'sk-back' + chr(92) + 'slash'!r} and {b'sk-back' + bytes([92]) + b'slash'!r}"

    assert "SECRET123" not in _redact(refused, "sk-other")
    assert "Bearer [redacted]" in _redact(refused, "")
    assert "back" not in _redact(quoted, "sk-back" + chr(92) + "slash")
    assert _redact("Bearer EMPTY is fine", "EMPTY") == "Bearer [redacted] is fine"


def test_empty_key_variable_name_means_a_local_server(server: StubOpenAIServer) -> None:
    [result] = make_backend(server, api_key_env="").generate([ask("p")])

    assert result.outcome == "ok"
    assert server.requests[0].authorization == "Bearer EMPTY"


def test_request_carries_the_configured_parameters(server: StubOpenAIServer) -> None:
    backend = make_backend(
        server, system_prompt="Be brief.", seed=7, max_tokens=64, extra_body={"top_k": 20}, temperature=0.3
    )
    own_system = GenerationRequest.user("q2", system="Custom.")

    backend.generate([ask("q1"), own_system])

    bodies = {request.prompt: request.body for request in server.requests}
    assert bodies["q1"]["messages"][0] == {"role": "system", "content": "Be brief."}
    assert bodies["q2"]["messages"] == [dict(message) for message in own_system.messages]
    assert {key: bodies["q1"][key] for key in ("model", "seed", "max_tokens", "top_k", "temperature")} == {
        "model": "stub-model", "seed": 7, "max_tokens": 64, "top_k": 20, "temperature": 0.3,
    }
    assert "top_p" not in bodies["q1"]


def test_identity_names_what_changes_answers_and_nothing_else(server: StubOpenAIServer) -> None:
    backend = make_backend(server, base_url=server.base_url + "/", seed=3)

    identity = backend.identity()

    assert identity == {
        "backend": "openai",
        "endpoint": server.base_url,
        "model": "stub-model",
        "params": {
            "temperature": 0.0, "max_tokens": 512, "top_p": None, "seed": 3, "system_prompt": None, "extra_body": None,
        },
    }
    assert make_backend(server, concurrency=1, max_retries=0).identity() == make_backend(server).identity()


def test_cache_serves_repeats_and_keeps_refusals_but_not_errors(server: StubOpenAIServer, tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "responses.sqlite")
    server.script("filtered", api_error(400, AZURE_FILTER_MESSAGE, code="content_filter"))
    server.script("outage", api_error(503, "overloaded"))
    requests = [ask("fine"), ask("filtered"), ask("outage")]
    backend = make_backend(server, max_retries=0)

    first = backend.generate(requests, cache=cache)
    seen_after_first = len(server.requests)
    second = backend.generate(requests, cache=cache)
    third = backend.generate(requests, cache=cache)

    assert [result.outcome for result in first] == ["ok", "refusal", "error"]
    # Only the errored request went out again, and its answer now is cached like the rest.
    assert server.prompts_seen()[seen_after_first:] == ["outage"]
    assert [(result.outcome, result.cached) for result in second] == [("ok", True), ("refusal", True), ("ok", False)]
    assert all(result.cached for result in third)
    assert len(server.requests) == seen_after_first + 1


class Interrupted(Exception):
    pass


def test_interrupted_run_pays_for_nothing_twice(server: StubOpenAIServer, tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "responses.sqlite")
    requests = [ask(f"item {index}") for index in range(10)]
    backend = make_backend(server, concurrency=1)

    def stop_after_four(done: int, total: int) -> None:
        if done >= 4:
            raise Interrupted

    with pytest.raises(Interrupted):
        backend.generate(requests, cache=cache, progress=stop_after_four)
    first_run_sent, cached = len(server.requests), cache.count()
    results = backend.generate(requests, cache=cache)

    assert cached == 4 and first_run_sent - cached <= 1
    assert len(server.requests) == len(requests) + (first_run_sent - cached)
    answered_before = set(server.prompts_seen()[:cached])
    assert answered_before.isdisjoint(server.prompts_seen()[first_run_sent:])
    assert [result.text for result in results] == [f"echo: item {index}" for index in range(10)]


def test_api_key_is_stored_nowhere(server: StubOpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "responses.sqlite"
    cache = ResponseCache(path)
    server.script("filtered", api_error(400, AZURE_FILTER_MESSAGE, code="content_filter"))
    server.script("echoing", api_error(500, f"upstream rejected Authorization: Bearer {FAKE_KEY}"))
    backend = make_backend(server, max_retries=0)

    results = backend.generate([ask("fine"), ask("filtered"), ask("echoing")], cache=cache)
    cache.close()

    assert server.requests[0].authorization == f"Bearer {FAKE_KEY}"
    assert [result.outcome for result in results] == ["ok", "refusal", "error"]
    stored = b"".join(file.read_bytes() for file in tmp_path.glob("responses.sqlite*"))
    assert FAKE_KEY.encode() not in stored
    assert FAKE_KEY not in repr(results) + repr(backend.identity()) + repr(backend)


def test_concurrency_limits_requests_in_flight(tmp_path: Path) -> None:
    with StubOpenAIServer(latency_s=0.2) as slow:
        results = make_backend(slow, concurrency=4).generate([ask(f"c{index}") for index in range(8)])

    assert all(result.outcome == "ok" for result in results)
    assert slow.max_in_flight == 4


def test_generate_works_inside_a_running_event_loop(server: StubOpenAIServer) -> None:
    backend = make_backend(server)

    async def notebook_cell() -> list[GenerationResult]:
        return backend.generate([ask("from a notebook")])

    [result] = asyncio.run(notebook_cell())

    assert result.text == "echo: from a notebook"


def test_server_delay_headers() -> None:
    in_five_seconds = email.utils.formatdate(time.time() + 5, usegmt=True)

    assert _server_delay({"retry-after-ms": "250", "retry-after": "9"}) == pytest.approx(0.25)
    assert _server_delay({"retry-after": "1.5"}) == 1.5
    assert 3.0 <= _server_delay({"retry-after": in_five_seconds}) <= 5.0
    assert _server_delay({"retry-after": "soon"}) is None
    assert _server_delay({}) is None


def test_waits_are_capped(server: StubOpenAIServer) -> None:
    backend = make_backend(server, backoff_initial_s=1.0, backoff_max_s=4.0)

    assert backend._retry_delay(0, server_delay=30.0) == 4.0
    assert 1.0 <= backend._retry_delay(0, server_delay=None) <= 1.1
    assert 4.0 <= backend._retry_delay(10, server_delay=None) <= 4.4


# --- trials, seeds and what the API reports -----------------------------------------------------------------------


def test_trials_send_base_seed_plus_trial_and_rows_record_it(server: StubOpenAIServer, tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "responses.sqlite")
    requests = [GenerationRequest.user("q", trial=trial) for trial in range(3)]

    results = make_backend(server, seed=100, temperature=0.7).generate(requests, cache=cache)

    assert sorted(request.body["seed"] for request in server.requests) == [100, 101, 102]
    assert len({request.body_key for request in server.requests}) == 3  # three distinct request bodies
    assert [result.seed for result in results] == [100, 101, 102]
    assert len({result.text for result in results}) == 3  # a seed-honouring server gives three samples
    again = make_backend(server, seed=100, temperature=0.7).generate(requests, cache=cache)
    assert [(result.seed, result.cached) for result in again] == [(100, True), (101, True), (102, True)]


def test_without_a_base_seed_no_seed_is_sent(server: StubOpenAIServer) -> None:
    results = make_backend(server, temperature=0.7).generate([GenerationRequest.user("q", trial=t) for t in (0, 1)])

    assert all("seed" not in request.body for request in server.requests)
    assert [result.seed for result in results] == [None, None]


def test_served_model_and_fingerprint_are_kept(server: StubOpenAIServer, tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "responses.sqlite")
    dated = completion("x", model="gpt-4o-mini-2024-07-18")
    dated.body["system_fingerprint"] = "fp_44709d6fcb"
    server.script("p", dated)

    [fresh] = make_backend(server).generate([ask("p")], cache=cache)
    [cached] = make_backend(server).generate([ask("p")], cache=cache)

    for result in (fresh, cached):
        assert (result.served_model, result.system_fingerprint) == ("gpt-4o-mini-2024-07-18", "fp_44709d6fcb")


def test_a_query_in_the_base_url_is_kept(server: StubOpenAIServer) -> None:
    [result] = make_backend(server, base_url=f"{server.base_url}?api-version=2024-10-21").generate([ask("p")])

    assert result.outcome == "ok" and server.queries == ["api-version=2024-10-21"]


def test_headers_are_sent_but_do_not_change_the_identity(server: StubOpenAIServer) -> None:
    backend = make_backend(server, headers={"HTTP-Referer": "https://example.org", "X-Title": "sctc"})

    backend.generate([ask("p")])

    assert backend.identity() == make_backend(server).identity()
    assert server.requests[0].authorization == f"Bearer {FAKE_KEY}"


def test_hang_past_the_timeout_is_retried(tmp_path: Path) -> None:
    with StubOpenAIServer(faults=FaultPlan(schedule={0: "hang"}, hang_s=1.5)) as hanging:
        [result] = make_backend(hanging, timeout_s=0.3).generate([ask("slow")])

        assert result.outcome == "ok"
        assert [request.kind for request in hanging.requests] == ["hang", "ok"]


def test_fault_plan_is_reproducible_and_counts_per_body() -> None:
    plan = FaultPlan(rates={"rate_limit": 0.3, "content_filter": 0.1}, seed=3)
    draws = [plan.draw(number, f"body{number % 50}", number // 50) for number in range(500)]
    assert draws == [plan.draw(number, f"body{number % 50}", number // 50) for number in range(500)]
    refused = {number % 50 for number, kind in enumerate(draws) if kind == "content_filter"}
    # a content filter refuses a body on every attempt; rate limits come and go between attempts
    assert all(draws[body + 50 * attempt] == "content_filter" for body in refused for attempt in range(10))
    assert 0.2 < draws.count("rate_limit") / 500 < 0.4
    with pytest.raises(ValueError, match="unknown fault kind"):
        FaultPlan(rates={"meteor": 1.0})


# --- halting and the budget ---------------------------------------------------------------------------------------


def test_a_stop_request_lets_requests_in_flight_finish_and_stores_them(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "responses.sqlite")
    requests = [ask(f"item {index}") for index in range(40)]

    def stop_after_six(done: int, total: int) -> None:
        if done >= 6:
            interrupt.request_stop("interrupted (Ctrl-C)")

    try:
        with StubOpenAIServer(latency_s=0.05) as slow:
            with pytest.raises(GenerationHalted) as halted:
                make_backend(slow, concurrency=4).generate(requests, cache=cache, progress=stop_after_six)
            sent = len(slow.requests)
    finally:
        interrupt.clear_stop()

    # the requests in flight when the stop came were answered and stored; nothing new started after it
    assert 6 <= sent <= 6 + 4 and cache.count() == sent
    assert (halted.value.answered, halted.value.remaining) == (sent, 40 - sent)


def test_max_cost_stops_an_api_model_and_a_rerun_continues(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache_path = tmp_path / "responses.sqlite"
    with StubOpenAIServer() as stub:
        registry = tmp_path / "models.yaml"
        registry.write_text(
            "models:\n"
            f"  api: {{backend: openai, model: stub-model, base_url: '{stub.base_url}', api_key_env: {KEY_ENV},"
            " concurrency: 2, price_input_per_mtok: 1000.0, price_output_per_mtok: 1000.0}\n", encoding="utf-8")
        # echo answers of "prompt NN" cost (9 + 15) tokens × $1000 per million = $0.024 each
        requests = [ask(f"prompt {index:02d}") for index in range(20)]
        monkeypatch.setenv("SCTC_BUDGET_SCOPE", "run-a")
        resource = ModelRegistryResource(registry_path=str(registry), cache_path=str(cache_path), max_cost_usd=0.1)
        with pytest.raises(GenerationHalted, match=r"max_cost_usd \$0.1") as halted:
            resource.backend("api").generate(requests, cache=resource.cache())
        spent = resource.cache().ledger("run-a")["api"]
        # at most `concurrency` calls were in flight when the limit was reached
        assert 5 <= spent.calls <= 5 + 2 and spent.cost_usd >= 0.1 and len(stub.requests) == spent.calls
        assert halted.value.answered == spent.calls

        monkeypatch.setenv("SCTC_BUDGET_SCOPE", "run-b")
        results = ModelRegistryResource(registry_path=str(registry), cache_path=str(cache_path),
                                        max_cost_usd=10.0).backend("api").generate(requests, cache=resource.cache())
        assert sum(result.cached for result in results) == spent.calls and len(stub.requests) == 20


# --- two processes on one model -----------------------------------------------------------------------------------


def _generate_in_process(base_url: str, cache_path: str, prompts: list[str], queue: Any, start: Any) -> None:
    os.environ[KEY_ENV] = FAKE_KEY
    backend = OpenAIBackend(model="stub-model", base_url=base_url, api_key_env=KEY_ENV, concurrency=4,
                            temperature=0.8, seed=1)
    start.wait(120)  # both processes are up: they start together, as two `sctc run`s on one model would overlap
    results = backend.generate([GenerationRequest.user(prompt, trial=1) for prompt in prompts],
                               cache=ResponseCache(cache_path))
    queue.put([(result.text, result.cached) for result in results])


def test_two_processes_on_one_model_split_the_work_and_agree_with_the_cache(tmp_path: Path) -> None:
    prompts = [f"shared {index}" for index in range(60)]
    cache_path = str(tmp_path / "responses.sqlite")
    ResponseCache(cache_path)
    context = multiprocessing.get_context("spawn")
    queue, start = context.Queue(), context.Barrier(2)
    with StubOpenAIServer(latency_s=0.1) as stub:
        workers = [context.Process(target=_generate_in_process,
                                   args=(stub.base_url, cache_path, prompts, queue, start)) for _ in range(2)]
        for worker in workers:
            worker.start()
        tables = [queue.get(timeout=120) for _ in workers]
        for worker in workers:
            worker.join(30)
        answered = stub.answered_per_body()

    assert sorted(answered.values()) == [1] * 60  # every prompt paid for once: none twice
    assert all(0 < sum(not cached for _, cached in table) < 60 for table in tables)  # both did part of the work
    stored = ResponseCache(cache_path)
    backend = OpenAIBackend(model="stub-model", base_url=stub.base_url, api_key_env=KEY_ENV, temperature=0.8, seed=1)
    from_cache = [stored.get(cache_key(backend.identity(), dataclasses.replace(
        GenerationRequest.user(prompt, trial=1), seed=2))).text for prompt in prompts]
    assert [text for text, _ in tables[0]] == [text for text, _ in tables[1]] == from_cache


# --- proxies ------------------------------------------------------------------------------------------------------


def test_http_proxy_from_the_environment_is_used_unless_no_proxy_says_otherwise(
    server: StubOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The stub doubles as the proxy: a request for an unreachable host reaches it in absolute form.
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", server.base_url.removesuffix("/v1"))
    monkeypatch.setenv("http_proxy", server.base_url.removesuffix("/v1"))
    far = "http://api.example.invalid:8080/v1"

    [result] = OpenAIBackend(model="stub-model", base_url=far, api_key_env=KEY_ENV, timeout_s=5).generate([ask("p")])

    assert result.outcome == "ok" and server.proxied == [f"{far}/chat/completions"]
    monkeypatch.setenv("NO_PROXY", "api.example.invalid")
    monkeypatch.setenv("no_proxy", "api.example.invalid")
    [direct] = OpenAIBackend(model="stub-model", base_url=far, api_key_env=KEY_ENV, timeout_s=5,
                             max_retries=0).generate([ask("q")])
    assert direct.outcome == "error" and "connection error" in direct.message and len(server.proxied) == 1


def test_a_proxy_refusing_the_https_tunnel_is_a_clear_error(server: StubOpenAIServer,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", server.base_url.removesuffix("/v1"))
    monkeypatch.setenv("https_proxy", server.base_url.removesuffix("/v1"))
    backend = OpenAIBackend(model="m", base_url="https://api.example.invalid/v1", api_key_env=KEY_ENV, max_retries=0)

    [result] = backend.generate([ask("p")])

    assert result.outcome == "error" and "refused the tunnel" in result.message and "403" in result.message
    assert server.proxied == ["CONNECT api.example.invalid:443"]
