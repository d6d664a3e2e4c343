"""What the response cache's two stores (SQLite `lib/cache.py`, PostgreSQL `lib/cache_postgres.py`) share: the keys,
the stored request identities, what a claim found, the ledger's totals and the columns `sctc cache export/import`
copies. Pure: no Dagster, no database driver."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from sctc_assets.lib.generation import GenerationRequest, GenerationResult

# The tables `sctc cache export/import` copies, with their columns in order (claims and the ledger stay behind:
# they belong to the runs of one store).
COPIED_TABLES: dict[str, tuple[str, ...]] = {
    "responses": ("key", "backend", "model", "request", "result", "outcome", "created_at"),
    "scores": ("key", "backend", "model", "request", "logprob", "created_at"),
}


def request_identity(identity: Mapping[str, Any], request: GenerationRequest) -> dict[str, Any]:
    """What the cache key is computed from: the backend's identity plus this request's messages, trial and seed.

    The seed enters only when one is sent, so requests without a seed keep the keys they had before seeds existed.
    """
    payload = {
        **identity,
        "messages": [dict(message) for message in request.messages],
        "trial": request.trial,
    }
    if request.seed is not None:
        payload["seed"] = request.seed
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
