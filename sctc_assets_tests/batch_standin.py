"""A stand-in for the batch path of `ModelBackend.generate()` (issue 40's core part) for the Dagster tests: a backend
whose uncached requests go to a fake provider batch, which raises `BatchesPending` while the batch runs and answers
once the test has ended it, and the response cache's batch records where the cache has none yet.

It follows the contract of the shared design (b40-design.md): `BatchesPending(GenerationHalted)` with `local_ids`
and `provider_ids`; `BatchRecord` in the cache (`record_batch`, `get_batch`, `update_batch`); `batch_client()` with
`status()`. The provider keeps its batches in a JSON file, with a count of every `status` and `results` call, so a
test reads what the sensor asked of it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from pathlib import Path
from typing import Any, ClassVar, Iterator, Sequence

from sctc_assets.backends.base import GenerationHalted
from sctc_assets.lib import cache as cache_module
from sctc_assets.lib.batches import COLLECTED, BatchRecord, BatchStatus, LineResult
from sctc_assets.lib.cache import cache_key
from sctc_assets.lib.generation import GenerationRequest
from sctc_assets_tests.fakes import ScriptedBackend


class BatchesPending(GenerationHalted):
    """As the core's `BatchesPending`: `generate()` submitted (or found) batches that are still running."""

    def __init__(self, local_ids: Sequence[str], provider_ids: Sequence[str], answered: int = 0, remaining: int = 0):
        self.local_ids, self.provider_ids = list(local_ids), list(provider_ids)
        super().__init__(f"waiting for batch(es) {', '.join(self.local_ids)}", answered, remaining)

    def __reduce__(self):
        return (type(self), (self.local_ids, self.provider_ids, self.answered, self.remaining))


class FakeProvider:
    """Batches by provider id in a JSON file: {"batches": {id: {"state", "ended", "size"}}, "calls": {name: n}}."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def read(self) -> dict:
        return json.loads(self.path.read_text()) if self.path.exists() else {"batches": {}, "calls": {}}

    def _write(self, data: dict) -> None:
        self.path.write_text(json.dumps(data, sort_keys=True))

    def _count(self, data: dict, name: str) -> None:
        data["calls"][name] = data["calls"].get(name, 0) + 1

    def create(self, size: int) -> str:
        data = self.read()
        provider_id = f"batch_{len(data['batches']) + 1:04d}"
        data["batches"][provider_id] = {"state": "in_progress", "ended": False, "size": size}
        self._count(data, "submit")
        self._write(data)
        return provider_id

    def end(self, provider_id: str | None = None, state: str = "completed") -> None:
        """End one batch (or every batch): its results can be read."""
        data = self.read()
        for key, batch in data["batches"].items():
            if provider_id in (None, key):
                batch.update(state=state, ended=True)
        self._write(data)

    def status(self, provider_id: str) -> BatchStatus:
        data = self.read()
        self._count(data, "status")
        self._write(data)
        batch = data["batches"][provider_id]
        return BatchStatus(state=batch["state"], ended=batch["ended"], counts={"total": batch["size"]})

    def results(self, provider_id: str) -> Iterator[LineResult]:
        data = self.read()
        self._count(data, "results")
        self._write(data)
        return iter(())

    def calls(self, name: str) -> int:
        return self.read()["calls"].get(name, 0)


class FakeBatchClient:
    provider = "standin"
    max_requests = 50_000
    max_bytes = 200 * 1024 * 1024

    def __init__(self, provider: FakeProvider):
        self._provider = provider

    def status(self, provider_id: str) -> BatchStatus:
        return self._provider.status(provider_id)

    def results(self, provider_id: str) -> Iterator[LineResult]:
        return self._provider.results(provider_id)


class StandinBatchBackend(ScriptedBackend):
    """A scripted model with `batch: true`: its uncached requests become one fake batch per call (a partition);
    while that batch runs `generate()` raises `BatchesPending`; once it has ended, the next call answers them (the
    scripted answers, stored in the cache) and the record is `collected`."""

    backend_name: ClassVar[str] = "standin-batch"
    batch_api: ClassVar[str] = "standin"

    batch: bool = True
    batch_poll_seconds: float = 1.0
    provider_file: str = ""

    def batch_client(self) -> FakeBatchClient:
        return FakeBatchClient(FakeProvider(self.provider_file))

    def generate(self, requests: Sequence[GenerationRequest], *, cache=None, progress=None):
        if cache is None or not self.batch:
            return super().generate(requests, cache=cache, progress=progress)
        identity = self.identity()
        keys = list(dict.fromkeys(cache_key(identity, request) for request in requests))
        missing = sorted(set(keys) - set(cache.get_many(keys)))
        if not missing:
            return super().generate(requests, cache=cache, progress=progress)
        local_id = "sctc-" + hashlib.sha256(",".join(missing).encode()).hexdigest()[:12]
        record = cache.get_batch(local_id)
        provider = FakeProvider(self.provider_file)
        if record is None:
            now = time.time()
            record = BatchRecord(local_id=local_id, provider="standin", model=self.name, identity=identity,
                                 size=len(missing), state="in_progress", provider_id=provider.create(len(missing)),
                                 created_at=now, updated_at=0.0, expires_at=now + 26 * 3600)
            cache.record_batch(record, [])
        if not provider.read()["batches"][record.provider_id]["ended"]:
            raise BatchesPending([local_id], [record.provider_id], len(keys) - len(missing), len(missing))
        # The batch's answers, stored as they are read: the same model asked without a batch (a fresh object, so the
        # core's own batch path in `ModelBackend.generate`, where there is one, is not taken).
        results = type(self)(**{**self.model_dump(), "batch": False}).generate(requests, cache=cache, progress=progress)
        cache.update_batch(local_id, state=COLLECTED, ended=True, stored=len(missing))
        return results


# --- the cache's batch records, until the response cache has them (core): kept in memory, per test -------------
_RECORDS: dict[str, BatchRecord] = {}


def _record_batch(self, record: BatchRecord, lines: Sequence[tuple[str, str]]) -> None:
    _RECORDS[record.local_id] = dataclasses.replace(record)


def _get_batch(self, local_id: str) -> BatchRecord | None:
    record = _RECORDS.get(local_id)
    return dataclasses.replace(record) if record is not None else None


def _update_batch(self, local_id: str, **fields: Any) -> None:
    _RECORDS[local_id] = dataclasses.replace(_RECORDS[local_id], **fields)


def install_batch_records(monkeypatch) -> str:
    """Give the response cache batch records where it has none yet; "stand-in" or "cache" (the real tables)."""
    _RECORDS.clear()
    if hasattr(cache_module.ResponseCache, "get_batch"):
        return "cache"
    for name, function in (("record_batch", _record_batch), ("get_batch", _get_batch),
                           ("update_batch", _update_batch)):
        monkeypatch.setattr(cache_module.ResponseCache, name, function, raising=False)
    return "stand-in"


def write_batch_registry(folder: Path, provider_file: Path, models: Sequence[str] = ("a", "b")) -> Path:
    """A registry of `batch-<name>` models of `StandinBatchBackend`, one trial of prompt variant 1 each."""
    path = folder / "models.yaml"
    path.write_text("models:\n" + "".join(
        f"  batch-{name}: {{backend: 'sctc_assets_tests.batch_standin:StandinBatchBackend', name: {name},"
        f" provider_file: '{provider_file}', default_answer: '复印件',"
        f" benchmarks: {{term: {{trials: 1, prompt_variants: [1]}}}}}}\n" for name in models), encoding="utf-8")
    return path
