"""What the response cache's two stores (SQLite `lib/cache.py`, PostgreSQL `lib/cache_postgres.py`) share: the keys,
the stored request identities, what a claim found, the ledger's totals and the columns `sctc cache export/import`
copies. Pure: no Dagster, no database driver."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from sctc_assets.lib.batches import BatchRecord
from sctc_assets.lib.generation import CACHEABLE_OUTCOMES, GenerationRequest, GenerationResult

# The tables `sctc cache export/import` copies, with their columns in order (claims and the ledger stay behind:
# they belong to the runs of one store).
COPIED_TABLES: dict[str, tuple[str, ...]] = {
    "responses": ("key", "backend", "model", "request", "result", "outcome", "created_at"),
    "scores": ("key", "backend", "model", "request", "logprob", "created_at"),
}


def request_identity(identity: Mapping[str, Any], request: GenerationRequest) -> dict[str, Any]:
    """What the cache key is computed from: the backend's identity plus this request's messages, trial, seed and epoch.

    The seed enters only when one is sent, so requests without a seed keep the keys they had before seeds existed;
    so does the epoch tag, only when one is set (asking again under a new tag is a new sample, never a cache hit).
    """
    payload = {
        **identity,
        "messages": [dict(message) for message in request.messages],
        "trial": request.trial,
    }
    if request.seed is not None:
        payload["seed"] = request.seed
    if request.epoch:
        payload["epoch"] = request.epoch
    return payload


def cache_key(identity: Mapping[str, Any], request: GenerationRequest) -> str:
    payload = json.dumps(request_identity(identity, request), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def score_identity(identity: Mapping[str, Any], prompt: str, continuation: str) -> dict[str, Any]:
    """What a score's cache key is computed from: the backend's scoring identity, the prompt and the continuation."""
    return {**identity, "score_prompt": prompt, "score_continuation": continuation}


def score_key(identity: Mapping[str, Any], prompt: str, continuation: str) -> str:
    payload = json.dumps(score_identity(identity, prompt, continuation), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass
class ClaimOutcome:
    """What `ResponseCache.claim` found for each key: now ours, already answered, or held by a live claim."""

    claimed: list[str] = field(default_factory=list)
    answered: dict[str, GenerationResult] = field(default_factory=dict)
    held: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class LedgerTotals:
    calls: int = 0
    cost_usd: float = 0.0
    estimated_calls: int = 0


# --- provider batches (`lib/batches.py`): the `batches` and `batch_requests` tables of both stores ---------------------

# How many rows `batch_requests(local_id)` reads at a time.
BATCH_PAGE = 2000
# The columns of `batches`, in order: one row per `BatchRecord` (identity, counts and partitions as JSON).
BATCH_COLUMNS: tuple[str, ...] = (
    "local_id", "provider", "model", "identity", "size", "state", "provider_id", "ended", "counts", "created_at",
    "updated_at", "expires_at", "estimated_cost_usd", "stored", "message", "registry_key", "partitions")
_BATCH_JSON = frozenset({"identity", "counts", "partitions"})
# What `update_batch` may change (the rest is fixed when the batch is recorded).
BATCH_UPDATABLE = frozenset({"state", "provider_id", "ended", "counts", "updated_at", "expires_at",
                             "estimated_cost_usd", "stored", "message", "registry_key", "partitions"})


def batch_row(record: BatchRecord) -> tuple:
    """A `BatchRecord` as the row `batches` stores (the columns of `BATCH_COLUMNS`)."""
    return tuple(batch_value(name, getattr(record, name)) for name in BATCH_COLUMNS)


def batch_value(name: str, value: Any) -> Any:
    """A field of a `BatchRecord` as its column stores it (JSON for the mappings and lists, 0/1 for `ended`)."""
    if name in _BATCH_JSON:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    if name == "ended":
        return int(bool(value))
    return value


def batch_record(row: tuple) -> BatchRecord:
    """The `BatchRecord` of a `batches` row read in `BATCH_COLUMNS` order."""
    values = dict(zip(BATCH_COLUMNS, row))
    for name in _BATCH_JSON:
        values[name] = json.loads(values[name]) if values[name] is not None else None
    values["ended"] = bool(values["ended"])
    values["partitions"] = values["partitions"] or []
    values["counts"] = {key: int(count) for key, count in (values["counts"] or {}).items()}
    return BatchRecord(**values)


def batch_updates(fields: Mapping[str, Any]) -> dict[str, Any]:
    """`update_batch`'s fields as column values; an unknown or fixed field is a programming error."""
    unknown = sorted(set(fields) - BATCH_UPDATABLE)
    if unknown:
        raise ValueError(f"update_batch: cannot change {', '.join(unknown)} (changeable: "
                         f"{', '.join(sorted(BATCH_UPDATABLE))})")
    return {name: batch_value(name, value) for name, value in fields.items()}


def request_json(identity: Mapping[str, Any], request: GenerationRequest) -> str:
    """The JSON a request's key is computed from: what `responses.request` and `batch_requests.request` store."""
    return json.dumps(request_identity(identity, request), sort_keys=True, ensure_ascii=False, default=str)


class BatchLines:
    """The batch methods both stores share, over what each gives: `_store(key, identity, request JSON, result)`
    and `_batch_request_page(local_id, after, limit)` (rows of `batch_requests` with a key after `after`)."""

    def store_line(self, key: str, identity: Mapping[str, Any], request: str, result: GenerationResult) -> bool:
        """`store` for a line of a provider batch, given the request JSON its batch recorded (`batch_requests`):
        whether the cache now holds an answer for `key` (False for an error, which is never stored)."""
        if result.outcome not in CACHEABLE_OUTCOMES:
            return False
        return self._store(key, identity, request, result) is not None

    def batch_requests(self, local_id: str) -> Iterator[tuple[str, str]]:
        """(key, request JSON) of every line of a batch, in key order, read a page at a time."""
        after = ""
        while True:
            page = self._batch_request_page(local_id, after, BATCH_PAGE)
            yield from page
            if len(page) < BATCH_PAGE:
                return
            after = page[-1][0]
