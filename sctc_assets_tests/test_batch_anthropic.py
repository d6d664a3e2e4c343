"""`AnthropicBatchClient` against the Message Batches stub (`anthropic_batch_stub.py`): the states one poll at a
time, every line fate, the faults of issue #40 (expired with partial results, cancelled by the provider, per-line
errors, a results file cut mid-line, an unknown custom id, 429/5xx on create and poll, a lost create answer), and
the key kept out of every error. Counts come from the stub's log."""

from __future__ import annotations

import hashlib
import logging

import pytest

from sctc_assets.backends import BackendUnavailable
from sctc_assets.backends.anthropic_backend import AnthropicBackend
from sctc_assets.backends.batch_anthropic import AnthropicBatchClient
from sctc_assets.lib.batches import BatchApiError, BatchLine
from sctc_assets.lib.generation import GenerationRequest
from sctc_assets_tests.anthropic_batch_stub import StubAnthropicBatches
from sctc_assets_tests.provider_batch_stub import BatchPlan, poll_until_ended

KEY_ENV = "SCTC_TEST_BATCH_KEY"
KEY = "sk-ant-batch-secret-42"


@pytest.fixture
def stub(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    with StubAnthropicBatches(api_key=KEY) as server:
        yield server


def backend(stub: StubAnthropicBatches, **settings) -> AnthropicBackend:
    fields = {"model": "claude-stub", "base_url": stub.base_url, "api_key_env": KEY_ENV, "backoff_initial_s": 0.0,
              "backoff_max_s": 0.0, "max_retries": 3, "timeout_s": 10.0, "system_prompt": "be brief", **settings}
    return AnthropicBackend(**fields)


def line(prompt: str) -> BatchLine:
    return BatchLine(hashlib.sha256(prompt.encode()).hexdigest(), GenerationRequest.user(prompt))



def test_a_batch_sends_the_sync_body_moves_in_progress_to_ended_and_reads_every_fate(stub):
    model = backend(stub)
    stub.script_line("refuse me", "refusal")
    stub.script_line("bad one", "invalid")
    stub.script_line("flaky", "server_error")
    stub.script_line("busy", "overloaded")
    lines = [line(prompt) for prompt in ("hello", "refuse me", "bad one", "flaky", "busy")]
    with model.batch_client() as client:
        provider_id = client.submit(lines, "sctc-000000000001")
        assert [params for _, params in stub.created[0].lines] == \
            [model._request_body(item.request) for item in lines]
        assert poll_until_ended(client, provider_id) == ["in_progress", "ended"]
        status = client.status(provider_id)
        results = {result.custom_id: result for result in client.results(provider_id)}
    assert status.counts == {"processing": 0, "succeeded": 2, "errored": 3, "canceled": 0, "expired": 0,
                             "total": 5}
    hello, refused, bad, flaky, busy = (results[item.custom_id] for item in lines)
    assert hello.result.outcome == "ok" and hello.result.text == "echo: hello" and hello.retry is None
    assert hello.result.input_tokens == len("hello") and hello.result.served_model == "claude-stub"
    assert refused.result.outcome == "refusal"
    assert bad.result.outcome == "error" and "invalid_request_error" in bad.result.message and bad.retry is None
    assert flaky.result is None and "api_error" in flaky.retry
    assert busy.result is None and "overloaded_error" in busy.retry
    assert stub.calls["created"] == 1 and stub.calls["results"] == 1 and stub.paid_twice() == 0


def test_params_the_api_refuses_come_back_as_a_final_error_for_that_line_only(stub):
    model = backend(stub, model="claude-opus-4-7", temperature=0.5)  # this model takes no temperature
    with model.batch_client() as client:
        provider_id = client.submit([line("a"), line("b")], "sctc-x")
        poll_until_ended(client, provider_id)
        results = list(client.results(provider_id))
    assert [result.result.outcome for result in results] == ["error", "error"]
    assert all(result.retry is None for result in results)


def test_an_expired_batch_answers_what_it_finished_and_the_rest_are_retried(stub):
    stub.plan(BatchPlan(end="expired", answered=1, running_polls=2))
    lines = [line(f"p{number}") for number in range(3)]
    with backend(stub).batch_client() as client:
        provider_id = client.submit(lines, "sctc-x")
        assert poll_until_ended(client, provider_id) == ["in_progress", "in_progress", "ended"]
        counts = client.status(provider_id).counts
        results = list(client.results(provider_id))
    assert counts["succeeded"] == 1 and counts["expired"] == 2
    assert [result.result.outcome if result.result else result.retry for result in results] == \
        ["ok", "expired", "expired"]


def test_a_batch_cancelled_by_the_provider_shows_canceling_then_ends_with_its_lines_to_retry(stub):
    stub.plan(BatchPlan(end="cancelled", answered=0))
    with backend(stub).batch_client() as client:
        provider_id = client.submit([line("a"), line("b")], "sctc-x")
        assert poll_until_ended(client, provider_id) == ["in_progress", "canceling", "ended"]
        assert [result.retry for result in client.results(provider_id)] == ["canceled", "canceled"]
    assert stub.answered == {}


def test_cancel_asks_the_api_and_the_batch_ends_canceled(stub):
    with backend(stub).batch_client() as client:
        provider_id = client.submit([line("a")], "sctc-x")
        client.cancel(provider_id)
        assert poll_until_ended(client, provider_id) == ["canceling", "ended"]
        assert client.status(provider_id).counts["canceled"] == 1
    assert stub.calls["cancel"] == 1


def test_a_results_file_cut_mid_line_ends_early_and_an_unknown_custom_id_is_passed_on(stub):
    stub.plan(BatchPlan(cut_results=True, unknown_ids=1))
    lines = [line(f"p{number}") for number in range(4)]
    with backend(stub).batch_client() as client:
        provider_id = client.submit(lines, "sctc-x")
        poll_until_ended(client, provider_id)
        seen = [result.custom_id for result in client.results(provider_id)]
    # The unknown id is the last line, and it is the one cut: 4 answers; without the cut it is passed on.
    assert seen == [item.custom_id for item in lines]
    stub.plan(BatchPlan(unknown_ids=1))
    with backend(stub).batch_client() as client:
        provider_id = client.submit(lines, "sctc-y")
        poll_until_ended(client, provider_id)
        seen = [result.custom_id for result in client.results(provider_id)]
    assert len(seen) == 5 and seen[-1] not in {item.custom_id for item in lines}


def test_a_cut_answer_line_is_skipped(stub):
    stub.plan(BatchPlan(cut_results=True))
    lines = [line(f"p{number}") for number in range(3)]
    with backend(stub).batch_client() as client:
        provider_id = client.submit(lines, "sctc-x")
        poll_until_ended(client, provider_id)
        seen = [result.custom_id for result in client.results(provider_id)]
    assert seen == [item.custom_id for item in lines[:2]]


def test_429_and_500_on_create_and_poll_are_retried_without_a_second_batch(stub):
    stub.fail_next("create", "429", "500")
    stub.fail_next("poll", "500", "429")
    with backend(stub).batch_client() as client:
        provider_id = client.submit([line("a")], "sctc-x")
        assert poll_until_ended(client, provider_id) == ["in_progress", "ended"]
        assert client.retries == 4
    assert stub.calls["create"] == 3 and stub.calls["created"] == 1 and stub.calls["poll"] == 4


def test_a_lost_create_answer_is_found_in_the_list_not_created_again(stub):
    stub.fail_next("create", "lost")
    with backend(stub).batch_client() as client:
        provider_id = client.submit([line("a"), line("b")], "sctc-x")
    assert stub.calls["created"] == 1 and stub.calls["create"] == 1 and stub.calls["list"] == 1
    assert provider_id == stub.created[0].id


def test_a_lost_create_answer_among_batches_of_the_same_size_is_not_created_again(stub):
    with backend(stub).batch_client() as client:
        client.submit([line("a")], "sctc-1")
        client.submit([line("b")], "sctc-2")
        stub.fail_next("create", "lost")
        with pytest.raises(BatchApiError, match="cannot tell"):
            client.submit([line("c")], "sctc-3")
    assert stub.calls["created"] == 3


def test_find_takes_the_single_batch_of_that_size_created_since(stub, caplog):
    with backend(stub).batch_client() as client:
        first = client.submit([line("a"), line("b")], "sctc-1")
        client.submit([line("c")], "sctc-2")
        created = stub.created[0].created_at
        assert client.find("sctc-1", created_after=created - 1, size=2) == first
        assert client.find("sctc-1", created_after=created + 3600, size=2) is None
        client.submit([line("d"), line("e")], "sctc-3")
        with caplog.at_level(logging.WARNING):
            assert client.find("sctc-1", created_after=created - 1, size=2) is None
    assert "cannot tell which" in caplog.text


def test_find_pages_through_the_list(stub):
    with backend(stub).batch_client() as client:
        first = client.submit([line("a"), line("b")], "sctc-1")
        for number in range(105):
            client.submit([line(f"x{number}")], f"sctc-{number}")
        assert client.find("sctc-1", created_after=stub.created[0].created_at - 1, size=2) == first
    assert stub.calls["list"] == 2


def test_polls_failing_past_the_retries_raise_a_batch_api_error_without_the_key(stub):
    with backend(stub, max_retries=1).batch_client() as client:
        provider_id = client.submit([line("a")], "sctc-x")
        stub.fail_next("poll", "500", "500")
        with pytest.raises(BatchApiError) as raised:
            client.status(provider_id)
    assert "500" in str(raised.value) and KEY not in str(raised.value)


def test_a_wrong_key_stops_with_backend_unavailable_and_never_shows_it(stub, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-ant-wrong-key-77")
    with backend(stub).batch_client() as client:
        with pytest.raises(BackendUnavailable) as raised:
            client.submit([line("a")], "sctc-x")
    assert "401" in str(raised.value) and "sk-ant-wrong-key-77" not in str(raised.value)
    assert stub.calls["created"] == 0 and stub.calls["unauthorized"] == 1


def test_no_key_in_the_environment_is_backend_unavailable(stub, monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(BackendUnavailable, match=KEY_ENV):
        backend(stub).batch_client()


def test_a_results_url_on_another_origin_is_not_followed(stub):
    client = backend(stub).batch_client()
    try:
        provider_id = client.submit([line("a")], "sctc-x")
        poll_until_ended(client, provider_id)
        client._results_urls[provider_id] = f"http://elsewhere.invalid/v1/messages/batches/{provider_id}/results"
        assert [result.result.outcome for result in client.results(provider_id)] == ["ok"]
    finally:
        client.close()
