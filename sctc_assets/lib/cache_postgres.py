"""The response cache in PostgreSQL, for a team whose processes run on several machines (`$SCTC_DATABASE_URL`).

The same interface and the same tables as the SQLite `ResponseCache` (`lib/cache.py`: responses, scores, claims,
budget_ledger, batches, batch_requests), in a schema of their own (`sctc_cache`, created if missing). What differs:

- Claims lapse only by their lease: a claim's `expires_at` is set from the database's clock
  (`clock_timestamp()`), never the host's, and a key is taken over with one statement,
  `INSERT … ON CONFLICT (key) DO UPDATE … WHERE claims.owner = excluded.owner OR claims.expires_at <
  clock_timestamp()`; no process id is looked at, since the owner may be on another host. A provider batch's
  claims (owner `batch:<local id>`) carry the batch's own expiry (its window plus a margin), on the host's clock.
- The budget ledger is checked and counted under a transaction-scoped advisory lock on the scope, so processes on
  any host cannot overdraw it.
- Connections come from a small pool (`SCTC_DATABASE_POOL`, default 8 per process). A connection the server
  dropped (a restart) is discarded and the operation retried on a fresh one for up to `retry_s` seconds; after
  that the operation raises `CacheUnavailable` (a `ConnectionError`), and `generate()` turns an answer it could not
  store into an error result, never into a stored answer. Every operation is idempotent on retry (inserts keep the
  first row), except ledger counts, which a retry after a lost commit may count twice: a budget errs on the safe
  side.
- The URL's password never appears in a message: everything shown goes through `redacted(url)`.

Pure: no Dagster. psycopg is imported when a PostgreSQL cache is opened, so SQLite-only installs do not need it.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import threading
import time
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence
from urllib.parse import urlsplit, urlunsplit

from sctc_assets.lib.batches import ABANDONED, BATCH_OWNER_PREFIX, COLLECTED, BatchRecord, batch_owner
from sctc_assets.lib.cache_common import (BATCH_COLUMNS, COPIED_TABLES, BatchLines, ClaimOutcome, LedgerTotals,
                                          batch_record, batch_row, batch_updates, request_json, score_identity)
from sctc_assets.lib.generation import CACHEABLE_OUTCOMES, GenerationRequest, GenerationResult

DATABASE_URL_ENV = "SCTC_DATABASE_URL"
POOL_ENV = "SCTC_DATABASE_POOL"
RETRY_ENV = "SCTC_DATABASE_RETRY_S"  # how long an operation waits for a database that went away (default 15)
SCHEMA = "sctc_cache"
_SCHEMES = ("postgresql", "postgres")


class CacheUnavailable(ConnectionError):
    """The cache's database cannot be reached (or refused us); the message names the URL without its password."""


def is_database_url(location: Any) -> bool:
    return isinstance(location, str) and location.split(":", 1)[0].lower() in _SCHEMES


def redacted(url: str) -> str:
    """`url` without its password (user@host:port/db stays, so a message still says which server); a `password=`
    query parameter is masked too."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<a malformed database URL>"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:***@{hostport}" if ":" in userinfo else f"{user}@{hostport}"
    query = re.sub(r"(?i)(password=)[^&]*", r"\1***", parts.query)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def describe(url: str) -> str:
    """host:port/db of `url`, for one-line messages."""
    parts = urlsplit(url)
    return f"{parts.hostname or 'localhost'}:{parts.port or 5432}{parts.path or '/'}"


def _password(url: str) -> str | None:
    try:
        return urlsplit(url).password
    except ValueError:
        return None


def scrub(text: str, url: str) -> str:
    """`text` (a driver's message) with the URL's password and the URL itself replaced by the redacted URL."""
    password = _password(url)
    text = text.replace(url, redacted(url))
    if password:
        text = text.replace(password, "***")
    return text


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    # psycopg prefixes "connection failed: connection to server at … failed: "; the last part says why.
    reason = lines[0] if lines else type(exc).__name__
    return reason.rsplit("failed: ", 1)[-1] if "failed: " in reason else reason


def unavailable(url: str, exc: BaseException, doing: str = "connect") -> CacheUnavailable:
    """One line naming the setting and host:port/db, why, never the password."""
    reason = scrub(_first_line(exc), url)
    return CacheUnavailable(f"${DATABASE_URL_ENV} ({redacted(url)}): cannot {doing} the response cache at "
                            f"{describe(url)}: {reason}")


_TABLES = f"""
CREATE SCHEMA IF NOT EXISTS {SCHEMA};
CREATE TABLE IF NOT EXISTS {SCHEMA}.responses (
    key TEXT PRIMARY KEY, backend TEXT NOT NULL, model TEXT NOT NULL, request TEXT NOT NULL, result TEXT NOT NULL,
    outcome TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL);
CREATE INDEX IF NOT EXISTS responses_model ON {SCHEMA}.responses (model);
CREATE TABLE IF NOT EXISTS {SCHEMA}.scores (
    key TEXT PRIMARY KEY, backend TEXT NOT NULL, model TEXT NOT NULL, request TEXT NOT NULL,
    logprob DOUBLE PRECISION NOT NULL, created_at DOUBLE PRECISION NOT NULL);
CREATE TABLE IF NOT EXISTS {SCHEMA}.claims (
    key TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at TIMESTAMPTZ NOT NULL);
CREATE INDEX IF NOT EXISTS claims_owner ON {SCHEMA}.claims (owner);
CREATE TABLE IF NOT EXISTS {SCHEMA}.budget_ledger (
    scope TEXT NOT NULL, model TEXT NOT NULL, calls BIGINT NOT NULL DEFAULT 0,
    cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0, estimated_calls BIGINT NOT NULL DEFAULT 0,
    updated_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (scope, model));
CREATE TABLE IF NOT EXISTS {SCHEMA}.batches (
    local_id TEXT PRIMARY KEY, provider TEXT NOT NULL, model TEXT NOT NULL, identity TEXT NOT NULL,
    size BIGINT NOT NULL, state TEXT NOT NULL, provider_id TEXT, ended INTEGER NOT NULL DEFAULT 0,
    counts TEXT NOT NULL DEFAULT '{{}}', created_at DOUBLE PRECISION NOT NULL, updated_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL, estimated_cost_usd DOUBLE PRECISION, stored BIGINT NOT NULL DEFAULT 0,
    message TEXT, registry_key TEXT, partitions TEXT NOT NULL DEFAULT '[]');
CREATE TABLE IF NOT EXISTS {SCHEMA}.batch_requests (
    local_id TEXT NOT NULL, key TEXT NOT NULL, request TEXT NOT NULL, PRIMARY KEY (local_id, key));
"""
_NOW = "extract(epoch from clock_timestamp())"
# Claim every key that has no claim, or whose claim is this owner's or has lapsed by the database's clock.
CLAIM_SQL = f"""
INSERT INTO {SCHEMA}.claims AS c (key, owner, expires_at)
SELECT key, %(owner)s, clock_timestamp() + make_interval(secs => %(lease)s) FROM unnest(%(keys)s::text[]) AS k(key)
ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
WHERE c.owner = excluded.owner OR c.expires_at < clock_timestamp()
RETURNING key
"""

STORE_SQL = f"""
WITH inserted AS (
    INSERT INTO {SCHEMA}.responses (key, backend, model, request, result, outcome, created_at)
    VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (key) DO NOTHING RETURNING key),
dropped AS (DELETE FROM {SCHEMA}.claims WHERE key = %s)
SELECT (SELECT key FROM inserted), (SELECT result FROM {SCHEMA}.responses WHERE key = %s)
"""


class PostgresResponseCache(BatchLines):
    """Thread- and process-safe store of model answers keyed by `cache_key`, in PostgreSQL (see the module)."""

    backend = "postgresql"

    def __init__(self, url: str, *, retry_s: float | None = None, pool_size: int | None = None, connect_timeout_s: int = 5):
        import psycopg  # noqa: F401  (here, so that a SQLite-only install never needs it)

        self.url = url
        self.location = redacted(url)
        self.retry_s = float(os.environ.get(RETRY_ENV) or 15.0) if retry_s is None else retry_s
        self._connect_timeout_s = connect_timeout_s
        self._pool_size = max(1, pool_size or int(os.environ.get(POOL_ENV) or 8))
        self._idle: queue.LifoQueue = queue.LifoQueue()
        self._open = 0
        self._lock = threading.Lock()
        with self._connection() as connection:  # one line, naming the setting, for a wrong URL or password
            self._create_schema(connection)

    def __repr__(self) -> str:
        return f"PostgresResponseCache({self.location!r})"

    # --- connections -------------------------------------------------------------------------------------------------

    def _new_connection(self):
        import psycopg

        try:
            return psycopg.connect(self.url, connect_timeout=self._connect_timeout_s, autocommit=True,
                                   application_name="sctc-response-cache")
        except psycopg.Error as exc:
            raise unavailable(self.url, exc) from None

    def _create_schema(self, connection) -> None:
        import psycopg

        try:
            with connection.transaction():
                # One creator at a time: CREATE … IF NOT EXISTS races between sessions otherwise.
                connection.execute("SELECT pg_advisory_xact_lock(hashtext('sctc_cache.schema'))")
                connection.execute(_TABLES)
        except psycopg.errors.InsufficientPrivilege as exc:
            raise CacheUnavailable(
                f"${DATABASE_URL_ENV} ({self.location}): the database user may not create the schema {SCHEMA!r} or "
                f"its tables at {describe(self.url)}: {scrub(_first_line(exc), self.url)} (grant CREATE on the "
                f"database, or create the schema for this user)") from None

    @contextlib.contextmanager
    def _connection(self) -> Iterator[Any]:
        try:
            connection = self._idle.get_nowait()
        except queue.Empty:
            connection = None
        if connection is None:
            with self._lock:
                room = self._open < self._pool_size
                if room:
                    self._open += 1
            if room:
                try:
                    connection = self._new_connection()
                except BaseException:
                    with self._lock:
                        self._open -= 1
                    raise
            else:
                connection = self._idle.get()
        healthy = True
        try:
            yield connection
        except BaseException:
            healthy = not connection.closed and not connection.broken
            raise
        finally:
            if healthy and not connection.closed:
                self._idle.put(connection)
            else:
                with contextlib.suppress(Exception):
                    connection.close()
                with self._lock:
                    self._open -= 1

    def _run(self, operation: Callable[[Any], Any], doing: str) -> Any:
        """`operation(connection)` on a pooled connection, retried on a fresh one while the server is away (for up
        to `retry_s`); then `CacheUnavailable`. Deadlocks and serialization failures are retried too."""
        import psycopg

        deadline = time.monotonic() + self.retry_s
        delay = 0.05
        while True:
            try:
                with self._connection() as connection:
                    return operation(connection)
            except (psycopg.OperationalError, psycopg.errors.DeadlockDetected, CacheUnavailable,
                    psycopg.InterfaceError) as exc:
                if time.monotonic() >= deadline:
                    raise (exc if isinstance(exc, CacheUnavailable) else unavailable(self.url, exc, doing)) from None
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def _query(self, sql: str, parameters: Any = None, doing: str = "read") -> list[tuple]:
        return self._run(lambda connection: connection.execute(sql, parameters).fetchall(), doing)

    # --- responses ---------------------------------------------------------------------------------------------------

    def get(self, key: str) -> GenerationResult | None:
        rows = self._query(f"SELECT result FROM {SCHEMA}.responses WHERE key = %s", (key,))
        return GenerationResult.from_record(json.loads(rows[0][0]), cached=True) if rows else None

    def get_many(self, keys: list[str]) -> dict[str, GenerationResult]:
        if not keys:
            return {}
        rows = self._query(f"SELECT key, result FROM {SCHEMA}.responses WHERE key = ANY(%s)", (list(keys),))
        return {key: GenerationResult.from_record(json.loads(result), cached=True) for key, result in rows}

    def put(self, key: str, identity: Mapping[str, Any], request: GenerationRequest, result: GenerationResult) -> bool:
        return self.store(key, identity, request, result) is not None

    def store(self, key: str, identity: Mapping[str, Any], request: GenerationRequest,
              result: GenerationResult) -> GenerationResult | None:
        """Store `result` (unless it is a transport error) and drop the key's claim; return what the cache holds
        (the first answer stored for the key). Raises `CacheUnavailable` when the database stays away."""
        if result.outcome not in CACHEABLE_OUTCOMES:
            return None
        return self._store(key, identity, request_json(identity, request), result)

    def _store(self, key: str, identity: Mapping[str, Any], request: str,
               result: GenerationResult) -> GenerationResult:
        row = (key, str(identity.get("backend", "")), str(identity.get("model", "")), request,
               json.dumps(result.to_record(), ensure_ascii=False), result.outcome, time.time())

        def operation(connection) -> str | None:
            # One statement, one round trip (autocommit: its own transaction): insert unless present, drop the
            # claim, and read what an earlier writer stored (visible in this statement's snapshot).
            inserted, earlier = connection.execute(STORE_SQL, (*row, key, key)).fetchone()
            if inserted is not None:
                return None
            if earlier is None:  # another writer committed after this statement's snapshot: read it now
                earlier = connection.execute(f"SELECT result FROM {SCHEMA}.responses WHERE key = %s",
                                             (key,)).fetchone()[0]
            return earlier

        stored = self._run(operation, "store an answer in")
        # A retry after a commit whose reply was lost finds our own row: the same answer either way.
        return result if stored is None or stored == row[4] else \
            GenerationResult.from_record(json.loads(stored), cached=True)

    # --- claims ------------------------------------------------------------------------------------------------------

    def claim(self, keys: list[str], owner: str, *, lease_s: float):
        """Claim the unanswered keys no unexpired claim of another owner holds, for `lease_s` seconds (database
        clock). Keys are inserted in sorted order, so two claimers of overlapping keys cannot deadlock."""
        outcome = ClaimOutcome()
        if not keys:
            return outcome
        ordered = sorted(set(keys))

        def operation(connection):
            with connection.transaction():
                claimed = {row[0] for row in connection.execute(
                    CLAIM_SQL, {"owner": owner, "lease": float(lease_s), "keys": ordered}).fetchall()}
                # Read after claiming (a fresh snapshot): an answer stored meanwhile is served, not asked again.
                answered = dict(connection.execute(
                    f"SELECT key, result FROM {SCHEMA}.responses WHERE key = ANY(%s)", (ordered,)).fetchall())
                done = sorted(claimed & set(answered))
                if done:
                    connection.execute(f"DELETE FROM {SCHEMA}.claims WHERE owner = %s AND key = ANY(%s)",
                                       (owner, done))
            return claimed, answered

        claimed, answered = self._run(operation, "claim keys in")
        for key in keys:
            if key in answered:
                outcome.answered[key] = GenerationResult.from_record(json.loads(answered[key]), cached=True)
            elif key in claimed:
                outcome.claimed.append(key)
            else:
                outcome.held.append(key)
        return outcome

    def renew_claims(self, owner: str, *, lease_s: float) -> None:
        self._run(lambda connection: connection.execute(
            f"UPDATE {SCHEMA}.claims SET expires_at = clock_timestamp() + make_interval(secs => %s) WHERE owner = %s",
            (float(lease_s), owner)), "renew claims in")

    def release_claims(self, owner: str, keys: list[str] | None = None) -> None:
        if keys is None:
            self._run(lambda connection: connection.execute(
                f"DELETE FROM {SCHEMA}.claims WHERE owner = %s", (owner,)), "release claims in")
        elif keys:
            self._run(lambda connection: connection.execute(
                f"DELETE FROM {SCHEMA}.claims WHERE owner = %s AND key = ANY(%s)", (owner, list(keys))),
                "release claims in")

    # --- provider batches (lib/batches.py) -------------------------------------------------------------------------

    def record_batch(self, record: BatchRecord, lines: Sequence[tuple[str, str]]) -> None:
        """In one transaction: the batch's row, a `batch_requests` row per (key, request JSON) of `lines`, and the
        keys' claims moved to the owner `batch:<local id>` until `record.expires_at`. Called before the submission
        is sent. Idempotent on retry (a lost commit's reply): the record already there is kept."""
        owner = batch_owner(record.local_id)
        keys = [key for key, _ in lines]
        requests = [request for _, request in lines]

        def operation(connection) -> None:
            with connection.transaction():
                connection.execute(
                    f"INSERT INTO {SCHEMA}.batches ({', '.join(BATCH_COLUMNS)}) VALUES "
                    f"({', '.join(['%s'] * len(BATCH_COLUMNS))}) ON CONFLICT (local_id) DO NOTHING", batch_row(record))
                for start in range(0, len(keys), 5000):
                    chunk_keys, chunk_requests = keys[start : start + 5000], requests[start : start + 5000]
                    connection.execute(
                        f"INSERT INTO {SCHEMA}.batch_requests (local_id, key, request) SELECT %s, k, r FROM "
                        "unnest(%s::text[], %s::text[]) AS t(k, r) ON CONFLICT (local_id, key) DO NOTHING",
                        (record.local_id, chunk_keys, chunk_requests))
                    connection.execute(
                        f"INSERT INTO {SCHEMA}.claims AS c (key, owner, expires_at) SELECT k, %s, to_timestamp(%s) "
                        "FROM unnest(%s::text[]) AS t(k) ORDER BY k ON CONFLICT (key) DO UPDATE SET "
                        "owner = excluded.owner, expires_at = excluded.expires_at",
                        (owner, float(record.expires_at), sorted(chunk_keys)))

        self._run(operation, "record a batch in")

    def update_batch(self, local_id: str, **fields: Any) -> None:
        """Change a recorded batch's fields (state, provider id, counts …; `updated_at` is set to now unless given)."""
        values = batch_updates({"updated_at": time.time(), **fields})
        self._run(lambda connection: connection.execute(
            f"UPDATE {SCHEMA}.batches SET {', '.join(f'{name} = %s' for name in values)} WHERE local_id = %s",
            [*values.values(), local_id]), "update a batch in")

    def get_batch(self, local_id: str) -> BatchRecord | None:
        rows = self._query(f"SELECT {', '.join(BATCH_COLUMNS)} FROM {SCHEMA}.batches WHERE local_id = %s",
                           (local_id,))
        return batch_record(rows[0]) if rows else None

    def batches(self, *, open_only: bool = False, model: str | None = None) -> list[BatchRecord]:
        """The recorded batches, newest first: all, or those not yet collected or abandoned; of one model or all."""
        where, parameters = [], []
        if open_only:
            where.append("state <> ALL(%s)")
            parameters.append([COLLECTED, ABANDONED])
        if model is not None:
            where.append("model = %s")
            parameters.append(model)
        sql = f"SELECT {', '.join(BATCH_COLUMNS)} FROM {SCHEMA}.batches"
        if where:
            sql += " WHERE " + " AND ".join(where)
        return [batch_record(row) for row in self._query(sql + " ORDER BY created_at DESC, local_id DESC",
                                                         parameters)]

    def _batch_request_page(self, local_id: str, after: str, limit: int) -> list[tuple[str, str]]:
        return self._query(f"SELECT key, request FROM {SCHEMA}.batch_requests WHERE local_id = %s AND key > %s"
                           " ORDER BY key LIMIT %s", (local_id, after, limit))

    def batches_holding(self, keys: list[str]) -> dict[str, str]:
        """key → local id of the open batch whose unexpired claim (database clock) holds it."""
        if not keys:
            return {}
        rows = self._query(f"SELECT key, owner FROM {SCHEMA}.claims WHERE key = ANY(%s) AND owner LIKE %s"
                           " AND expires_at > clock_timestamp()", (list(keys), BATCH_OWNER_PREFIX + "%"))
        return {key: owner[len(BATCH_OWNER_PREFIX):] for key, owner in rows}

    # --- budget ledger -----------------------------------------------------------------------------------------------

    def reserve_calls(self, scope: str, model: str, wanted: int, allowance) -> int:
        def operation(connection) -> int:
            with connection.transaction():
                connection.execute("SELECT pg_advisory_xact_lock(hashtext('sctc_cache.ledger'), hashtext(%s))",
                                   (scope,))
                scope_totals = self._totals(connection, "WHERE scope = %s", (scope,))
                model_totals = self._totals(connection, "WHERE scope = %s AND model = %s", (scope, model))
                granted = max(0, min(wanted, allowance(scope_totals, model_totals)))
                if granted:
                    self._add(connection, scope, model, calls=granted)
            return granted

        return self._run(operation, "count calls in")

    def record_cost(self, scope: str, model: str, cost_usd: float, *, estimated: bool = False) -> None:
        self._run(lambda connection: self._add(connection, scope, model, cost_usd=cost_usd,
                                               estimated_calls=int(estimated)), "count cost in")

    def refund_calls(self, scope: str, model: str, calls: int) -> None:
        if calls:
            self._run(lambda connection: self._add(connection, scope, model, calls=-calls), "refund calls in")

    def ledger(self, scope: str):
        rows = self._query(f"SELECT model, calls, cost_usd, estimated_calls FROM {SCHEMA}.budget_ledger"
                           f" WHERE scope = %s", (scope,))
        return {model: LedgerTotals(int(calls), float(cost), int(estimated)) for model, calls, cost, estimated in rows}

    @staticmethod
    def _totals(connection, where: str, parameters: tuple):
        calls, cost, estimated = connection.execute(
            f"SELECT COALESCE(SUM(calls), 0), COALESCE(SUM(cost_usd), 0), COALESCE(SUM(estimated_calls), 0)"
            f" FROM {SCHEMA}.budget_ledger {where}", parameters).fetchone()
        return LedgerTotals(int(calls), float(cost), int(estimated))

    @staticmethod
    def _add(connection, scope: str, model: str, *, calls: int = 0, cost_usd: float = 0.0,
             estimated_calls: int = 0) -> None:
        connection.execute(
            f"INSERT INTO {SCHEMA}.budget_ledger AS l (scope, model, calls, cost_usd, estimated_calls, updated_at)"
            f" VALUES (%s, %s, %s, %s, %s, {_NOW}) ON CONFLICT (scope, model) DO UPDATE SET"
            " calls = l.calls + excluded.calls, cost_usd = l.cost_usd + excluded.cost_usd,"
            " estimated_calls = l.estimated_calls + excluded.estimated_calls, updated_at = excluded.updated_at",
            (scope, model, calls, cost_usd, estimated_calls))

    # --- scores and inspection ---------------------------------------------------------------------------------------

    def get_scores(self, keys: list[str]) -> dict[str, float]:
        if not keys:
            return {}
        rows = self._query(f"SELECT key, logprob FROM {SCHEMA}.scores WHERE key = ANY(%s)", (list(keys),))
        return {key: float(logprob) for key, logprob in rows}

    def put_score(self, key: str, identity: Mapping[str, Any], prompt: str, continuation: str, logprob: float) -> None:
        request = json.dumps(score_identity(identity, prompt, continuation), sort_keys=True, ensure_ascii=False,
                             default=str)
        self._run(lambda connection: connection.execute(
            f"INSERT INTO {SCHEMA}.scores (key, backend, model, request, logprob, created_at)"
            " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (key) DO NOTHING",
            (key, str(identity.get("backend", "")), str(identity.get("model", "")), request, float(logprob),
             time.time())),
            "store a score in")

    def stored_requests(self, model: str) -> list[str]:
        return [row[0] for row in self._query(f"SELECT request FROM {SCHEMA}.responses WHERE model = %s", (model,))]

    def count_since(self, since: float) -> int:
        """Answers stored since `since` (time.time() of the storing hosts), by every process."""
        return int(self._query(f"SELECT COUNT(*) FROM {SCHEMA}.responses WHERE created_at >= %s", (since,))[0][0])

    def count(self, *, model: str | None = None) -> int:
        if model is None:
            return int(self._query(f"SELECT COUNT(*) FROM {SCHEMA}.responses")[0][0])
        return int(self._query(f"SELECT COUNT(*) FROM {SCHEMA}.responses WHERE model = %s", (model,))[0][0])

    # --- copying (sctc cache export/import) --------------------------------------------------------------------------

    def rows(self, table: str) -> Iterator[tuple]:
        """Every row of `responses` or `scores`, in key order (the columns of `lib.cache.COPIED_TABLES`)."""
        columns = ", ".join(COPIED_TABLES[table])
        return iter(self._query(f"SELECT {columns} FROM {SCHEMA}.{table} ORDER BY key"))

    def add_rows(self, table: str, rows: Iterable[tuple]) -> int:
        """Insert rows that are not here yet (a key already here keeps its row); returns how many were new."""
        columns = COPIED_TABLES[table]
        rows = list(rows)
        sql = (f"INSERT INTO {SCHEMA}.{table} ({', '.join(columns)}) SELECT * FROM unnest("
               + ", ".join(f"%s::{kind}[]" for kind in _COLUMN_TYPES[table]) + ") ON CONFLICT (key) DO NOTHING")

        def operation(connection) -> int:
            added = 0
            with connection.transaction():
                for start in range(0, len(rows), 5000):
                    chunk = rows[start : start + 5000]
                    added += connection.execute(sql, [list(column) for column in zip(*chunk)]).rowcount
            return added

        return self._run(operation, "copy rows into") if rows else 0

    def close(self) -> None:
        while True:
            try:
                connection = self._idle.get_nowait()
            except queue.Empty:
                return
            with contextlib.suppress(Exception):
                connection.close()
            with self._lock:
                self._open -= 1


_COLUMN_TYPES = {
    "responses": ("text", "text", "text", "text", "text", "text", "double precision"),
    "scores": ("text", "text", "text", "text", "double precision", "double precision"),
}
