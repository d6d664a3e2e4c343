"""The SQLite event log of `sctc run`: Dagster's own storage (same files, same schema, so `sctc ui` reads what it
writes), with the per-event cost taken out.

Dagster's `SqliteEventLogStorage` builds a new SQLAlchemy engine, opens a connection, commits and closes it for
every event it stores, and closing the last connection of a WAL database checkpoints the WAL into the database
file, with its fsyncs. A replayed partition's run stores some forty events, so this was about a sixth of a cold
`sctc run`. Here each shard (the index and the runs being written) keeps one engine and one open connection, and
commits with `synchronous=NORMAL`, which in WAL mode still survives a crash of the process (only an operating
system crash or power loss can lose the last commits; the answers themselves are in the response cache and the
Parquet files). At most `_OPEN_SHARDS` run shards stay open; a run's shard is closed when a newer one is opened.
A new run shard is created with the schema and alembic stamp of the first one Dagster created in the process,
instead of Dagster's migration check and DDL for each.
"""

from __future__ import annotations

import os
import sqlite3
from collections import OrderedDict
from contextlib import contextmanager
from typing import Any, Iterator

import sqlalchemy as db
from sqlalchemy.pool import StaticPool

from sctc_assets.running.dagster_internals import INDEX_SHARD_NAME, SQLITE_BUSY_TIMEOUT_SECONDS, SqliteEventLogStorage

_OPEN_SHARDS = 4


def _schema_of(path: str) -> tuple[list[str], str] | None:
    """The DDL of a run shard Dagster created (tables and indexes, in creation order) and its alembic stamp."""
    connection = sqlite3.connect(path)
    try:
        statements = [row[0] for row in connection.execute(
            "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid")]
        versions = [row[0] for row in connection.execute("SELECT version_num FROM alembic_version")]
    except sqlite3.Error:
        return None
    finally:
        connection.close()
    return (statements, versions[0]) if len(versions) == 1 and statements else None


def _pragmas(connection: Any, _record: Any) -> None:
    cursor = connection.cursor()
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()
    connection.isolation_level = None  # transactions are begun by `_begin_immediate`, not by the driver


def _begin_immediate(connection: Any) -> None:
    """Every transaction takes the write lock when it begins, waiting up to the busy timeout for it. A deferred
    one that read first and then writes fails at once ("database is locked") when another process wrote in between,
    since its read snapshot is stale: worker processes of `sctc run` share these files."""
    connection.exec_driver_sql("BEGIN IMMEDIATE")


def shared_sqlite_engine(url: str) -> db.engine.Engine:
    """An engine holding one SQLite connection, kept open and shared by the process's threads (every use under the
    caller's lock), committing with `synchronous=NORMAL` and beginning every transaction IMMEDIATE."""
    engine = db.create_engine(url, poolclass=StaticPool,
                              connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS, "check_same_thread": False})
    db.event.listen(engine, "connect", _pragmas)
    db.event.listen(engine, "begin", _begin_immediate)
    return engine


class FastSqliteEventLogStorage(SqliteEventLogStorage):
    """`SqliteEventLogStorage` that keeps a connection per shard open (see the module docstring)."""

    def __init__(self, base_dir: str, inst_data: Any = None):
        self._engines: OrderedDict[str, db.engine.Engine] = OrderedDict()
        self._shard_schema: tuple[list[str], str] | None = None
        super().__init__(base_dir, inst_data=inst_data)

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> "FastSqliteEventLogStorage":
        return cls(inst_data=inst_data, **config_value)

    def _engine(self, shard: str) -> db.engine.Engine:
        engine = self._engines.get(shard)
        if engine is not None:
            self._engines.move_to_end(shard)
            return engine
        # One connection per shard, kept open and shared by the threads of concurrent models' runs; every use holds
        # `_db_lock`. (A connection per thread let one thread's connection keep a read snapshot that another's
        # write made stale, and its next write failed at once with "database is locked".)
        engine = shared_sqlite_engine(self.conn_string_for_shard(shard))
        if shard not in self._initialized_dbs:
            self._init_shard(shard, engine)
            self._initialized_dbs.add(shard)
        self._engines[shard] = engine
        runs_open = [name for name in self._engines if name != INDEX_SHARD_NAME]
        for name in runs_open[:-_OPEN_SHARDS]:
            self._engines.pop(name).dispose()
        return engine

    def _init_shard(self, shard: str, engine: db.engine.Engine) -> None:
        """Dagster's schema check and creation (`_initdb`: the alembic revision read from its scripts, SQLAlchemy's
        DDL, a stamp) for the first run shard of the process; each later new run shard gets the same schema and
        stamp copied from that one, in one transaction (a tenth of a second less per run)."""
        path = self.path_for_shard(shard)
        if shard == INDEX_SHARD_NAME or self._shard_schema is None or os.path.exists(path):
            self._initdb(engine)
            if shard != INDEX_SHARD_NAME and self._shard_schema is None:
                self._shard_schema = _schema_of(path)
            return
        statements, version = self._shard_schema
        connection = sqlite3.connect(path, timeout=SQLITE_BUSY_TIMEOUT_SECONDS)
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            with connection:
                for statement in statements:
                    connection.execute(statement)
                connection.execute("INSERT INTO alembic_version (version_num) VALUES (?)", (version,))
        finally:
            connection.close()

    def _check_partitions_table(self) -> None:
        # Dagster inspects the schema for this table before every dynamic-partitions query (several per run); once
        # it exists it stays.
        if not getattr(self, "_partitions_table_found", False):
            super()._check_partitions_table()
            self._partitions_table_found = True

    @contextmanager
    def _connect(self, shard: str) -> Iterator[db.engine.Connection]:
        with self._db_lock:
            with self._engine(shard).connect() as conn:
                with conn.begin():
                    yield conn

    def dispose(self) -> None:
        with self._db_lock:
            for engine in self._engines.values():
                engine.dispose()
            self._engines.clear()
        super().dispose()
