"""OpenAIBackend against a real local HTTP server: retries, refusals, errors, cache, secrecy and concurrency."""

from __future__ import annotations

import asyncio
import email.utils
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from sctc_assets.backends.base import BackendUnavailable
from sctc_assets.backends.openai_backend import OpenAIBackend, _redact, _server_delay
from sctc_assets.lib.cache import ResponseCache
from sctc_assets.lib.generation import GenerationRequest, GenerationResult, UsageTotals
from sctc_assets_tests.openai_stub_server import (
    DROP_CONNECTION,
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
