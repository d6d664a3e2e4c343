"""The one response cache every model call goes through.

SQLite in WAL mode: several processes (a Dagster backfill runs one per partition) can read and write at once.
Each answer is committed as soon as it arrives, so a run killed mid-partition and started again pays for nothing
twice. Successful answers and refusals are stored; transport errors never are, so a retry tries them again.
The key covers everything that changes an answer (backend, endpoint, model, full messages, generation
parameters, trial index) and nothing secret: API keys are never part of a request identity.
Teacher-forced log-probabilities (`ModelBackend.score`) live in a second table, `scores`, keyed by the backend's
scoring identity, the prompt and the continuation.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Mapping

from sctc_assets.lib.generation import CACHEABLE_OUTCOMES, GenerationRequest, GenerationResult

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    backend TEXT NOT NULL,
    model TEXT NOT NULL,
    request TEXT NOT NULL,
    result TEXT NOT NULL,
    outcome TEXT NOT NULL,
    created_at REAL NOT NULL
)
"""
# Teacher-forced log-probabilities, a separate table so caches written before it existed keep working.
_SCORES_SCHEMA = """
CREATE TABLE IF NOT EXISTS scores (
    key TEXT PRIMARY KEY,
    backend TEXT NOT NULL,
    model TEXT NOT NULL,
    request TEXT NOT NULL,
    logprob REAL NOT NULL,
    created_at REAL NOT NULL
)
"""


def request_identity(identity: Mapping[str, Any], request: GenerationRequest) -> dict[str, Any]:
    """What the cache key is computed from: the backend's identity plus this request's messages and trial."""
    return {
        **identity,
        "messages": [dict(message) for message in request.messages],
        "trial": request.trial,
    }


def cache_key(identity: Mapping[str, Any], request: GenerationRequest) -> str:
    payload = json.dumps(request_identity(identity, request), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def score_identity(identity: Mapping[str, Any], prompt: str, continuation: str) -> dict[str, Any]:
    """What a score's cache key is computed from: the backend's scoring identity, the prompt and the continuation."""
    return {**identity, "score_prompt": prompt, "score_continuation": continuation}


def score_key(identity: Mapping[str, Any], prompt: str, continuation: str) -> str:
    payload = json.dumps(score_identity(identity, prompt, continuation), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class ResponseCache:
    """Thread- and process-safe store of model answers keyed by `cache_key`."""

    def __init__(self, path: str | Path, *, timeout_s: float = 60.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._timeout_s = timeout_s
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        with self._connect() as connection:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute(_SCHEMA)
            connection.execute(_SCORES_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = sqlite3.connect(self.path, timeout=self._timeout_s, isolation_level=None)
            connection.execute("PRAGMA busy_timeout = %d" % int(self._timeout_s * 1000))
            connection.execute("PRAGMA synchronous=NORMAL")
            self._local.connection = connection
            with self._connections_lock:
                self._connections.append(connection)
        return connection

    def get(self, key: str) -> GenerationResult | None:
        row = self._connect().execute("SELECT result FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        return GenerationResult.from_record(json.loads(row[0]), cached=True)

    def _rows_for_keys(self, query: str, keys: list[str]) -> list[tuple]:
        """Run `query` (its `{placeholders}` stands for the key list) over `keys` in chunks SQLite accepts."""
        connection = self._connect()
        rows: list[tuple] = []
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            rows += connection.execute(query.format(placeholders=",".join("?" * len(chunk))), chunk).fetchall()
        return rows

    def get_many(self, keys: list[str]) -> dict[str, GenerationResult]:
        rows = self._rows_for_keys("SELECT key, result FROM responses WHERE key IN ({placeholders})", keys)
        return {key: GenerationResult.from_record(json.loads(result), cached=True) for key, result in rows}

    def put(self, key: str, identity: Mapping[str, Any], request: GenerationRequest, result: GenerationResult) -> bool:
        """Store `result` unless it is a transport error. Returns whether it was stored."""
        if result.outcome not in CACHEABLE_OUTCOMES:
            return False
        self._connect().execute(
            "INSERT OR IGNORE INTO responses (key, backend, model, request, result, outcome, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                key,
                str(identity.get("backend", "")),
                str(identity.get("model", "")),
                json.dumps(request_identity(identity, request), sort_keys=True, ensure_ascii=False, default=str),
                json.dumps(result.to_record(), ensure_ascii=False),
                result.outcome,
                time.time(),
            ),
        )
        return True

    def get_scores(self, keys: list[str]) -> dict[str, float]:
        rows = self._rows_for_keys("SELECT key, logprob FROM scores WHERE key IN ({placeholders})", keys)
        return {key: float(logprob) for key, logprob in rows}

    def put_score(self, key: str, identity: Mapping[str, Any], prompt: str, continuation: str, logprob: float) -> None:
        self._connect().execute(
            "INSERT OR IGNORE INTO scores (key, backend, model, request, logprob, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (
                key,
                str(identity.get("backend", "")),
                str(identity.get("model", "")),
                json.dumps(score_identity(identity, prompt, continuation), sort_keys=True, ensure_ascii=False, default=str),
                float(logprob),
                time.time(),
            ),
        )

    def stored_requests(self, model: str) -> list[str]:
        """The stored request identity (the JSON its key was computed from) of every answer of `model`."""
        return [row[0] for row in self._connect().execute("SELECT request FROM responses WHERE model = ?", (model,))]

    def count(self, *, model: str | None = None) -> int:
        if model is None:
            return self._connect().execute("SELECT COUNT(*) FROM responses").fetchone()[0]
        return self._connect().execute("SELECT COUNT(*) FROM responses WHERE model = ?", (model,)).fetchone()[0]

    def close(self) -> None:
        """Close the connections of every thread that used this cache."""
        with self._connections_lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            connection.close()
        self._local = threading.local()
