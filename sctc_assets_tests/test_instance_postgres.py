"""The Dagster instance on PostgreSQL (`$SCTC_DATABASE_URL`, lib/dagster_home.py), against a real server
(`sctc_assets_tests/postgres.py`): the settings sctc writes, the password kept out of every file, log and answer,
bad settings caught before anything runs, and a Dagster daemon with the queued run coordinator backfilling four
model partitions as separate run processes, which a real `dagster-webserver` shows over GraphQL."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from sctc_assets.cli import _prepare_environment, main
from sctc_assets.lib.dagster_home import (LEGACY_SETTINGS, SETTINGS_FILE, instance_settings, uses_database,
                                          write_instance_settings)
from sctc_assets.running.instance import cli_instance
from sctc_assets_tests.daemon_backfill import INSTANCE, STARTED_PROCESS, Servers, partitions, prepare_inputs
from sctc_assets_tests.postgres import REQUIRE_ENV, refused_run_line

REPO = Path(__file__).resolve().parents[1]
QUEUE_EVENTS = (dg.DagsterEventType.RUN_ENQUEUED, dg.DagsterEventType.RUN_START, dg.DagsterEventType.RUN_SUCCESS)


@pytest.fixture
def dagster_postgres() -> None:
    """dagster-postgres (the `postgres` extra, in `dev`), else a skip; a failure where PostgreSQL is required (CI)."""
    try:
        import dagster_postgres  # noqa: F401
    except ImportError:
        message = "dagster-postgres is not installed (pip install -e '.[dev]')"
        if os.environ.get(REQUIRE_ENV):
            pytest.fail(f"{message}; ${REQUIRE_ENV} is set")
        pytest.skip(message)


def test_sctc_writes_its_settings_and_follows_the_setting_but_leaves_a_file_of_ones_own(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    settings = home / SETTINGS_FILE
    assert write_instance_settings(home, database=False) and not uses_database(home)
    assert "storage" not in settings.read_text()
    assert write_instance_settings(home, database=True) and uses_database(home)
    assert "env: SCTC_DATABASE_URL" in settings.read_text()
    assert write_instance_settings(home, database=False) and not uses_database(home)  # back to SQLite
    settings.write_text(LEGACY_SETTINGS)  # what earlier versions wrote is sctc's too
    assert write_instance_settings(home, database=True) and settings.read_text() == instance_settings(True)
    own = "telemetry:\n  enabled: true\nrun_queue:\n  max_concurrent_runs: 2\n"
    settings.write_text(own)
    assert not write_instance_settings(home, database=True) and settings.read_text() == own
    assert not uses_database(home)


def test_a_file_of_ones_own_is_kept_and_sctc_says_so_once(tmp_path, capsys, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    own = "run_queue:\n  max_concurrent_runs: 2\n"
    (home / SETTINGS_FILE).write_text(own)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv("SCTC_DATABASE_URL", "postgresql://u:pw-not-shown@127.0.0.1:1/db")
    _prepare_environment(argparse.Namespace(command="report"))
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "is not sctc's" in lines[0] and "$SCTC_DATABASE_URL applies to the response cache" \
        in lines[0] and "pw-not-shown" not in lines[0]
    assert (home / SETTINGS_FILE).read_text() == own


def test_the_storage_names_the_psycopg2_driver(dagster_postgres):
    from sctc_assets.running.postgres_storage import psycopg2_url

    assert psycopg2_url("postgresql://u:p@h:1/d?sslmode=require") == "postgresql+psycopg2://u:p@h:1/d?sslmode=require"
    assert psycopg2_url("postgres://u:p@h/d") == "postgresql+psycopg2://u:p@h/d"
    assert psycopg2_url("postgresql+pg8000://u@h/d") == "postgresql+pg8000://u@h/d"


def test_without_the_setting_the_instance_keeps_sqlite(isolated_data_dir, monkeypatch):
    monkeypatch.delenv("SCTC_DATABASE_URL", raising=False)
    home = isolated_data_dir / "dagster_home"
    home.mkdir()
    write_instance_settings(home)
    with cli_instance(home) as instance:
        assert type(instance.run_storage).__name__ == "FastSqliteRunStorage"
        assert type(instance.event_log_storage).__name__ == "FastSqliteEventLogStorage"


def test_the_instance_on_postgresql_keeps_the_password_out_of_its_file_and_config(postgres_server, dagster_postgres,
                                                                                   tmp_path, monkeypatch):
    url = postgres_server.create_database("inst")
    monkeypatch.setenv("SCTC_DATABASE_URL", url)
    home = tmp_path / "home"
    home.mkdir()
    assert write_instance_settings(home)
    assert postgres_server.password not in (home / SETTINGS_FILE).read_text()
    with cli_instance(home) as instance:
        assert [type(storage).__name__ for storage in (instance.run_storage, instance.event_log_storage,
                                                       instance.schedule_storage)] == [
            "PostgresRunStorage", "PostgresEventLogStorage", "PostgresScheduleStorage"]
        assert instance.run_storage._engine.dialect.driver == "psycopg2"  # noqa: SLF001
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        assert postgres_server.password not in instance.info_str()
        run = instance.create_run_for_job(dg.GraphDefinition("nothing").to_job(), run_id="0" * 8 + "-0000-0000-0000-"
                                          + "0" * 12)
    # Another process (another host, in a deployment) sees the run: it is in the database, not under $DAGSTER_HOME.
    # Its URL in the form SQLAlchemy refuses but the response cache takes.
    monkeypatch.setenv("SCTC_DATABASE_URL", url.replace("postgresql://", "postgres://"))
    other = tmp_path / "other"
    other.mkdir()
    assert write_instance_settings(other)
    with cli_instance(other) as instance:
        assert instance.get_run_by_id(run.run_id) is not None
    import psycopg

    with psycopg.connect(url) as connection:  # Dagster's tables in the default schema, beside sctc_cache
        tables = {row[0] for row in connection.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")}
    assert {"runs", "event_logs", "instigators"} <= tables




def test_bad_settings_of_the_instance_are_one_line_before_anything_runs(postgres_server, isolated_data_dir,
                                                                         capsys, monkeypatch):
    secret = postgres_server.password
    wrong = postgres_server.url(password="not-the-" + secret[:6] + "zz")
    for command in (["ui", "--port", "1"], ["report"]):
        monkeypatch.setenv("SCTC_DATABASE_URL", wrong)
        assert main(command) == 2, command
        errors = capsys.readouterr().err.strip().splitlines()
        assert len(errors) == 1 and "$SCTC_DATABASE_URL" in errors[0], errors
        assert "password authentication failed" in errors[0] and secret[:6] + "zz" not in errors[0]
    line = refused_run_line("mysql://user:" + secret + "@127.0.0.1/db", capsys, monkeypatch)
    assert "expected a postgresql:// URL" in line and secret not in line


def test_without_dagster_postgres_the_run_stops_before_anything_runs(postgres_server, isolated_data_dir, capsys,
                                                                    monkeypatch):
    monkeypatch.setitem(sys.modules, "dagster_postgres", None)  # as if not installed
    line = refused_run_line(postgres_server.url(), capsys, monkeypatch)
    assert "dagster-postgres" in line and "pip install 'sctc-assets[postgres]'" in line
    assert postgres_server.password not in line


@pytest.mark.slow
def test_a_daemon_backfills_four_model_partitions_on_the_postgresql_instance_and_the_ui_shows_them(
        postgres_server, dagster_postgres, isolated_data_dir, extracted_upstream, tmp_path, monkeypatch):
    secret = postgres_server.password
    home = isolated_data_dir / "dagster_home"
    home.mkdir()
    monkeypatch.setenv("SCTC_DATABASE_URL", postgres_server.create_database("backfill"))
    monkeypatch.setenv("SCTC_MODELS", str(REPO / "data" / "models.yaml"))
    assert write_instance_settings(home)
    started = time.monotonic()
    prepare_inputs(home)
    keys = partitions()
    prepared = time.monotonic()

    with Servers(home, tmp_path / "logs") as servers:
        serving = time.monotonic()
        info = servers.graphql(INSTANCE)["instance"]
        assert info["runQueuingSupported"] and info["runLauncher"]["name"] == "DefaultRunLauncher"
        assert "run_storage: PostgresRunStorage" in info["info"] and secret not in info["info"]
        backfill, runs, elapsed = servers.backfill(keys, timeout=240, until_marked_done=False)
        logs = {name: path.read_text(errors="replace") for name, path in servers.log_files().items()}

    assert len(runs) == 4 and all(run["status"] == "SUCCESS" for run in runs), runs
    ran = sorted(tag["value"] for run in runs for tag in run["tags"] if tag["key"] == "dagster/partition")
    assert ran == sorted(keys)
    with cli_instance(home) as instance:
        pids = set()
        for run in runs:
            events = instance.all_logs(run["runId"])
            # through the queue: enqueued by the backfill daemon, launched by the run coordinator's daemon
            kinds = [event.dagster_event_type for event in events if event.is_dagster_event]
            order = [kind for kind in kinds if kind in QUEUE_EVENTS]
            assert order == list(QUEUE_EVENTS), order
            text = "\n".join(str(event.message or "") for event in events)
            pids.update(STARTED_PROCESS.findall(text))
            assert secret not in text
        assert len(pids) == 4 and str(os.getpid()) not in pids  # four run processes, none of them this one
        assert instance.get_materialized_partitions(dg.AssetKey("term_labels")) == set(keys)
    for name, text in logs.items():
        assert secret not in text, name
    print(f"inputs {prepared - started:.1f} s, daemon and webserver up {serving - prepared:.1f} s, backfill of "
          f"{len(keys)} partitions on PostgreSQL {elapsed:.1f} s from launch to its runs' end")
