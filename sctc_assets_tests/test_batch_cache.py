"""The response cache's provider-batch tables (`batches`, `batch_requests`) and methods, on both stores (a SQLite file
and a real PostgreSQL server: the `cache_location` fixture): a batch recorded with its lines moves their claims to
its owner `batch:<local id>`, which no process outlives and which lapses only at the batch's expiry."""

from __future__ import annotations

import json
import time

import pytest

import sctc_assets.lib.cache as sqlite_cache
import sctc_assets.lib.cache_common as cache_common
from sctc_assets.lib.batches import ABANDONED, COLLECTED, SUBMITTING, BatchRecord, batch_owner
from sctc_assets.lib.cache import cache_key, new_claim_owner, open_cache, request_identity
from sctc_assets.lib.generation import GenerationRequest, GenerationResult

IDENTITY = {"backend": "test", "endpoint": "http://stub", "model": "m", "params": {"temperature": 0.0}}


def _lines(count: int, start: int = 0) -> list[tuple[str, str, GenerationRequest]]:
    lines = []
    for index in range(start, start + count):
        request = GenerationRequest.user(f"問題 {index}")
        lines.append((cache_key(IDENTITY, request), json.dumps(request_identity(IDENTITY, request), sort_keys=True,
                                                               ensure_ascii=False), request))
    return lines


def _record(local_id: str, size: int, *, created_at: float | None = None, expires_in: float = 26 * 3600,
            model: str = "m") -> BatchRecord:
    now = time.time() if created_at is None else created_at
    return BatchRecord(local_id=local_id, provider="openai", model=model, identity=IDENTITY, size=size,
                       created_at=now, updated_at=now, expires_at=now + expires_in, partitions=["m|zh_hans"],
                       registry_key="stub-model")


def test_a_recorded_batch_holds_its_keys_and_lists_its_requests(cache_location, monkeypatch):
    monkeypatch.setattr(cache_common, "BATCH_PAGE", 7)  # several pages
    cache = open_cache(cache_location)
    lines = _lines(30)
    keys = [key for key, _, _ in lines]
    submitter = new_claim_owner()
    assert cache.claim(keys, submitter, lease_s=60).claimed == keys
    cache.record_batch(_record("sctc-000000000001", 30), [(key, request) for key, request, _ in lines])

    record = cache.get_batch("sctc-000000000001")
    assert (record.state, record.size, record.provider_id, record.ended, record.identity) == \
        (SUBMITTING, 30, None, False, IDENTITY)
    assert (record.partitions, record.registry_key, record.counts) == (["m|zh_hans"], "stub-model", {})
    assert sorted(cache.batch_requests("sctc-000000000001")) == sorted((key, request) for key, request, _ in lines)
    assert cache.batches_holding(keys + ["f" * 64]) == {key: "sctc-000000000001" for key in keys}
    # the submitter's claims moved to the batch: its release frees nothing, and no other owner may take them
    cache.release_claims(submitter)
    other = cache.claim(keys, new_claim_owner(), lease_s=60)
    assert (len(other.claimed), len(other.held)) == (0, 30)
    cache.close()


def test_a_batch_claim_lapses_only_at_its_expiry_never_as_a_dead_process(cache_location):
    cache = open_cache(cache_location)
    lines = _lines(4)
    live, lapsed = lines[:2], lines[2:]
    cache.record_batch(_record("sctc-00000000000a", 2), [(key, request) for key, request, _ in live])
    cache.record_batch(_record("sctc-00000000000b", 2, expires_in=-5),
                       [(key, request) for key, request, _ in lapsed])
    # `batch:sctc-…` names no host or process: the SQLite store's dead-owner test must not free it
    assert sqlite_cache._owner_alive(batch_owner("sctc-00000000000a"))
    assert cache.batches_holding([key for key, _, _ in lines]) == {key: "sctc-00000000000a" for key, _, _ in live}
    outcome = cache.claim([key for key, _, _ in lines], new_claim_owner(), lease_s=60)
    assert sorted(outcome.claimed) == sorted(key for key, _, _ in lapsed)
    assert sorted(outcome.held) == sorted(key for key, _, _ in live)
    cache.close()


def test_batches_are_listed_newest_first_and_updated(cache_location):
    cache = open_cache(cache_location)
    now = time.time()
    for number, model in enumerate(["m", "m", "other"]):
        cache.record_batch(_record(f"sctc-00000000000{number}", 1, created_at=now + number, model=model),
                           [(key, request) for key, request, _ in _lines(1, start=number)])
    assert [record.local_id for record in cache.batches()] == \
        ["sctc-000000000002", "sctc-000000000001", "sctc-000000000000"]
    cache.update_batch("sctc-000000000000", state=COLLECTED, provider_id="batch_abc", ended=True,
                       counts={"total": 1, "completed": 1}, stored=1)
    cache.update_batch("sctc-000000000001", state=ABANDONED, message="never reached the provider")
    assert [record.local_id for record in cache.batches(open_only=True)] == ["sctc-000000000002"]
    assert [record.local_id for record in cache.batches(model="m")] == ["sctc-000000000001", "sctc-000000000000"]
    collected = cache.get_batch("sctc-000000000000")
    assert (collected.state, collected.provider_id, collected.ended, collected.counts, collected.stored) == \
        (COLLECTED, "batch_abc", True, {"total": 1, "completed": 1}, 1)
    assert collected.updated_at >= collected.created_at
    assert cache.get_batch("sctc-000000000001").message == "never reached the provider"
    assert cache.get_batch("sctc-nothing") is None
    with pytest.raises(ValueError, match="cannot change size"):
        cache.update_batch("sctc-000000000000", size=5)
    cache.close()


def test_store_line_stores_with_the_recorded_request_and_frees_the_key(cache_location):
    cache = open_cache(cache_location)
    (key, request_json, request), (error_key, error_json, _) = _lines(2)
    cache.record_batch(_record("sctc-0000000000cc", 2), [(key, request_json), (error_key, error_json)])
    assert cache.store_line(key, IDENTITY, request_json, GenerationResult("答", input_tokens=3)) is True
    assert cache.store_line(error_key, IDENTITY, error_json,
                            GenerationResult(None, "error", "HTTP 400: bad request")) is False
    assert cache.get(key).text == "答" and cache.get(error_key) is None
    # the answer is stored as a synchronous call stores it: same key, same request column
    assert cache.stored_requests("m") == [request_json]
    other = new_claim_owner()
    assert cache.claim([key], other, lease_s=60).answered[key].text == "答"
    assert cache.batches_holding([key, error_key]) == {error_key: "sctc-0000000000cc"}
    # the first answer stored for a key is kept
    assert cache.store_line(key, IDENTITY, request_json, GenerationResult("another")) is True
    assert cache.get(key).text == "答" and cache.count(model="m") == 1
    # an ordinary store of the same request finds the batch's answer under the same key
    assert cache.store(key, IDENTITY, request, GenerationResult("sync")).text == "答"
    cache.close()
