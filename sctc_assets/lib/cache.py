"""The one response cache every model call goes through.

SQLite in WAL mode: several processes (a Dagster backfill runs one per partition) can read and write at once.
Each answer is committed as soon as it arrives, so a run killed mid-partition and started again pays for nothing
twice. Successful answers and refusals are stored; transport errors never are, so a retry tries them again.
The key covers everything that changes an answer (backend, endpoint, model, full messages, generation
parameters, trial index, the seed sent) and nothing secret: API keys are never part of a request identity.
Teacher-forced log-probabilities (`ModelBackend.score`) live in a second table, `scores`, keyed by the backend's
scoring identity, the prompt and the continuation.

Two more tables coordinate processes that share the cache:
- `claims`: a process about to ask a key claims it (a lease with an expiry, renewed while it works); others wait
  for the answer instead of paying for it too. A claim lapses when it expires, when its owner (a process on this
  host) is gone, or when the owner releases it without an answer (an error), and a waiter then takes the key over.
- `budget_ledger`: new calls and their cost per budget scope and model, so every partition and process of one run
  draws on one budget (`sctc_assets.lib.budget`).
- `batches` and `batch_requests`: provider batches (`lib/batches.py`, `lib/batch_driver.py`), recorded with the
  request of each line before the batch is submitted. Their keys are claimed by the owner `batch:<local id>`,
  which no process outlives: such a claim lapses only at the batch's `expires_at` (its window plus a margin).

With `$SCTC_DATABASE_URL` set, the same tables live in PostgreSQL instead (`lib/cache_postgres.py`), for processes
on several hosts; `open_cache()` picks the store, and every place that opens the cache goes through it.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from sctc_assets.lib.batches import ABANDONED, BATCH_OWNER_PREFIX, COLLECTED, BatchRecord, batch_owner
from sctc_assets.lib.cache_common import (BATCH_COLUMNS, COPIED_TABLES, BatchLines, ClaimOutcome, LedgerTotals,
                                          batch_record, batch_row, batch_updates, cache_key, request_identity,
                                          request_json, score_identity, score_key)
from sctc_assets.lib.cache_postgres import (DATABASE_URL_ENV, CacheUnavailable, PostgresResponseCache,
                                            is_database_url, redacted)
from sctc_assets.lib.generation import CACHEABLE_OUTCOMES, GenerationRequest, GenerationResult
from sctc_assets.lib.paths import default_cache_path

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


_CLAIMS_SCHEMA = """
CREATE TABLE IF NOT EXISTS claims (
    key TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    expires_at REAL NOT NULL
)
"""
_LEDGER_SCHEMA = """
CREATE TABLE IF NOT EXISTS budget_ledger (
    scope TEXT NOT NULL,
    model TEXT NOT NULL,
    calls INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL DEFAULT 0,
    estimated_calls INTEGER NOT NULL DEFAULT 0,
    updated_at REAL NOT NULL,
    PRIMARY KEY (scope, model)
)
"""
# Provider batches (`lib/batches.py`): one row per batch, and the request of each of its lines (the JSON its key is
# computed from), so that any process can store a line's answer without the submitter's request objects.
_BATCHES_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS batches (
    local_id TEXT PRIMARY KEY, provider TEXT NOT NULL, model TEXT NOT NULL, identity TEXT NOT NULL,
    size INTEGER NOT NULL, state TEXT NOT NULL, provider_id TEXT, ended INTEGER NOT NULL DEFAULT 0,
    counts TEXT NOT NULL DEFAULT '{{}}', created_at REAL NOT NULL, updated_at REAL NOT NULL, expires_at REAL NOT NULL,
    estimated_cost_usd REAL, stored INTEGER NOT NULL DEFAULT 0, message TEXT, registry_key TEXT,
    partitions TEXT NOT NULL DEFAULT '[]')
"""
_BATCH_REQUESTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS batch_requests (
    local_id TEXT NOT NULL, key TEXT NOT NULL, request TEXT NOT NULL, PRIMARY KEY (local_id, key))
"""
_CLAIMS_OWNER_INDEX = "CREATE INDEX IF NOT EXISTS claims_owner ON claims (owner)"
_HOST = socket.gethostname()


def new_claim_owner() -> str:
    """A claim owner id: host and process (so a dead owner on this host is recognised at once) and a random part."""
    return f"{_HOST}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def _owner_alive(owner: str) -> bool:
    if owner.startswith(BATCH_OWNER_PREFIX):
        return True  # an open provider batch: its claim lapses only at its expiry, never with a process
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != _HOST or not pid_text.isdigit():
        return True  # another machine: only the lease's expiry can tell
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ResponseCache(BatchLines):
    """Thread- and process-safe store of model answers keyed by `cache_key`, in one SQLite file."""

    backend = "sqlite"

    def __init__(self, path: str | Path, *, timeout_s: float = 60.0):
        self.path = Path(path)
        self.location = str(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._timeout_s = timeout_s
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        with self._connect() as connection:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute(_SCHEMA)
            connection.execute(_SCORES_SCHEMA)
            connection.execute(_CLAIMS_SCHEMA)
            connection.execute(_LEDGER_SCHEMA)
            connection.execute(_BATCHES_SCHEMA)
            connection.execute(_BATCH_REQUESTS_SCHEMA)
            connection.execute(_CLAIMS_OWNER_INDEX)

    def _connect(self) -> sqlite3.Connection:
        """This thread's connection (one per thread, made on its first use). It is used only by its own thread, but
        made with `check_same_thread=False` so that `close()` can close it from another: a `generate()` that ran
        past a claim's renewal has a connection in the claim-renewal thread, which `close()` must close too."""
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = sqlite3.connect(self.path, timeout=self._timeout_s, isolation_level=None,
                                         check_same_thread=False)
            connection.execute("PRAGMA busy_timeout = %d" % int(self._timeout_s * 1000))
            connection.execute("PRAGMA synchronous=NORMAL")
            self._local.connection = connection
            with self._connections_lock:
                self._connections.append(connection)
        return connection

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken at once (BEGIN IMMEDIATE) so read-then-write cannot race another process."""
        connection = self._connect()
        connection.execute("BEGIN IMMEDIATE")
        try:
            yield connection
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")

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
        """Store `result` unless it is a transport error. Returns whether the cache now holds an answer for `key`."""
        return self.store(key, identity, request, result) is not None

    def store(self, key: str, identity: Mapping[str, Any], request: GenerationRequest,
              result: GenerationResult) -> GenerationResult | None:
        """Store `result` (unless it is a transport error) and drop the key's claim; return what the cache holds.

        The first answer stored for a key is kept: when another process stored one first, that one is returned
        (marked cached), so every table built from the results agrees with the cache.
        """
        if result.outcome not in CACHEABLE_OUTCOMES:
            return None
        return self._store(key, identity, request_json(identity, request), result)

    def _store(self, key: str, identity: Mapping[str, Any], request: str,
               result: GenerationResult) -> GenerationResult:
        record = json.dumps(result.to_record(), ensure_ascii=False)
        with self._write() as connection:
            inserted = connection.execute(
                "INSERT OR IGNORE INTO responses (key, backend, model, request, result, outcome, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    key,
                    str(identity.get("backend", "")),
                    str(identity.get("model", "")),
                    request,
                    record,
                    result.outcome,
                    time.time(),
                ),
            ).rowcount
            connection.execute("DELETE FROM claims WHERE key = ?", (key,))
            if inserted:
                return result
            stored = connection.execute("SELECT result FROM responses WHERE key = ?", (key,)).fetchone()
        return GenerationResult.from_record(json.loads(stored[0]), cached=True)

    # --- claims: which process asks which key --------------------------------------------------------------------

    def claim(self, keys: list[str], owner: str, *, lease_s: float) -> ClaimOutcome:
        """Claim the unanswered keys no live claim of another owner holds, for `lease_s` seconds."""
        outcome = ClaimOutcome()
        if not keys:
            return outcome
        now = time.time()
        with self._write() as connection:
            marks = ",".join("?" * len(keys))
            answered = dict(connection.execute(
                f"SELECT key, result FROM responses WHERE key IN ({marks})", keys).fetchall())
            holders = {key: (holder, expires) for key, holder, expires in connection.execute(
                f"SELECT key, owner, expires_at FROM claims WHERE key IN ({marks})", keys).fetchall()}
            free = []
            for key in keys:
                if key in answered:
                    outcome.answered[key] = GenerationResult.from_record(json.loads(answered[key]), cached=True)
                    continue
                holder = holders.get(key)
                if holder is not None and holder[0] != owner and holder[1] > now and _owner_alive(holder[0]):
                    outcome.held.append(key)
                    continue
                free.append(key)
            connection.executemany("INSERT OR REPLACE INTO claims (key, owner, expires_at) VALUES (?, ?, ?)",
                                   [(key, owner, now + lease_s) for key in free])
            outcome.claimed = free
        return outcome

    def renew_claims(self, owner: str, *, lease_s: float) -> None:
        with self._write() as connection:
            connection.execute("UPDATE claims SET expires_at = ? WHERE owner = ?", (time.time() + lease_s, owner))

    def release_claims(self, owner: str, keys: list[str] | None = None) -> None:
        """Drop `owner`'s claims (all of them, or those on `keys`): waiters may take those keys over."""
        with self._write() as connection:
            if keys is None:
                connection.execute("DELETE FROM claims WHERE owner = ?", (owner,))
                return
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                connection.execute(f"DELETE FROM claims WHERE owner = ? AND key IN ({','.join('?' * len(chunk))})",
                                   [owner, *chunk])

    # --- provider batches (lib/batches.py) -------------------------------------------------------------------------

    def record_batch(self, record: BatchRecord, lines: Sequence[tuple[str, str]]) -> None:
        """In one transaction: the batch's row, a `batch_requests` row per (key, request JSON) of `lines`, and the
        keys' claims moved to the owner `batch:<local id>` until `record.expires_at`. Called before the submission
        is sent, so a crash at any later point leaves a record another process resolves (`find`) or collects."""
        owner = batch_owner(record.local_id)
        with self._write() as connection:
            connection.execute(f"INSERT INTO batches ({', '.join(BATCH_COLUMNS)}) VALUES "
                               f"({', '.join('?' * len(BATCH_COLUMNS))})", batch_row(record))
            connection.executemany("INSERT OR REPLACE INTO batch_requests (local_id, key, request) VALUES (?, ?, ?)",
                                   [(record.local_id, key, request) for key, request in lines])
            connection.executemany("INSERT OR REPLACE INTO claims (key, owner, expires_at) VALUES (?, ?, ?)",
                                   [(key, owner, record.expires_at) for key, _ in lines])

    def update_batch(self, local_id: str, **fields: Any) -> None:
        """Change a recorded batch's fields (state, provider id, counts …; `updated_at` is set to now unless given)."""
        values = batch_updates({"updated_at": time.time(), **fields})
        with self._write() as connection:
            connection.execute(f"UPDATE batches SET {', '.join(f'{name} = ?' for name in values)} WHERE local_id = ?",
                               [*values.values(), local_id])

    def get_batch(self, local_id: str) -> BatchRecord | None:
        row = self._connect().execute(f"SELECT {', '.join(BATCH_COLUMNS)} FROM batches WHERE local_id = ?",
                                      (local_id,)).fetchone()
        return batch_record(row) if row is not None else None

    def batches(self, *, open_only: bool = False, model: str | None = None) -> list[BatchRecord]:
        """The recorded batches, newest first: all, or those not yet collected or abandoned; of one model or all."""
        where, parameters = [], []
        if open_only:
            where.append("state NOT IN (?, ?)")
            parameters += [COLLECTED, ABANDONED]
        if model is not None:
            where.append("model = ?")
            parameters.append(model)
        sql = f"SELECT {', '.join(BATCH_COLUMNS)} FROM batches"
        if where:
            sql += " WHERE " + " AND ".join(where)
        rows = self._connect().execute(sql + " ORDER BY created_at DESC, local_id DESC", parameters).fetchall()
        return [batch_record(row) for row in rows]

    def _batch_request_page(self, local_id: str, after: str, limit: int) -> list[tuple[str, str]]:
        return self._connect().execute(
            "SELECT key, request FROM batch_requests WHERE local_id = ? AND key > ? ORDER BY key LIMIT ?",
            (local_id, after, limit)).fetchall()


    def batches_holding(self, keys: list[str]) -> dict[str, str]:
        """key → local id of the open batch whose live claim holds it, for those of `keys` a batch holds."""
        rows = self._rows_for_keys("SELECT key, owner, expires_at FROM claims WHERE key IN ({placeholders})",
                                   list(keys))
        now = time.time()
        return {key: owner[len(BATCH_OWNER_PREFIX):] for key, owner, expires in rows
                if owner.startswith(BATCH_OWNER_PREFIX) and expires > now}

    # --- budget ledger -------------------------------------------------------------------------------------------

    def reserve_calls(self, scope: str, model: str, wanted: int,
                      allowance: Callable[[LedgerTotals, LedgerTotals], int]) -> int:
        """Count up to `wanted` new calls of `model` in `scope`; `allowance(scope totals, model totals)` says how
        many the budget still allows. Checked and counted in one transaction, so processes cannot overdraw."""
        with self._write() as connection:
            scope_totals = self._totals(connection, "WHERE scope = ?", (scope,))
            model_totals = self._totals(connection, "WHERE scope = ? AND model = ?", (scope, model))
            granted = max(0, min(wanted, allowance(scope_totals, model_totals)))
            if granted:
                self._add(connection, scope, model, calls=granted)
        return granted

    def record_cost(self, scope: str, model: str, cost_usd: float, *, estimated: bool = False) -> None:
        with self._write() as connection:
            self._add(connection, scope, model, cost_usd=cost_usd, estimated_calls=int(estimated))

    def refund_calls(self, scope: str, model: str, calls: int) -> None:
        """Give back calls that were counted but never started (a halted partition)."""
        if calls:
            with self._write() as connection:
                self._add(connection, scope, model, calls=-calls)

    def ledger(self, scope: str) -> dict[str, LedgerTotals]:
        rows = self._connect().execute(
            "SELECT model, calls, cost_usd, estimated_calls FROM budget_ledger WHERE scope = ?", (scope,)).fetchall()
        return {model: LedgerTotals(calls, cost, estimated) for model, calls, cost, estimated in rows}

    @staticmethod
    def _totals(connection: sqlite3.Connection, where: str, parameters: tuple) -> LedgerTotals:
        calls, cost, estimated = connection.execute(
            f"SELECT COALESCE(SUM(calls), 0), COALESCE(SUM(cost_usd), 0), COALESCE(SUM(estimated_calls), 0)"
            f" FROM budget_ledger {where}", parameters).fetchone()
        return LedgerTotals(int(calls), float(cost), int(estimated))

    @staticmethod
    def _add(connection: sqlite3.Connection, scope: str, model: str, *, calls: int = 0, cost_usd: float = 0.0,
             estimated_calls: int = 0) -> None:
        connection.execute(
            "INSERT INTO budget_ledger (scope, model, calls, cost_usd, estimated_calls, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (scope, model) DO UPDATE SET calls = calls + excluded.calls,"
            " cost_usd = cost_usd + excluded.cost_usd, estimated_calls = estimated_calls + excluded.estimated_calls,"
            " updated_at = excluded.updated_at",
            (scope, model, calls, cost_usd, estimated_calls, time.time()))

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

    def count_since(self, since: float) -> int:
        """Answers stored since `since` (time.time()), by every process."""
        return self._connect().execute("SELECT COUNT(*) FROM responses WHERE created_at >= ?", (since,)).fetchone()[0]

    def count(self, *, model: str | None = None) -> int:
        if model is None:
            return self._connect().execute("SELECT COUNT(*) FROM responses").fetchone()[0]
        return self._connect().execute("SELECT COUNT(*) FROM responses WHERE model = ?", (model,)).fetchone()[0]

    # --- copying (sctc cache export/import) ----------------------------------------------------------------------

    def rows(self, table: str) -> Iterator[tuple]:
        """Every row of `responses` or `scores`, in key order (the columns of `COPIED_TABLES`)."""
        return iter(self._connect().execute(
            f"SELECT {', '.join(COPIED_TABLES[table])} FROM {table} ORDER BY key").fetchall())

    def add_rows(self, table: str, rows: Iterable[tuple]) -> int:
        """Insert rows that are not here yet (a key already here keeps its row); returns how many were new."""
        columns = COPIED_TABLES[table]
        with self._write() as connection:
            before = connection.total_changes
            connection.executemany(f"INSERT OR IGNORE INTO {table} ({', '.join(columns)})"
                                   f" VALUES ({', '.join('?' * len(columns))})", list(rows))
            return connection.total_changes - before

    def close(self) -> None:
        """Close the connections of every thread that used this cache, from whichever thread calls it (after those
        threads have finished with it: the work queue joins its claim-renewal thread first)."""
        with self._connections_lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            connection.close()
        self._local = threading.local()


Cache = ResponseCache | PostgresResponseCache


def database_url() -> str | None:
    """`$SCTC_DATABASE_URL` when set: the response cache (and its claims and ledger) lives in that PostgreSQL."""
    return os.environ.get(DATABASE_URL_ENV) or None


def open_cache(location: str | Path | None = None) -> Cache:
    """The response cache: at `location` (a SQLite file or a postgresql:// URL) when given; else in
    `$SCTC_DATABASE_URL` when set; else the SQLite file of the data folder. Raises `CacheUnavailable` (one line,
    naming the setting, never the password) when the database cannot be reached or used."""
    if location is None:
        location = database_url()
    if location is None:
        location = default_cache_path()
    if is_database_url(location):
        return PostgresResponseCache(str(location))
    return ResponseCache(location)


def cache_exists(location: str | Path | None = None) -> bool:
    """Whether opening the cache would find one (a database always counts; a SQLite file when it exists)."""
    if location is None and database_url():
        return True
    if location is None:
        location = default_cache_path()
    return is_database_url(location) or Path(location).exists()


def copy_cache(source: Cache, target: Cache) -> dict[str, tuple[int, int]]:
    """Copy every answer, refusal and score of `source` into `target` (not the claims or the ledger); a key the
    target already holds keeps its row, so copying twice adds nothing. Returns table → (rows read, rows added)."""
    copied = {}
    for table in COPIED_TABLES:
        rows = list(source.rows(table))
        copied[table] = (len(rows), target.add_rows(table, rows))
    return copied


__all__ = ["COPIED_TABLES", "Cache", "CacheUnavailable", "ClaimOutcome", "DATABASE_URL_ENV", "LedgerTotals",
           "PostgresResponseCache", "ResponseCache", "cache_exists", "cache_key", "copy_cache", "database_url",
           "new_claim_owner", "open_cache", "redacted", "request_identity", "score_identity", "score_key"]
