"""The Dagster instance's storage on `$SCTC_DATABASE_URL`'s PostgreSQL (lib/dagster_home.py writes the settings):
dagster-postgres's run, event-log and schedule storage, always through psycopg2.

dagster-postgres hands its URL to SQLAlchemy, and SQLAlchemy 2.1 takes a plain `postgresql://` URL to the psycopg
(3) driver, under which dagster-postgres's `NOTIFY run_events, :id` fails (psycopg binds parameters on the server,
where NOTIFY takes none): every event a run writes would fail. dagster-postgres installs psycopg2 and is written
for it, so the URL is given its driver explicitly, `postgresql+psycopg2://`; `postgres://`, which SQLAlchemy
refuses but the response cache takes, is read the same way. Everything else is dagster-postgres's own.
"""

from __future__ import annotations

from typing import Any

from dagster_postgres import DagsterPostgresStorage
from dagster_postgres.utils import pg_url_from_config

DRIVER_SCHEME = "postgresql+psycopg2"


def psycopg2_url(url: str) -> str:
    """`url` with the psycopg2 driver named, unless it names a driver already."""
    scheme, separator, rest = url.partition("://")
    return f"{DRIVER_SCHEME}://{rest}" if separator and scheme.lower() in ("postgresql", "postgres") else url


class PostgresStorage(DagsterPostgresStorage):
    """`DagsterPostgresStorage` (same config: `postgres_url` or `postgres_db`) on the psycopg2 driver."""

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> "PostgresStorage":  # type: ignore[override]
        return cls(inst_data=inst_data, postgres_url=psycopg2_url(pg_url_from_config(config_value)),
                   should_autocreate_tables=config_value.get("should_autocreate_tables", True))
