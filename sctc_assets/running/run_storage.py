"""The SQLite run storage of `sctc run`: Dagster's own (same `runs.db`, same schema, so `sctc ui` reads what it
writes), with the per-call cost taken out, as `sctc_assets.running.event_log` does for the event log.

Dagster's `SqliteRunStorage` builds a new SQLAlchemy engine and connection for every call (several per run: the run,
its snapshots, its status, the run-stats columns), and closing the last connection of a WAL database checkpoints
it, with its fsyncs. Here one engine keeps one open connection, shared by the process's threads under a lock, with
the event log's settings (`synchronous=NORMAL`, every transaction begun IMMEDIATE, since forked workers write the
same file). Dagster also reads the `runs` table's columns back from the database before storing each run's
status (`has_run_stats_index_cols`); once they are there they stay, so a True answer is kept.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator

import sqlalchemy as db

from sctc_assets.running.dagster_internals import SqliteRunStorage
from sctc_assets.running.event_log import shared_sqlite_engine


class FastSqliteRunStorage(SqliteRunStorage):
    """`SqliteRunStorage` that keeps one connection open (see the module docstring)."""

    def __init__(self, conn_string: str, inst_data: Any = None):
        self._lock = threading.RLock()  # a call may open a connection inside another's (reentrant)
        self._open: db.engine.Connection | None = None  # the connection in use, by the thread holding the lock
        self._fast_engine: db.engine.Engine | None = None
        self._run_stats_columns = False
        super().__init__(conn_string, inst_data)

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> "FastSqliteRunStorage":
        return cls.from_local(inst_data=inst_data, **config_value)  # Dagster's creates and migrates the file

    def _engine(self) -> db.engine.Engine:
        if self._fast_engine is None:
            self._fast_engine = shared_sqlite_engine(self._conn_string)
        return self._fast_engine

    @contextmanager
    def connect(self) -> Iterator[db.engine.Connection]:
        with self._lock:
            if self._open is not None:  # a call inside another's (Dagster's data migrations): its transaction
                yield self._open
                return
            with self._engine().connect() as conn:
                with conn.begin():
                    self._open = conn
                    try:
                        yield conn
                    finally:
                        self._open = None

    def has_run_stats_index_cols(self) -> bool:
        if not self._run_stats_columns:
            self._run_stats_columns = super().has_run_stats_index_cols()
        return self._run_stats_columns

    def dispose(self) -> None:
        with self._lock:
            if self._fast_engine is not None:
                self._fast_engine.dispose()
                self._fast_engine = None
        super().dispose()
