"""OpenAIBatchClient against the Batch API stub (`batch_stubs.OpenAIBatchStub`): every state, every fault, counted
from the stub's log; a batch is never created twice and the API key appears in no error."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Iterator

import pytest

from sctc_assets.backends.base import BackendUnavailable
from sctc_assets.backends.batch_openai import OpenAIBatchClient
from sctc_assets.backends.openai_backend import OpenAIBackend
from sctc_assets.lib.batches import BatchApiError, BatchLine, LineResult
from sctc_assets.lib.generation import GenerationRequest
from sctc_assets_tests.batch_stubs import OpenAIBatchStub, multipart_fields
from sctc_assets_tests.provider_batch_stub import poll_until_ended as poll_to_end
from sctc_assets_tests.openai_stub_server import (CONTENT_FILTER_MESSAGE, DROP_CONNECTION, ReasoningModel,
                                                  api_error, completion, garbled)

KEY_ENV = "SCTC_TEST_OPENAI_BATCH_KEY"
FAKE_KEY = "sk-batch-Hq4mT9wZ2xLp6Rr1-DO-NOT-LEAK"


@pytest.fixture(autouse=True)
def fake_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, FAKE_KEY)


@pytest.fixture
def stub() -> Iterator[OpenAIBatchStub]:
    with OpenAIBatchStub(api_key=FAKE_KEY) as server:
        yield server


def make_backend(stub: OpenAIBatchStub, **overrides: Any) -> OpenAIBackend:
    return OpenAIBackend(**{"model": "stub-model", "base_url": stub.base_url, "api_key_env": KEY_ENV,
                            "backoff_initial_s": 0.01, "backoff_max_s": 0.5, "timeout_s": 5.0, "max_retries": 3,
                            "seed": 7, **overrides})


@pytest.fixture
def client(stub: OpenAIBatchStub) -> Iterator[OpenAIBatchClient]:
    with make_backend(stub).batch_client() as batch_client:
        yield batch_client


def lines_for(*prompts: str) -> list[BatchLine]:
    return [BatchLine(hashlib.sha256(prompt.encode()).hexdigest(), GenerationRequest.user(prompt, trial=0))
            for prompt in prompts]


def by_id(results: list[LineResult]) -> dict[str, LineResult]:
    assert len({line.custom_id for line in results}) == len(results), "a line was read twice"
    return {line.custom_id: line for line in results}


def test_a_batch_moves_through_every_state_and_answers_each_line_as_the_sync_backend_would(
        stub: OpenAIBatchStub) -> None:
    backend = make_backend(stub, max_tokens=64, temperature=0.3)
    lines = lines_for("你好", "台湾是国家吗", "hello")
    with backend.batch_client() as client:
        batch_id = client.submit(lines, "sctc-000000000001")
        assert stub.batches[batch_id].status == "validating"
        assert poll_to_end(client, batch_id) == ["in_progress", "finalizing", "completed"]
        assert client.status(batch_id).counts == {"total": 3, "completed": 3, "failed": 0}
        results = by_id(list(client.results(batch_id)))

    assert set(results) == {line.custom_id for line in lines}
    for line in lines:
        result = results[line.custom_id].result
        assert results[line.custom_id].retry is None and result is not None
        assert (result.outcome, result.text) == ("ok", f"echo: {line.request.prompt}")
        assert result.input_tokens == len(line.request.prompt) and result.output_tokens == len(result.text)
        assert result.system_fingerprint == "fp_stub" and result.served_model == "stub-model"
    # The input file: one line per request, whose body is exactly what the synchronous backend POSTs.
    batch = stub.batches[batch_id]
    assert batch.metadata == {"sctc_batch": "sctc-000000000001"}
    assert [line["body"] for line in batch.lines] == [backend._request_body(line.request) for line in lines]
    assert {(line["method"], line["url"]) for line in batch.lines} == {("POST", "/v1/chat/completions")}
    assert batch.lines[0]["body"]["max_tokens"] == 64 and batch.lines[0]["body"]["temperature"] == 0.3
    # Polls: three to the end, one for the counts, one by `results` (which files to read).
    assert stub.call_counts() == {"upload": 1, "create": 1, "poll": 5, "download": 1, "delete": 1}
    assert stub.deleted_files == [batch.input_file_id]  # the input file, once read back; the output stays
    assert stub.batch_answers() == {line.custom_id: 1 for line in lines}
    assert stub.requests == [] and stub.unauthorized == 0  # no synchronous call


def test_line_bytes_add_up_to_the_uploaded_file_and_limits_are_openais(client: OpenAIBatchClient,
                                                                       stub: OpenAIBatchStub) -> None:
    lines = lines_for("a", "bb", "ccc")
    client.submit(lines, "sctc-000000000002")
    [upload] = [file for file in stub.files.values() if file["filename"] == "sctc-000000000002.jsonl"]
    assert sum(client.line_bytes(line) for line in lines) == len(upload["data"])
    assert (client.provider, client.max_requests, client.max_bytes) == ("openai", 50_000, 200_000_000)
    with pytest.raises(ValueError, match="at most 50000"):
        client.submit(lines * 16_667, "sctc-too-many")
    assert stub.call_counts()["create"] == 1


def test_line_errors_settle_or_come_back_to_be_retried(client: OpenAIBatchClient, stub: OpenAIBatchStub) -> None:
    stub.script_line("bad", api_error(400, "Invalid 'messages[0].content': string too long.", code="string_above_max"))
    stub.script_line("filtered", api_error(400, CONTENT_FILTER_MESSAGE, code="content_filter"))
    stub.script_line("cut by the filter", completion("partial", finish_reason="content_filter"))
    stub.script_line("busy", api_error(429, "Rate limit reached", code="rate_limit_exceeded"))
    stub.script_line("broken", api_error(500, "The server had an error while processing your request."))
    lines = lines_for("bad", "filtered", "cut by the filter", "busy", "broken", "fine")
    batch_id = client.submit(lines, "sctc-000000000003")
    poll_to_end(client, batch_id)
    # 400s, 429s and 500s are in the error file; a completion cut by the filter is a 200 in the output file.
    assert client.status(batch_id).counts == {"total": 6, "completed": 2, "failed": 4}
    results = by_id(list(client.results(batch_id)))
    outcome = {line.request.prompt: results[line.custom_id] for line in lines}

    assert outcome["bad"].result.outcome == "error" and "string too long" in outcome["bad"].result.message
    assert outcome["bad"].result.message.startswith("HTTP 400: ")
    assert outcome["filtered"].result.outcome == "refusal"
    assert (outcome["cut by the filter"].result.outcome, outcome["cut by the filter"].result.text) == \
        ("refusal", "partial")
    assert outcome["busy"].result is None and outcome["busy"].retry.startswith("HTTP 429")
    assert outcome["broken"].result is None and outcome["broken"].retry.startswith("HTTP 500")
    assert outcome["fine"].result.outcome == "ok"
    assert stub.call_counts()["download"] == 2  # the output file, then the error file


@pytest.mark.parametrize("end", ["expired", "cancelled"])
def test_an_expired_or_provider_cancelled_batch_gives_its_done_lines_and_the_rest_to_retry(
        end: str, client: OpenAIBatchClient, stub: OpenAIBatchStub) -> None:
    stub.script_batch(end=end, answered=2)
    lines = lines_for(*[f"p{index}" for index in range(5)])
    batch_id = client.submit(lines, "sctc-000000000004")
    expected = ["in_progress", "expired"] if end == "expired" else ["in_progress", "cancelling", "cancelled"]
    assert poll_to_end(client, batch_id) == expected
    results = by_id(list(client.results(batch_id)))

    assert len(results) == 5
    answered = [line for line in lines if results[line.custom_id].result is not None]
    assert [line.custom_id for line in answered] == [line.custom_id for line in lines[:2]]
    why = "expired" if end == "expired" else "cancelled"
    assert all(why in results[line.custom_id].retry for line in lines[2:])
    assert client.status(batch_id).counts == {"total": 5, "completed": 2, "failed": 3}
    assert sum(stub.batch_answers().values()) == 2  # only the done lines were paid for


def test_a_batch_cancelled_by_the_client_ends_cancelled_with_every_line_to_retry(
        client: OpenAIBatchClient, stub: OpenAIBatchStub) -> None:
    lines = lines_for("x", "y")
    batch_id = client.submit(lines, "sctc-000000000005")
    assert client.status(batch_id).state == "in_progress"
    client.cancel(batch_id)
    assert poll_to_end(client, batch_id) == ["cancelled"]
    results = list(client.results(batch_id))
    assert sorted(line.custom_id for line in results) == sorted(line.custom_id for line in lines)
    assert all(line.result is None and "cancelled" in line.retry for line in results)
    assert stub.call_counts()["cancel"] == 1 and stub.batch_answers() == {}


def test_a_results_file_cut_mid_line_skips_and_counts_the_cut_line(client: OpenAIBatchClient,
                                                                   stub: OpenAIBatchStub) -> None:
    stub.script_batch(cut_output=True)
    lines = lines_for("one", "two", "three", "four")
    batch_id = client.submit(lines, "sctc-000000000006")
    poll_to_end(client, batch_id)
    results = list(client.results(batch_id))
    assert [line.custom_id for line in results] == [line.custom_id for line in lines[:3]]
    assert all(line.result.outcome == "ok" for line in results)
    assert client.skipped_lines == 1  # the driver retries the fourth, never seen


def test_an_unknown_custom_id_is_passed_on_for_the_driver_to_count(client: OpenAIBatchClient,
                                                                   stub: OpenAIBatchStub) -> None:
    stranger = "f" * 64
    stub.script_batch(unknown_ids=[stranger])
    lines = lines_for("known")
    batch_id = client.submit(lines, "sctc-000000000007")
    poll_to_end(client, batch_id)
    assert [line.custom_id for line in client.results(batch_id)] == [lines[0].custom_id, stranger]


def test_a_batch_that_fails_validation_says_why_and_gives_no_lines(client: OpenAIBatchClient,
                                                                   stub: OpenAIBatchStub) -> None:
    stub.script_batch(end="failed", errors=[{"code": "model_not_found", "line": 1,
                                             "message": "The model 'stub-model' does not support batch."}])
    batch_id = client.submit(lines_for("q"), "sctc-000000000008")
    status = client.status(batch_id)
    assert (status.state, status.ended) == ("failed", True)
    assert status.message == "line 1: model_not_found: The model 'stub-model' does not support batch."
    assert list(client.results(batch_id)) == []
    assert stub.deleted_files == [stub.batches[batch_id].input_file_id]


@pytest.mark.parametrize("route", ["upload", "create", "poll"])
@pytest.mark.parametrize("fault", [api_error(429, "Rate limit reached", headers={"Retry-After": "0"}),
                                   api_error(500, "The server had an error."), DROP_CONNECTION])
def test_429_5xx_and_dropped_connections_on_upload_create_and_poll_are_retried(
        route: str, fault: Any, client: OpenAIBatchClient, stub: OpenAIBatchStub) -> None:
    stub.script_call(route, fault, fault)
    batch_id = client.submit(lines_for("retry me"), "sctc-000000000009")
    assert poll_to_end(client, batch_id)[-1] == "completed"
    counts = stub.call_counts()
    assert len(stub.batches) == 1 and counts[route] == (2 + 3 if route == "poll" else 3)
    assert client.retries == 2
    # A refused create (429) is retried without looking; another failure may have created it: looked for first.
    assert counts["list"] == (0 if route != "create" or fault.status == 429 else 2)


@pytest.mark.parametrize("loss", [api_error(500, "upstream reset"), DROP_CONNECTION,
                                  garbled(b"<html><h1>502 Bad Gateway</h1></html>", "text/html")])
def test_a_create_whose_answer_is_lost_is_found_not_created_twice(loss: Any, client: OpenAIBatchClient,
                                                                  stub: OpenAIBatchStub) -> None:
    stub.script_call("create", loss, executed=True)
    lines = lines_for("once", "only")
    batch_id = client.submit(lines, "sctc-00000000000a")
    assert list(stub.batches) == [batch_id]
    assert stub.call_counts()["create"] == 1 and stub.call_counts()["list"] == 1
    poll_to_end(client, batch_id)
    assert len(list(client.results(batch_id))) == 2
    assert stub.batch_answers() == {line.custom_id: 1 for line in lines}


def test_a_create_lost_on_its_last_attempt_is_still_found(stub: OpenAIBatchStub) -> None:
    stub.script_call("create", api_error(503, "overloaded"))
    stub.script_call("create", api_error(503, "overloaded"), executed=True)
    with make_backend(stub, max_retries=1).batch_client() as client:
        batch_id = client.submit(lines_for("last"), "sctc-00000000000b")
    assert list(stub.batches) == [batch_id] and stub.call_counts()["create"] == 2


def test_a_refused_create_raises_and_deletes_its_upload(client: OpenAIBatchClient, stub: OpenAIBatchStub) -> None:
    stub.script_call("create", api_error(400, "Enqueued token limit reached for stub-model.",
                                         code="token_limit_exceeded"))
    with pytest.raises(BatchApiError, match="Enqueued token limit reached"):
        client.submit(lines_for("too much"), "sctc-00000000000c")
    assert stub.batches == {} and len(stub.deleted_files) == 1 and stub.files == {}


def test_find_pages_through_the_listing_and_stops_at_older_batches(client: OpenAIBatchClient,
                                                                   stub: OpenAIBatchStub) -> None:
    first = client.submit(lines_for("first"), "sctc-wanted")
    for index in range(120):
        client.submit(lines_for(f"filler {index}"), f"sctc-filler-{index}")
    assert client.find("sctc-wanted", created_after=0, size=1) == first  # on the listing's second page
    assert stub.call_counts()["list"] == 2
    assert client.find("sctc-filler-119", created_after=0, size=1) is not None
    assert client.find("sctc-never", created_after=0, size=1) is None
    assert stub.call_counts()["list"] == 2 + 1 + 2
    # Batches created long before `created_after` (clock skew allowed for) are not paged through.
    for batch in list(stub.batches.values())[:110]:
        batch.created_at -= 86_400
    assert client.find("sctc-never", created_after=stub.batches[first].created_at + 86_400, size=1) is None
    assert stub.call_counts()["list"] == 2 + 1 + 2 + 1


def test_a_refused_parameter_is_learned_and_the_line_retried_adapted(stub: OpenAIBatchStub) -> None:
    stub.reasoning_model = ReasoningModel(fixed_temperature=None, refuses_top_p=False)
    backend = make_backend(stub, model="stub-reasoner-batch", max_tokens=50)
    lines = lines_for("why")
    with backend.batch_client() as client:
        first = client.submit(lines, "sctc-00000000000d")
        poll_to_end(client, first)
        [line] = client.results(first)
        assert line.result is None and "max_tokens" in line.retry and client.adapted_lines == 1
        second = client.submit(lines, "sctc-00000000000e")
        poll_to_end(client, second)
        [line] = client.results(second)
    assert line.result.outcome == "ok" and line.result.reasoning == ReasoningModel.reasoning
    bodies = [stub.batches[batch].lines[0]["body"] for batch in (first, second)]
    assert bodies[0]["max_tokens"] == 50 and "max_completion_tokens" not in bodies[0]
    assert bodies[1]["max_completion_tokens"] == 50 and "max_tokens" not in bodies[1]
    assert backend.request_adaptations() == ["the token limit is sent as max_completion_tokens (the API refused "
                                             "max_tokens): set `token_limit_param: max_completion_tokens` in the "
                                             "registry entry"]
    assert sum(stub.batch_answers().values()) == 1


def test_a_parameter_refused_that_cannot_be_adapted_is_an_error(client: OpenAIBatchClient,
                                                                stub: OpenAIBatchStub) -> None:
    stub.script_line("odd", api_error(400, "Unsupported parameter: 'logit_bias'.", code="unsupported_parameter"))
    batch_id = client.submit(lines_for("odd"), "sctc-00000000000f")
    poll_to_end(client, batch_id)
    [line] = client.results(batch_id)
    assert line.result.outcome == "error" and "logit_bias" in line.result.message and client.adapted_lines == 0


def test_a_wrong_key_stops_the_client_without_quoting_it(stub: OpenAIBatchStub,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-wrong-Pk2Jd8-DO-NOT-LEAK")
    with make_backend(stub).batch_client() as client, pytest.raises(BackendUnavailable) as raised:
        client.submit(lines_for("q"), "sctc-000000000010")
    assert "401" in str(raised.value) and "DO-NOT-LEAK" not in str(raised.value)
    assert stub.unauthorized == 1 and stub.batches == {}


def test_the_key_appears_in_no_error_or_result(stub: OpenAIBatchStub) -> None:
    echoed = f"proxy says: bad header Authorization: Bearer {FAKE_KEY} (key {FAKE_KEY})"
    stub.script_line("leaky", api_error(400, echoed))
    stub.script_line("leaky retry", api_error(502, echoed))
    with make_backend(stub, max_retries=1).batch_client() as client:
        batch_id = client.submit(lines_for("leaky", "leaky retry"), "sctc-000000000011")
        poll_to_end(client, batch_id)
        texts = [line.retry or line.result.message for line in client.results(batch_id)]
        stub.script_call("poll", api_error(500, echoed), api_error(500, echoed))
        with pytest.raises(BatchApiError) as raised:
            client.status(batch_id)
        stub.script_call("create", api_error(400, echoed))
        with pytest.raises(BatchApiError) as refused:
            client.submit(lines_for("x"), "sctc-000000000012")
    for text in [*texts, str(raised.value), str(refused.value)]:
        assert FAKE_KEY not in text and "[redacted]" in text
    assert stub.call_counts()["poll"] == 3 + 1 + 2  # to the end, by `results`, the two failures


def test_multipart_upload_names_purpose_and_file() -> None:
    body = (b'--b1\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
            b'--b1\r\nContent-Disposition: form-data; name="file"; filename="x.jsonl"\r\n'
            b'Content-Type: application/jsonl\r\n\r\n{"a": 1}\n\r\n--b1--\r\n')
    assert multipart_fields("multipart/form-data; boundary=b1", body) == \
        {"purpose": (None, b"batch"), "file": ("x.jsonl", b'{"a": 1}\n')}
    with pytest.raises(ValueError, match="closing boundary"):
        multipart_fields("multipart/form-data; boundary=b1", body[:-8])


def test_the_stub_answers_synchronous_calls_beside_batches(stub: OpenAIBatchStub) -> None:
    backend = make_backend(stub)
    [result] = backend.generate([GenerationRequest.user("sync")])
    assert result.text == "echo: sync [seed 7]" and len(stub.requests) == 1 and stub.calls == []
    assert json.loads(json.dumps(stub.call_counts())) == {}


def test_generate_retries_the_lines_of_a_batch_that_failed_as_a_whole(stub: OpenAIBatchStub, tmp_path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Through `generate()` and the driver: a batch that failed validation is counted as such (not as a cut file)
    and its lines are asked again, answered once each."""
    from sctc_assets.lib.cache import ResponseCache

    monkeypatch.setenv("SCTC_BATCH_WAIT", "foreground")
    stub.script_batch(end="failed", errors=[{"code": "invalid_request", "line": 1, "message": "Bad input file."}])
    backend = make_backend(stub, batch=True, batch_poll_seconds=1, batch_retry_sync_max=0)
    requests = [GenerationRequest.user(prompt) for prompt in ("q1", "q2", "q3")]
    results = backend.generate(requests, cache=ResponseCache(tmp_path / "cache.sqlite"))
    outcome = backend.batch_outcome()
    assert [result.outcome for result in results] == ["ok"] * 3
    assert (outcome.failed_batches, outcome.cut_files, outcome.retried_batch) == (1, 0, 3)
    assert stub.call_counts()["create"] == 2 and max(stub.batch_answers().values()) == 1
    assert "batch faults handled: 1 batches failed as a whole" in backend.generation_notes()[-1]
