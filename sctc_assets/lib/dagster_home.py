"""The instance settings `sctc run`, `sctc report` and `sctc ui` keep in `$DAGSTER_HOME/dagster.yaml`.

Without `$SCTC_DATABASE_URL` the file only turns telemetry off, and Dagster keeps its embedded SQLite storage under
`$DAGSTER_HOME`. With it, the run, event-log and schedule storage move to that PostgreSQL database
(`dagster-postgres`, running/postgres_storage.py), so every process of a team (`sctc run` on several machines, the
UI, a daemon, run pods) sees the same runs. The file names the variable, never its value (Dagster's `env:`
indirection): the password stays out of the file, and out of the instance config the UI shows. Dagster's tables go
to the database's default schema, beside the response cache's own `sctc_cache` schema: one URL, one secret and one
backup for all shared state, and the layout Dagster's tools (`dagster instance migrate`, the Helm chart) expect.

The file is rewritten to follow the setting only while it is the one sctc wrote (its first line says so, or it is
the telemetry-only file earlier versions wrote); a `dagster.yaml` of one's own is left as it is, and its storage
settings apply (`running/instance.py`).

Pure: no Dagster.
"""

from __future__ import annotations

import os
from pathlib import Path

from sctc_assets.lib.cache_postgres import DATABASE_URL_ENV

SETTINGS_FILE = "dagster.yaml"
MARK = "# Written by sctc (sctc_assets/lib/dagster_home.py); remove this line to keep your own settings here."
# What earlier versions wrote, without the mark.
LEGACY_SETTINGS = "telemetry:\n  enabled: false\n"
# dagster-postgres's storage, on the psycopg2 driver whatever SQLAlchemy's default (running/postgres_storage.py)
POSTGRES_STORAGE = f"""storage:
  custom:
    module: sctc_assets.running.postgres_storage
    class: PostgresStorage
    config:
      postgres_url:
        env: {DATABASE_URL_ENV}
"""


def instance_settings(database: bool) -> str:
    """The text of sctc's dagster.yaml: telemetry off (an offline machine gains nothing from it, and an explicit
    file silences Dagster's warning), and with `database` the PostgreSQL storage."""
    return f"{MARK}\n{LEGACY_SETTINGS}" + (POSTGRES_STORAGE if database else "")


def is_sctc_settings(text: str) -> bool:
    return text.startswith(MARK) or text == LEGACY_SETTINGS


def uses_database(home: str | Path) -> bool:
    """Whether the instance at `home` is sctc's, on the PostgreSQL database of `$SCTC_DATABASE_URL`."""
    path = Path(home) / SETTINGS_FILE
    try:
        return path.read_text(encoding="utf-8") == instance_settings(True)
    except OSError:
        return False


def write_instance_settings(home: str | Path, database: bool | None = None) -> bool:
    """Make `home`'s dagster.yaml sctc's settings for `database` (default: whether `$SCTC_DATABASE_URL` is set),
    unless the file is one's own. Returns whether sctc's settings are in force."""
    if database is None:
        database = bool(os.environ.get(DATABASE_URL_ENV))
    path = Path(home) / SETTINGS_FILE
    wanted = instance_settings(database)
    try:
        present = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        present = None
    if present is not None and not is_sctc_settings(present):
        return False
    if present != wanted:
        # Write then rename: a UI or daemon reading the file at this moment sees the old or the new file, whole.
        partial = path.with_name(f".{SETTINGS_FILE}.{os.getpid()}")
        partial.write_text(wanted, encoding="utf-8")
        os.replace(partial, path)
    return True
