"""`GeminiBatchClient` against the Batch API stub (`gemini_batch_stub.py`): PENDING → RUNNING → SUCCEEDED / EXPIRED /
CANCELLED / FAILED one poll at a time, inline and file results, every line fate, the faults of issue #40 (expired
with partial results, cancelled by the provider, per-line errors, a responses file cut mid-line, an unknown key,
429/5xx on create and poll, a lost create answer), and the key kept out of every error. Counts come from the stub's
log."""

from __future__ import annotations

import hashlib

import pytest

from sctc_assets.backends import BackendUnavailable
from sctc_assets.backends.batch_gemini import GeminiBatchClient
from sctc_assets.backends.gemini_backend import GeminiBackend
from sctc_assets.lib.batches import BatchApiError, BatchLine
from sctc_assets.lib.generation import GenerationRequest
from sctc_assets_tests.gemini_batch_stub import StubGeminiBatches
from sctc_assets_tests.provider_batch_stub import BatchPlan, poll_until_ended

KEY_ENV = "SCTC_TEST_BATCH_KEY"
KEY = "AIza-gemini-batch-secret-42"


@pytest.fixture
def stub(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    with StubGeminiBatches(api_key=KEY) as server:
        yield server


def backend(stub: StubGeminiBatches, **settings) -> GeminiBackend:
    fields = {"model": "gemini-stub", "base_url": stub.base_url, "api_key_env": KEY_ENV, "backoff_initial_s": 0.0,
              "backoff_max_s": 0.0, "max_retries": 3, "timeout_s": 10.0, "seed": 7, **settings}
    return GeminiBackend(**fields)


def line(prompt: str, trial: int = 0) -> BatchLine:
    return BatchLine(hashlib.sha256(f"{prompt}/{trial}".encode()).hexdigest(),
                     GenerationRequest.user(prompt, trial=trial, system="be brief"))



def outcomes(results) -> list[str]:
    return [result.result.outcome if result.result else f"retry: {result.retry}" for result in results]


@pytest.mark.parametrize("output", ["inline", "file"])
def test_a_batch_sends_the_sync_request_moves_through_the_states_and_reads_every_fate(stub, output):
    model = backend(stub)
    stub.plan(BatchPlan(output=output))
    stub.script_line("refuse me", "refusal")
    stub.script_line("bad one", "invalid")
    stub.script_line("flaky", "server_error")
    stub.script_line("busy", "rate_limited")
    lines = [line(prompt) for prompt in ("hello", "refuse me", "bad one", "flaky", "busy")]
    with model.batch_client() as client:
        provider_id = client.submit(lines, "sctc-000000000001")
        assert provider_id == "batches/stub000000" and stub.created[0].label == "sctc-000000000001"
        assert stub.created[0].model == "models/gemini-stub"
        assert [request for _, request in stub.created[0].lines] == \
            [model._request_body(item.request) for item in lines]
        assert poll_until_ended(client, provider_id) == ["BATCH_STATE_RUNNING", "BATCH_STATE_SUCCEEDED"]
        status = client.status(provider_id)
        results = {result.custom_id: result for result in client.results(provider_id)}
    assert status.counts == {"total": 5, "succeeded": 2, "failed": 3, "pending": 0} and status.message is None
    hello, refused, bad, flaky, busy = (results[item.custom_id] for item in lines)
    assert hello.result.outcome == "ok" and hello.result.text == "echo: hello" and hello.retry is None
    assert hello.result.input_tokens == len("hello") and hello.result.served_model == "gemini-stub"
    assert refused.result.outcome == "refusal" and "blocked" in refused.result.message
    assert bad.result.outcome == "error" and bad.retry is None
    assert flaky.result is None and "code 13" in flaky.retry
    assert busy.result is None and "code 8" in busy.retry
    assert stub.calls["results"] == (1 if output == "file" else 0) and stub.paid_twice() == 0


def test_a_request_the_api_refuses_is_a_final_error_for_that_line(stub):
    model = backend(stub)
    empty = BatchLine("0" * 64, GenerationRequest(({"role": "system", "content": "only a system prompt"},)))
    with model.batch_client() as client:
        provider_id = client.submit([empty, line("fine")], "sctc-x")
        poll_until_ended(client, provider_id)
        assert outcomes(client.results(provider_id)) == ["error", "ok"]


@pytest.mark.parametrize("output", ["inline", "file"])
def test_an_expired_batch_lists_what_it_finished(stub, output):
    stub.plan(BatchPlan(end="expired", answered=1, running_polls=2, output=output))
    lines = [line(f"p{number}") for number in range(3)]
    with backend(stub).batch_client() as client:
        provider_id = client.submit(lines, "sctc-x")
        assert poll_until_ended(client, provider_id) == ["BATCH_STATE_RUNNING", "BATCH_STATE_RUNNING",
                                                "BATCH_STATE_EXPIRED"]
        results = list(client.results(provider_id))
    assert [result.custom_id for result in results] == [lines[0].custom_id] and outcomes(results) == ["ok"]


def test_a_batch_cancelled_by_the_provider_and_one_failed_as_a_whole_give_no_lines(stub):
    stub.plan(BatchPlan(end="cancelled"), BatchPlan(end="failed"))
    with backend(stub).batch_client() as client:
        cancelled = client.submit([line("a")], "sctc-1")
        failed = client.submit([line("b")], "sctc-2")
        assert poll_until_ended(client, cancelled) == ["BATCH_STATE_RUNNING", "BATCH_STATE_CANCELLED"]
        assert poll_until_ended(client, failed)[-1] == "BATCH_STATE_FAILED"
        assert "internal error" in client.status(failed).message
        assert list(client.results(cancelled)) == [] and list(client.results(failed)) == []
    assert stub.answered == {}


def test_cancel_asks_the_api_and_the_batch_ends_cancelled(stub):
    with backend(stub).batch_client() as client:
        provider_id = client.submit([line("a")], "sctc-x")
        client.cancel(provider_id)
        assert poll_until_ended(client, provider_id) == ["BATCH_STATE_CANCELLED"]
    assert stub.calls["cancel"] == 1


def test_a_responses_file_cut_mid_line_ends_early_and_an_unknown_key_is_passed_on(stub):
    stub.plan(BatchPlan(output="file", cut_results=True), BatchPlan(unknown_ids=1))
    lines = [line(f"p{number}") for number in range(3)]
    with backend(stub).batch_client() as client:
        cut = client.submit(lines, "sctc-1")
        unknown = client.submit(lines, "sctc-2")
        poll_until_ended(client, cut)
        poll_until_ended(client, unknown)
        assert [result.custom_id for result in client.results(cut)] == [item.custom_id for item in lines[:2]]
        seen = [result.custom_id for result in client.results(unknown)]
    assert len(seen) == 4 and seen[-1] not in {item.custom_id for item in lines}


def test_429_and_500_on_create_and_poll_are_retried_without_a_second_batch(stub):
    stub.fail_next("create", "500", "429")
    stub.fail_next("poll", "429", "500")
    with backend(stub).batch_client() as client:
        provider_id = client.submit([line("a")], "sctc-x")
        assert poll_until_ended(client, provider_id) == ["BATCH_STATE_RUNNING", "BATCH_STATE_SUCCEEDED"]
        assert client.retries == 4
    assert stub.calls["create"] == 3 and stub.calls["created"] == 1 and stub.calls["poll"] == 4


def test_a_lost_create_answer_is_found_by_its_display_name_not_created_again(stub):
    with backend(stub).batch_client() as client:
        client.submit([line("a")], "sctc-other")
        stub.fail_next("create", "lost")
        provider_id = client.submit([line("b")], "sctc-mine")
    assert stub.calls["created"] == 2 and stub.calls["create"] == 2 and provider_id == stub.created[1].id


def test_find_pages_through_the_list_by_display_name(stub):
    with backend(stub).batch_client() as client:
        for number in range(105):
            client.submit([line(f"x{number}")], f"sctc-{number}")
        assert client.find("sctc-104", created_after=0.0, size=1) == stub.created[104].id
        assert client.find("sctc-none", created_after=0.0, size=1) is None
    assert stub.calls["list"] == 4


def test_the_inline_size_limit_splits_before_the_api_would_refuse(stub):
    client = backend(stub).batch_client()
    try:
        big = line("x" * 1_000_000)
        assert client.line_bytes(big) > 1_000_000
        assert client.max_bytes // client.line_bytes(big) < 20
    finally:
        client.close()


def test_errors_never_show_the_key(stub, monkeypatch):
    with backend(stub, max_retries=1).batch_client() as client:
        provider_id = client.submit([line("a")], "sctc-x")
        stub.fail_next("poll", "500", "500")
        with pytest.raises(BatchApiError) as raised:
            client.status(provider_id)
        assert KEY not in str(raised.value)
        with pytest.raises(BatchApiError, match="not a Gemini batch name"):
            client.status("../../elsewhere")
    monkeypatch.setenv(KEY_ENV, "AIza-wrong-key-77")
    with backend(stub).batch_client() as client:
        with pytest.raises(BatchApiError) as raised:
            client.submit([line("a")], "sctc-y")
    assert "API key not valid" in str(raised.value) and "AIza-wrong-key-77" not in str(raised.value)
    monkeypatch.setenv(KEY_ENV, "")
    with pytest.raises(BackendUnavailable, match=KEY_ENV):
        backend(stub).batch_client()
