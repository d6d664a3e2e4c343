"""`sctc run` on a data folder that the same command left complete: the record of that run (`lib/run_record.py`,
`cli/unchanged_run.py`) lets the rerun print the stored summary without loading Dagster, and anything the run
reads or writes that changed, a different command, `--recheck` or a run that did not complete sends it through
every stage as before."""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from sctc_assets.cli import main, unchanged_run
from sctc_assets.lib import run_record
from sctc_assets.lib.model_registry import ModelEntry
from sctc_assets_tests.fakes import count_calls

SHORTCUT = "unchanged since the complete run of "


# --- the record -------------------------------------------------------------------------------------------------


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    (folder / "storage").mkdir(parents=True)
    (folder / "storage" / "table.parquet").write_bytes(b"rows")
    return folder


def test_the_state_sees_a_changed_added_or_removed_file_but_not_temporaries_or_the_record(tmp_path):
    folder = _folder(tmp_path)
    watched = tmp_path / "answers.csv"
    watched.write_text("a\n")
    first = run_record.state_digest([folder], [str(watched)])
    assert run_record.state_digest([folder], [str(watched)]) == first

    for name in ("table.parquet.tmp", "index.db-shm", "model.gguf.partial"):
        (folder / "storage" / name).write_bytes(b"x")
    (folder / run_record.RECORD_NAME).write_text("{}")
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "x.pyc").write_bytes(b"x")
    assert run_record.state_digest([folder], [str(watched)]) == first

    table = folder / "storage" / "table.parquet"
    stat = table.stat()
    os.utime(table, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))  # rewritten with the same bytes
    second = run_record.state_digest([folder], [str(watched)])
    assert second != first
    (folder / "storage" / "other.parquet").write_bytes(b"new")
    third = run_record.state_digest([folder], [str(watched)])
    assert third != second
    (folder / "storage" / "other.parquet").unlink()
    assert run_record.state_digest([folder], [str(watched)]) == second
    watched.write_text("a\nb\n")
    assert run_record.state_digest([folder], [str(watched)]) != second
    watched.unlink()  # a watched file that is gone is a change too
    assert run_record.state_digest([folder], [str(watched)]) != second


def test_a_record_holds_for_its_command_while_nothing_changes(tmp_path):
    folder = _folder(tmp_path)
    path = folder / run_record.RECORD_NAME
    command = run_record.command_digest(["run", "--benchmarks", "term"], {"SCTC_DATA_DIR": str(folder)})
    run_record.save(path, command=command, folders=[folder], watched=[], summary="the summary\n")
    record = run_record.unchanged(path, command)
    assert record is not None and record["summary"] == "the summary\n"

    other = run_record.command_digest(["run", "--benchmarks", "name"], {"SCTC_DATA_DIR": str(folder)})
    assert run_record.unchanged(path, other) is None
    # a setting is part of the command; the record keeps only digests of them (no secret is written)
    assert run_record.command_digest(["run"], {"SCTC_MAX_CALLS": "5"}) != run_record.command_digest(["run"], {})
    assert run_record.command_digest(["run"], {"OTHER": "5"}) == run_record.command_digest(["run"], {})
    secret = run_record.command_digest(["run"], {"SCTC_TOKEN": "s3cr3t-value"})
    run_record.save(path, command=secret, folders=[folder], watched=[], summary="")
    assert "s3cr3t" not in path.read_text()

    (folder / "storage" / "table.parquet").write_bytes(b"other rows")
    assert run_record.unchanged(path, secret) is None
    path.write_text("{not json")
    assert run_record.unchanged(path, secret) is None
    run_record.forget(path)
    run_record.forget(path)  # twice: nothing to drop is no error
    assert run_record.unchanged(path, secret) is None


def test_a_reader_of_a_database_the_run_left_does_not_change_the_state(tmp_path):
    """A SQLite database in WAL mode (the instance, the response cache) with its writer still open when the run
    records itself: the record folds the log in first, so the UI or a script that opens and closes the database
    later (which checkpoints and removes the log) changes nothing the record sees."""
    folder = _folder(tmp_path)
    database = folder / "index.db"
    writer = sqlite3.connect(database)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, body TEXT)")
    writer.executemany("INSERT INTO events (body) VALUES (?)", [("x" * 100,)] * 500)
    writer.commit()
    assert (folder / "index.db-wal").stat().st_size > 0
    path, command = folder / run_record.RECORD_NAME, "the command"
    run_record.save(path, command=command, folders=[folder], watched=[], summary="")
    writer.close()
    reader = sqlite3.connect(database)
    assert reader.execute("SELECT COUNT(*) FROM events").fetchone() == (500,)
    reader.close()
    assert run_record.unchanged(path, command) is not None
    writer = sqlite3.connect(database)
    writer.execute("INSERT INTO events (body) VALUES ('new')")
    writer.commit()
    writer.close()
    assert run_record.unchanged(path, command) is None


def test_paths_and_urls_are_found_inside_options_settings_and_registry_entries(tmp_path):
    local = tmp_path / "replay.jsonl"
    local.write_text("{}\n")
    entry = ModelEntry(key="m", backend="replay", settings={"files": {"zh_hans": str(local)}}, source="x.yaml")
    assert run_record.watched_paths({"out": None, "models": ["m"]}, [entry]) == [str(local)]
    assert run_record.remote_values([{"upstream": "https://example.org/a.tar.xz"}, entry]) == [
        "https://example.org/a.tar.xz"]
    assert run_record.remote_values({"store": "s3://bucket/tables", "n": 3}) == ["s3://bucket/tables"]
    assert run_record.remote_values([{"out": str(local)}, entry]) == []


def _namespace(**values) -> argparse.Namespace:
    defaults = {"dry_run": False, "recheck": False, "out": None, "models": ["m"], "benchmarks": ["term"]}
    return argparse.Namespace(**{**defaults, **values})


@pytest.mark.parametrize("why", ["incomplete", "sovereignty", "corpus", "database", "url", "not started"])
def test_a_run_that_did_not_complete_or_reads_what_cannot_be_watched_leaves_no_record(why, isolated_data_dir,
                                                                                    monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(isolated_data_dir / "dagster_home"))
    path = unchanged_run.record_path()
    entries = {"m": ModelEntry(key="m", backend="replay")}

    def remember(args: argparse.Namespace, benchmarks=("term",), complete=True) -> None:
        # takes the command's digest, as `sctc run` does (another command than the recorded one each time)
        assert unchanged_run.replay(args, ["run", *benchmarks, str(path.exists())]) is None
        unchanged_run.remember(args, list(benchmarks), entries, ["m"], "summary", complete=complete)

    remember(_namespace())
    assert path.is_file()  # the case each parameter breaks
    if why == "incomplete":
        remember(_namespace(), complete=False)
    elif why == "sovereignty":  # its model stages run every time
        remember(_namespace(benchmarks=["sovereignty"]), benchmarks=("sovereignty",))
    elif why == "corpus":
        remember(_namespace(benchmarks=["term", "corpus"]), benchmarks=("term", "corpus"))
    elif why == "database":
        monkeypatch.setenv("SCTC_DATABASE_URL", "postgresql://sctc:pw@127.0.0.1:1/sctc")
        remember(_namespace())
    elif why == "url":
        monkeypatch.setenv("SCTC_TABLE_STORE", "memory://tables")
        remember(_namespace())
    else:  # remember() without replay() first: the command's digest was never taken
        unchanged_run.remember(_namespace(), ["term"], entries, ["m"], "summary", complete=True)
    assert not path.exists()


# --- sctc run -------------------------------------------------------------------------------------------------


@pytest.fixture
def fake_model(isolated_data_dir, extracted_upstream, tmp_path, monkeypatch):
    calls = tmp_path / "calls.log"
    registry = tmp_path / "models.yaml"
    registry.write_text(
        "models:\n"
        f"  fake-a: {{backend: 'sctc_assets_tests.fakes:ScriptedBackend', name: a, calls_file: '{calls}',"
        " default_answer: '复印件', benchmarks: {term: {trials: 1, prompt_variants: [1]}}}\n", encoding="utf-8")
    monkeypatch.setenv("SCTC_MODELS", str(registry))
    monkeypatch.delenv("SCTC_NO_REPORT", raising=False)  # the report is part of what the rerun leaves
    return calls


def _summary(printed: str) -> str:
    """What a complete run printed from its first summary on (the lines before it name the stages it ran)."""
    return printed[printed.index("\nRegional term choice"):]


@pytest.mark.slow
def test_an_unchanged_rerun_prints_the_stored_summary_and_any_change_runs_the_stages_again(
        fake_model, isolated_data_dir, tmp_path, capsys):
    out = tmp_path / "out"
    command = ["run", "--benchmarks", "term", "--models", "fake-a", "--prompt-variants", "1", "--out", str(out)]
    assert main(command) == 0
    first = capsys.readouterr().out
    calls = count_calls(fake_model)
    assert calls > 0 and f"report: {out / 'report' / 'index.html'}" in first
    exported = {path: path.stat().st_mtime_ns for path in out.rglob("*") if path.is_file()}

    assert main(command) == 0
    again = capsys.readouterr().out
    assert again.startswith(SHORTCUT) and "DAGSTER_HOME=" not in again
    assert _summary(again) == _summary(first)  # the tables and the report's line, as the complete run printed them
    assert count_calls(fake_model) == calls
    assert {path: path.stat().st_mtime_ns for path in out.rglob("*") if path.is_file()} == exported

    # A stored table touched (as a stage run again would leave it): the stages are checked again, one by one.
    stored = next((isolated_data_dir / "storage").rglob("*.parquet"))
    os.utime(stored, ns=(stored.stat().st_atime_ns, stored.stat().st_mtime_ns + 10**9))
    assert main(command) == 0
    checked = capsys.readouterr().out
    assert not checked.startswith(SHORTCUT) and "not materialized again" in checked
    assert _summary(checked) == _summary(first)  # the report is built again: one of its tables' files changed
    # … and that run, complete again, is the new record; in a process of its own, the rerun imports no Dagster
    check = ("import sys; from sctc_assets.cli import main; status = main(sys.argv[1:]); "
             "print('imported dagster:', 'dagster' in sys.modules); sys.exit(status)")
    rerun = subprocess.run([sys.executable, "-c", check, *command], capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    assert rerun.stdout.startswith(SHORTCUT) and rerun.stdout.endswith("imported dagster: False\n")

    # Another command, or --recheck: the stages are checked.
    assert main([*command, "--no-report"]) == 0 and not capsys.readouterr().out.startswith(SHORTCUT)
    assert main([*command, "--no-report", "--recheck"]) == 0
    assert not capsys.readouterr().out.startswith(SHORTCUT)
    # The registry file is watched: an edit (even one that changes no answer) checks the stages again.
    registry = Path(os.environ["SCTC_MODELS"])
    assert main([*command, "--no-report"]) == 0 and not capsys.readouterr().out.startswith(SHORTCUT)
    assert main([*command, "--no-report"]) == 0 and capsys.readouterr().out.startswith(SHORTCUT)
    registry.write_text(registry.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    assert main([*command, "--no-report"]) == 0 and not capsys.readouterr().out.startswith(SHORTCUT)
    assert count_calls(fake_model) == calls  # every answer came from the cache throughout
    record = json.loads((isolated_data_dir / run_record.RECORD_NAME).read_text(encoding="utf-8"))
    assert str(registry) in record["watched"] and any(name.endswith("fakes.py") for name in record["watched"])
