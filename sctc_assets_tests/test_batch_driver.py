"""Provider batches through `ModelBackend.generate()` (`lib/batch_driver.py`), against the in-memory batch API of
`fake_batch_client.py`: every request ends answered, refused or an error row; failed, expired, cancelled and cut
lines are retried (synchronously when few, else in a new batch, at most `batch_max_rounds` batches); an unchanged
rerun submits nothing; a second process, or the same command after a crash at any point, collects the open batch
instead of submitting again. Counts come from the fake provider's own log: lines sent, answered (paid) and lost."""

from __future__ import annotations

import pickle
from typing import Any, ClassVar, Optional, Sequence

import pytest

import sctc_assets.backends.base as base
import sctc_assets.lib.batch_driver as batch_driver
from sctc_assets.backends.base import BatchesPending, GenerationHalted, ModelBackend, ResultCallback
from sctc_assets.lib.batches import ABANDONED, COLLECTED, SUBMITTING, BatchLine, BatchRecord
from sctc_assets.lib.budget import Budget, BudgetLimits
from sctc_assets.lib.cache import cache_key, open_cache
from sctc_assets.lib.cache_common import request_json
from sctc_assets.lib.generation import GenerationRequest, GenerationResult
from sctc_assets_tests.fake_batch_client import UNKNOWN_ID, FakeBatchClient, answer_to

CLIENTS: dict[str, FakeBatchClient] = {}
SYNC_CALLS: list[str] = []  # prompts asked synchronously, by every backend of a test


class BatchTestBackend(ModelBackend):
    """A backend with a batch API (the fake's) and an ordinary path that answers at once."""

    backend_name: ClassVar[str] = "batch-test"
    batch_api: ClassVar[Optional[str]] = "fake"
    client: str = "default"
    batch: bool = True
    batch_poll_seconds: float = 0.0  # the fake moves one state per poll: no wait between polls
    batch_price_factor: float = 0.5
    batch_retry_sync_max: int = 2
    batch_max_rounds: int = 3

    def identity(self) -> dict[str, Any]:
        return {"backend": self.backend_name, "model": "fake-model"}

    def batch_client(self) -> FakeBatchClient:
        return CLIENTS[self.client]

    def pricing(self):
        return 1.0, 2.0

    def _generate_uncached(self, requests: Sequence[GenerationRequest], on_result: ResultCallback) -> None:
        for index, request in enumerate(requests):
            SYNC_CALLS.append(request.prompt)
            on_result(index, answer_to(request))


@pytest.fixture
def fake(monkeypatch) -> FakeBatchClient:
    CLIENTS.clear()
    SYNC_CALLS.clear()
    CLIENTS["default"] = client = FakeBatchClient(max_requests=8)
    monkeypatch.setattr(batch_driver, "_wait", lambda seconds: None)  # polls come at once
    monkeypatch.setenv("SCTC_BATCH_WAIT", "foreground")
    return client


def _requests(count: int) -> list[GenerationRequest]:
    return [GenerationRequest.user(f"問題 {index}") for index in range(count)]


def _key(request: GenerationRequest) -> str:
    return cache_key(BatchTestBackend().identity(), request)


def _outcomes(results: list[GenerationResult]) -> dict[str, int]:
    counted: dict[str, int] = {}
    for result in results:
        counted[result.outcome] = counted.get(result.outcome, 0) + 1
    return counted


def test_every_request_ends_answered_refused_or_an_error_row(fake, tmp_path):
    cache = open_cache(tmp_path / "cache.sqlite")
    requests = _requests(30) + [GenerationRequest.user("問題 10")]  # a repeat is asked once
    keys = [_key(request) for request in requests]
    fake.erring.update(keys[0:2])
    fake.refusing.update(keys[2:4])
    fake.fail_lines(keys[4:6])  # fail once, then answered synchronously (2 ≤ batch_retry_sync_max)
    backend = BatchTestBackend()
    lines: list[str] = []
    backend.set_batch_context(registry_key="fake", partitions=["fake|zh_hans"], on_progress=lines.append)

    results = backend.generate(requests, cache=cache)

    assert _outcomes(results) == {"error": 2, "refusal": 2, "ok": 27}
    assert all(result.message == "HTTP 400: invalid request" for result in results[:2])
    assert results[30].text == results[10].text and results[30].cached
    outcome = backend.batch_outcome()
    assert (outcome.batches_submitted, outcome.lines_submitted) == (4, 30)  # 8 + 8 + 8 + 6 lines
    assert (outcome.stored, outcome.refused, outcome.errors, outcome.retried_sync, outcome.retried_batch) == \
        (24, 2, 2, 2, 0)
    assert sorted(SYNC_CALLS) == ["問題 4", "問題 5"]
    assert fake.paid_twice == 0 and sum(fake.answered.values()) == 26 and cache.count() == 28
    batch_ids = {result.batch_id for result in results[6:30]}
    assert batch_ids == set(fake.batches) and results[4].batch_id is None  # asked synchronously
    assert not any(result.cached for result in results[:30])
    assert any("in_progress" in line for line in lines)  # a progress line each poll
    records = cache.batches()
    assert [record.state for record in records] == [COLLECTED] * 4
    assert {tuple(record.partitions) for record in records} == {("fake|zh_hans",)}
    assert cache.batches_holding(keys) == {}  # every batch claim released
    assert "4 submitted (30 lines)" in " ".join(backend.generation_notes())

    # rerun: the errors are asked again (errors are never results), nothing else is sent
    fake.erring.clear()
    rerun = BatchTestBackend().generate(requests, cache=cache)
    assert _outcomes(rerun) == {"refusal": 2, "ok": 29}
    assert fake.lines_submitted()[keys[0]] == 2 and sum(fake.lines_submitted().values()) == 32
    # an unchanged rerun submits nothing and asks nothing
    before, sync_before = len(fake.calls("submit")), len(SYNC_CALLS)
    again = BatchTestBackend().generate(requests, cache=cache)
    assert [result.text for result in again] == [result.text for result in rerun]
    assert all(result.cached for result in again)
    assert (len(fake.calls("submit")), len(SYNC_CALLS), len(fake.calls("status"))) == \
        (before, sync_before, len(fake.calls("status")))
    assert fake.paid_twice == 0


def test_many_failed_lines_go_in_new_batches_then_become_error_rows(fake, tmp_path):
    cache = open_cache(tmp_path / "cache.sqlite")
    requests = _requests(12)
    keys = [_key(request) for request in requests]
    fake.fail_lines(keys[:4], times=1)  # answered in the second batch
    fake.fail_lines(keys[4:7], times=99)  # never answered
    backend = BatchTestBackend(batch_max_rounds=3)
    results = backend.generate(requests, cache=cache)
    assert _outcomes(results) == {"ok": 9, "error": 3}
    assert all("no answer after 3 batch(es)" in result.message for result in results[4:7])
    outcome = backend.batch_outcome()
    # 12 lines, then 7 again, then 3 again: three batches, none synchronously
    assert [call[2] for call in fake.calls("submit")] == [8, 4, 7, 3]
    assert (outcome.retried_batch, outcome.retried_sync, outcome.errors) == (10, 0, 3)
    assert SYNC_CALLS == [] and fake.paid_twice == 0
    assert fake.lines_submitted()[keys[5]] == 3  # batch_max_rounds batches, no more


@pytest.mark.parametrize("script, counts, retried", [
    ({"end": "expired", "partial": 5}, {"expired_lines": 3}, 3),
    ({"end": "cancelled", "partial": 2}, {"expired_lines": 6}, 6),
    ({"cut_after": 6}, {"cut_files": 1}, 2),
    ({"unknown": 2}, {"unknown_lines": 2}, 0),
])
def test_expired_cancelled_cut_and_unknown_lines_are_counted_and_nothing_is_lost(fake, tmp_path, script, counts,
                                                                                  retried):
    cache = open_cache(tmp_path / "cache.sqlite")
    fake.then(**script)
    requests = _requests(8)
    backend = BatchTestBackend(batch_retry_sync_max=2)
    results = backend.generate(requests, cache=cache)
    assert _outcomes(results) == {"ok": 8}
    outcome = backend.batch_outcome()
    for name, count in counts.items():
        assert getattr(outcome, name) == count, name
    assert outcome.retried_sync + outcome.retried_batch == retried
    assert outcome.retried_sync == (retried if retried <= 2 else 0)
    assert len(SYNC_CALLS) == outcome.retried_sync
    assert fake.paid_twice == 0 and UNKNOWN_ID not in {result.batch_id for result in results}
    assert cache.get(UNKNOWN_ID) is None and cache.count() == 8


def test_a_submission_or_poll_that_fails_is_tried_again_without_paying_twice(fake, tmp_path):
    cache = open_cache(tmp_path / "cache.sqlite")
    fake.fail_submit(after_create=True)  # the batch exists, but the reply was lost: only find() sees it
    fake.poll_failures = 2
    backend = BatchTestBackend()
    results = backend.generate(_requests(6), cache=cache)
    assert _outcomes(results) == {"ok": 6}
    outcome = backend.batch_outcome()
    assert (outcome.submit_failures, outcome.poll_failures, outcome.batches_submitted) == (1, 2, 1)
    assert len(fake.batches) == 1 and len(fake.calls("find")) == 1 and fake.paid_twice == 0


def test_a_submission_that_never_reached_the_provider_is_abandoned_after_the_grace(fake, tmp_path, monkeypatch):
    cache = open_cache(tmp_path / "cache.sqlite")
    fake.fail_submit(after_create=False)  # a 503 that persisted: no batch was created
    monkeypatch.setenv("SCTC_BATCH_WAIT", "detach")
    requests = _requests(5)
    with pytest.raises(BatchesPending) as pending:
        BatchTestBackend().generate(requests, cache=cache)
    (local_id,) = pending.value.local_ids
    assert pending.value.provider_ids == [] and cache.get_batch(local_id).state == SUBMITTING
    # within the grace the keys stay held by the unconfirmed batch: another run waits instead of submitting
    with pytest.raises(BatchesPending):
        BatchTestBackend().generate(requests, cache=cache)
    assert len(fake.calls("submit")) == 1 and len(fake.batches) == 0
    monkeypatch.setattr(batch_driver, "SUBMIT_GRACE_S", 0.0)
    monkeypatch.setenv("SCTC_BATCH_WAIT", "foreground")
    backend = BatchTestBackend()
    results = backend.generate(requests, cache=cache)
    assert _outcomes(results) == {"ok": 5}
    assert cache.get_batch(local_id).state == ABANDONED and backend.batch_outcome().abandoned == 1
    assert len(fake.calls("submit")) == 2 and len(fake.batches) == 1 and fake.paid_twice == 0


def test_a_crash_after_the_record_then_the_same_command_finds_or_resubmits(fake, tmp_path, monkeypatch):
    """kill -9 between `record_batch` and the provider's reply: the record is SUBMITTING with the keys claimed by
    the batch. When the provider has the batch (`find`), it is adopted: 0 submitted again, 0 lost."""
    cache = open_cache(tmp_path / "cache.sqlite")
    backend = BatchTestBackend()
    identity = backend.identity()
    requests = _requests(6)
    keys = [_key(request) for request in requests]
    record = BatchRecord(local_id="sctc-0123456789ab", provider="fake", model="fake-model", identity=identity,
                         size=6, created_at=1e9, updated_at=1e9, expires_at=4e9)
    cache.record_batch(record, [(key, request_json(identity, request)) for key, request in zip(keys, requests)])
    fake.submit([BatchLine(key, request) for key, request in zip(keys, requests)], "sctc-0123456789ab")  # it arrived
    submitted = len(fake.calls("submit"))
    results = backend.generate(requests, cache=cache)
    assert _outcomes(results) == {"ok": 6} and len(fake.calls("submit")) == submitted
    assert backend.batch_outcome().joined == 6 and fake.paid_twice == 0
    assert cache.get_batch("sctc-0123456789ab").provider_id == "batch_0001"


def test_a_second_process_collects_the_open_batch_instead_of_submitting_again(fake, cache_location, monkeypatch):
    cache = open_cache(cache_location)
    monkeypatch.setenv("SCTC_BATCH_WAIT", "detach")
    requests = _requests(20)
    with pytest.raises(BatchesPending) as pending:
        BatchTestBackend().generate(requests, cache=cache)
    assert len(pending.value.local_ids) == 3 and sorted(pending.value.provider_ids) == sorted(fake.batches)
    revived = pickle.loads(pickle.dumps(pending.value))  # Dagster carries step errors across processes
    assert isinstance(revived, GenerationHalted)
    assert (revived.local_ids, revived.provider_ids) == (pending.value.local_ids, pending.value.provider_ids)
    assert "waiting for 3 provider batch(es)" in str(revived)

    # another process (its own cache connection and backend) asks the same prompts and some more
    other_cache = open_cache(cache_location)
    monkeypatch.setenv("SCTC_BATCH_WAIT", "foreground")
    backend = BatchTestBackend()
    results = backend.generate(requests + _requests(22)[20:], cache=other_cache)
    assert _outcomes(results) == {"ok": 22}
    outcome = backend.batch_outcome()
    assert (outcome.joined, outcome.lines_submitted) == (20, 2)  # 0 resubmitted
    assert sum(fake.lines_submitted().values()) == 22 and fake.paid_twice == 0 and SYNC_CALLS == []
    assert other_cache.count() == 22 and cache.batches(open_only=True) == []
    # the first process, run again, finds every answer in the cache
    assert _outcomes(BatchTestBackend().generate(requests, cache=cache)) == {"ok": 20}
    assert sum(fake.lines_submitted().values()) == 22


def test_ctrl_c_leaves_the_batches_running_and_the_same_command_collects_them(fake, tmp_path, monkeypatch):
    cache = open_cache(tmp_path / "cache.sqlite")
    halted = []
    monkeypatch.setattr(base, "stop_reason", lambda: "interrupted (Ctrl-C)" if halted else None)
    backend = BatchTestBackend()
    backend.set_batch_context(on_progress=lambda line: halted.append(line))
    requests = _requests(10)
    with pytest.raises(GenerationHalted, match="left running at the provider .*the same command collects them"):
        backend.generate(requests, cache=cache)
    assert fake.calls("cancel") == [] and len(cache.batches(open_only=True)) == 2
    halted.clear()
    results = BatchTestBackend().generate(requests, cache=cache)
    assert _outcomes(results) == {"ok": 10}
    assert sum(fake.lines_submitted().values()) == 10 and fake.paid_twice == 0


def test_lines_submitted_are_reserved_in_the_budget_and_cost_the_batch_price(fake, tmp_path):
    cache = open_cache(tmp_path / "cache.sqlite")
    backend = BatchTestBackend()
    backend.attach_budget(Budget(cache, scope="s", model="fake", run=BudgetLimits(max_calls=100), own=BudgetLimits(),
                                 pricing=backend.pricing()))
    backend.generate(_requests(10), cache=cache)
    totals = cache.ledger("s")["fake"]
    assert totals.calls == 10  # reserved when submitted
    # 10 answers of 10 input and 5 output tokens at $1/$2 per million, half price
    assert totals.cost_usd == pytest.approx(10 * (10 * 1.0 + 5 * 2.0) / 1e6 * 0.5)
    assert backend.batch_outcome().cost_usd == pytest.approx(totals.cost_usd)


def test_a_budget_limits_the_lines_submitted(fake, tmp_path):
    cache = open_cache(tmp_path / "cache.sqlite")
    backend = BatchTestBackend()
    backend.attach_budget(Budget(cache, scope="s", model="fake", run=BudgetLimits(max_calls=5), own=BudgetLimits()))
    with pytest.raises(GenerationHalted, match="budget"):
        backend.generate(_requests(10), cache=cache)
    assert [call[2] for call in fake.calls("submit")] == [5]  # what the budget allows, the rest left for later
    assert cache.ledger("s")["fake"].calls == 5 and cache.count() == 5


def test_batch_settings_do_not_change_the_cache_identity_and_need_a_batch_api():
    from pydantic import ValidationError

    from sctc_assets.backends.api_backend import ApiBackend
    from sctc_assets.backends.openai_backend import OpenAIBackend

    plain = OpenAIBackend(model="m", base_url="http://stub/v1")
    batched = OpenAIBackend(model="m", base_url="http://stub/v1", batch=True, batch_poll_seconds=5,
                            batch_price_factor=0.4, batch_retry_sync_max=0, batch_max_rounds=1)
    assert plain.identity() == batched.identity()

    class NoBatchApi(ApiBackend):
        backend_name: ClassVar[str] = "plain"

    with pytest.raises(ValidationError, match="no batch API"):
        NoBatchApi(model="m", base_url="http://stub/v1", batch=True)
    for bad in ({"batch_poll_seconds": 0.5}, {"batch_price_factor": 0}, {"batch_price_factor": 1.01},
                {"batch_retry_sync_max": -1}, {"batch_max_rounds": 0}):
        with pytest.raises(ValidationError, match=next(iter(bad))):
            OpenAIBackend(model="m", base_url="http://stub/v1", **bad)


def test_a_key_another_process_is_asking_synchronously_is_waited_for_not_submitted(fake, tmp_path):
    import os
    import threading

    cache = open_cache(tmp_path / "cache.sqlite")
    backend = BatchTestBackend()
    requests = _requests(4)
    busy = _key(requests[0])
    other = f"{os.uname().nodename}:{os.getpid()}:elsewhere"  # a live owner on this host
    assert cache.claim([busy], other, lease_s=60).claimed == [busy]
    storing = threading.Timer(0.5, lambda: open_cache(tmp_path / "cache.sqlite").store(
        busy, backend.identity(), requests[0], GenerationResult("the other process's answer")))
    storing.start()
    try:
        results = backend.generate(requests, cache=cache)
    finally:
        storing.join()
    assert results[0].text == "the other process's answer" and _outcomes(results) == {"ok": 4}
    assert busy not in fake.lines_submitted() and sum(fake.lines_submitted().values()) == 3 and SYNC_CALLS == []
