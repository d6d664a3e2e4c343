"""The Dagster instance on PostgreSQL (`$SCTC_DATABASE_URL`, lib/dagster_home.py), against a real server
(`sctc_assets_tests/postgres.py`): the settings sctc writes, the password kept out of every file, log and answer,
bad settings caught before anything runs, and a Dagster daemon with the queued run coordinator backfilling four
model partitions as separate run processes, which a real `dagster-webserver` shows over GraphQL."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import dagster as dg
import pytest

from sctc_assets.cli import main
from sctc_assets.lib.dagster_home import (LEGACY_SETTINGS, SETTINGS_FILE, instance_settings, uses_database,
                                          write_instance_settings)
from sctc_assets.partitions import MODELS_PARTITION_NAME
from sctc_assets.running.instance import cli_instance
from sctc_assets.running.postgres_storage import psycopg2_url

REPO = Path(__file__).resolve().parents[1]
MODELS = ("paper-qwen", "paper-breeze", "paper-gpt4o", "paper-llama3-8b")
PARTITIONS = [f"zh_hans|{model}" for model in MODELS]
JOB = "term_model_lang"
LOCATION = {"repositoryLocationName": "sctc_assets", "repositoryName": "__repository__"}
LAUNCH = """mutation ($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
  __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message stack }
  ... on PartitionSetNotFoundError { message } ... on InvalidSubsetError { message } } }"""
RUNS = """query ($tags: [ExecutionTag!]) { runsOrError(filter: {tags: $tags}) { __typename
  ... on Runs { results { runId status tags { key value } } } } }"""
BACKFILL = """query ($id: String!) { partitionBackfillOrError(backfillId: $id) { __typename
  ... on PartitionBackfill { status } } }"""
INSTANCE = "{ instance { info runLauncher { name } runQueuingSupported } }"
STARTED_PROCESS = re.compile(r"Started process for run \(pid: (\d+)\)")


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


def test_the_storage_names_the_psycopg2_driver():
    assert psycopg2_url("postgresql://u:p@h:1/d?sslmode=require") == "postgresql+psycopg2://u:p@h:1/d?sslmode=require"
    assert psycopg2_url("postgres://u:p@h/d") == "postgresql+psycopg2://u:p@h/d"
    assert psycopg2_url("postgresql+pg8000://u@h/d") == "postgresql+pg8000://u@h/d"


def test_without_the_setting_the_instance_keeps_sqlite(isolated_data_dir, monkeypatch):
    monkeypatch.delenv("SCTC_DATABASE_URL", raising=False)
    home = isolated_data_dir / "dagster_home"
    home.mkdir()
    write_instance_settings(home)
    with cli_instance(home) as instance:
        assert type(instance.run_storage).__name__ == "SqliteRunStorage"
        assert type(instance.event_log_storage).__name__ == "FastSqliteEventLogStorage"


def test_the_instance_on_postgresql_keeps_the_password_out_of_its_file_and_config(postgres_server, tmp_path,
                                                                                   monkeypatch):
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


def _bad_run(url: str, capsys, monkeypatch) -> str:
    monkeypatch.setenv("SCTC_DATABASE_URL", url)
    assert main(["run", "--benchmarks", "term", "--models", "anything"]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 1, errors  # one line, before any stage runs
    return errors[0]


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
    line = _bad_run("mysql://user:" + secret + "@127.0.0.1/db", capsys, monkeypatch)
    assert "expected a postgresql:// URL" in line and secret not in line


def test_without_dagster_postgres_the_run_stops_before_anything_runs(postgres_server, isolated_data_dir, capsys,
                                                                    monkeypatch):
    monkeypatch.setitem(sys.modules, "dagster_postgres", None)  # as if not installed
    line = _bad_run(postgres_server.url(), capsys, monkeypatch)
    assert "dagster-postgres" in line and "pip install 'sctc-assets[postgres]'" in line
    assert postgres_server.password not in line


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _graphql(port: int, query: str, variables: dict | None = None) -> dict:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", method="POST",
                                     data=json.dumps({"query": query, "variables": variables or {}}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        answer = json.loads(response.read())
    assert "errors" not in answer, answer
    return answer["data"]


def _wait_for_server(port: int, process: subprocess.Popen, log: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"dagster-webserver exited with {process.returncode}: {log.read_text()[-3000:]}"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"dagster-webserver did not answer within {timeout:.0f} s")


def _stop(processes: list[subprocess.Popen]) -> None:
    """SIGTERM to every process group (each its own session: the daemon's code server and runs go too), then
    SIGKILL to what is left after 30 s."""
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    for process in processes:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        try:  # the group may outlive its leader (a run process)
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(timeout=30)


@pytest.mark.slow
def test_a_daemon_backfills_four_model_partitions_on_the_postgresql_instance_and_the_ui_shows_them(
        postgres_server, isolated_data_dir, extracted_upstream, tmp_path, monkeypatch):
    secret = postgres_server.password
    url = postgres_server.create_database("backfill")
    home = isolated_data_dir / "dagster_home"
    home.mkdir()
    env = {"SCTC_DATABASE_URL": url, "DAGSTER_HOME": str(home), "SCTC_MODELS": str(REPO / "data" / "models.yaml"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert write_instance_settings(home)

    with cli_instance(home) as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION_NAME, list(MODELS))
        from sctc_assets.definitions import defs

        # The model-independent inputs the partitions read, in this process
        assert defs.resolve_job_def("term_inputs").execute_in_process(instance=instance).success

    logs = {name: tmp_path / f"{name}.log" for name in ("daemon", "webserver")}
    port = _free_port()
    workspace = str(REPO / "workspace.yaml")
    # This interpreter's daemon: its script sits beside it in the virtual environment
    commands = {"daemon": [str(Path(sys.executable).parent / "dagster-daemon"), "run", "-w", workspace],
                "webserver": [sys.executable, "-m", "dagster_webserver", "-h", "127.0.0.1", "-p", str(port),
                              "-w", workspace]}
    processes: list[subprocess.Popen] = []
    started = time.monotonic()
    try:
        for name, command in commands.items():
            with open(logs[name], "wb") as log:
                processes.append(subprocess.Popen(command, cwd=REPO, env=dict(os.environ), stdout=log,
                                                  stderr=subprocess.STDOUT, start_new_session=True))
        _wait_for_server(port, processes[1], logs["webserver"])
        info = _graphql(port, INSTANCE)["instance"]
        assert info["runQueuingSupported"] and info["runLauncher"]["name"] == "DefaultRunLauncher"
        assert "PostgresRunStorage" in info["info"] and secret not in info["info"]

        launched = _graphql(port, LAUNCH, {"params": {
            "selector": {"partitionSetName": f"{JOB}_partition_set", "repositorySelector": LOCATION},
            "partitionNames": PARTITIONS, "fromFailure": False,
            # One process per run, as a person picks it in the launchpad: Dagster's default executor starts one more
            # process per step (a fresh import of the definitions each), minutes on a small test machine.
            "runConfigData": {"execution": {"config": {"in_process": {}}}}}})["launchPartitionBackfill"]
        assert launched["__typename"] == "LaunchBackfillSuccess", launched
        backfill = launched["backfillId"]

        deadline = time.monotonic() + 240
        while True:
            runs = _graphql(port, RUNS, {"tags": [{"key": "dagster/backfill", "value": backfill}]}
                            )["runsOrError"]["results"]
            status = _graphql(port, BACKFILL, {"id": backfill})["partitionBackfillOrError"]["status"]
            # The backfill daemon marks a job backfill done once all its runs have ended
            if status == "COMPLETED_SUCCESS":
                break
            failed = [run for run in runs if run["status"] in ("FAILURE", "CANCELED")]
            assert not failed and status in ("REQUESTED",), (status, failed, _tail(logs))
            assert time.monotonic() < deadline, (status, runs, _tail(logs))
            time.sleep(1)
        elapsed = time.monotonic() - started
    finally:
        _stop(processes)
    assert len(runs) == 4 and all(run["status"] == "SUCCESS" for run in runs), runs

    partitions = sorted({tag["value"] for run in runs for tag in run["tags"] if tag["key"] == "dagster/partition"})
    assert partitions == sorted(PARTITIONS)
    with cli_instance(home) as instance:
        pids = set()
        for run in runs:
            text = "\n".join(str(event.message or "") for event in instance.all_logs(run["runId"]))
            pids.update(STARTED_PROCESS.findall(text))
            assert secret not in text
        assert len(pids) == 4 and str(os.getpid()) not in pids  # four run processes, none of them this one
        labelled = instance.get_materialized_partitions(dg.AssetKey("term_labels"))
        assert labelled == set(PARTITIONS)
    for name, log in logs.items():
        assert secret not in log.read_text(errors="replace"), name
    print(f"backfill of {len(PARTITIONS)} partitions on PostgreSQL: {elapsed:.1f} s from starting the daemon")


def _tail(logs: dict[str, Path]) -> str:
    return "\n".join(f"--- {name}\n{log.read_text(errors='replace')[-2500:]}" for name, log in logs.items())
