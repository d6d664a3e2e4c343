"""The response cache on a real PostgreSQL server (`sctc_assets_tests/postgres.py` starts one): the password never
shown, bad settings caught before any stage runs, `sctc cache export/import` round trips, a server restart, and two
"hosts" (processes with separate data folders, only the database shared) asking the same prompts of a stub OpenAI
endpoint, one of them killed with SIGKILL. The contract tests of both stores are in test_registry_and_cache.py."""

from __future__ import annotations

import json
import os
import threading
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sctc_assets.backends.base import GenerationHalted, ModelBackend
from sctc_assets.cli import main
from sctc_assets.lib.cache import CacheUnavailable, cache_key, open_cache
from sctc_assets.lib.cache_postgres import describe, redacted
from sctc_assets.lib.generation import GenerationRequest, GenerationResult
from sctc_assets_tests.openai_stub_server import StubOpenAIServer
from sctc_assets_tests.pg_host import KEY_ENV
from sctc_assets_tests.postgres import refused_run_line

REPO = Path(__file__).resolve().parents[1]
PROMPTS = 1320
CONCURRENCY = 8


def test_redacted_keeps_user_host_port_and_database_but_never_the_password():
    assert redacted("postgresql://sctc:s3cr%40t@db.lab:6543/cache") == "postgresql://sctc:***@db.lab:6543/cache"
    assert redacted("postgresql://sctc@db.lab/cache") == "postgresql://sctc@db.lab/cache"
    assert redacted("postgres://u:p@h/d?sslmode=require&password=xyz") == "postgres://u:***@h/d?sslmode=require&password=***"
    assert redacted("postgresql://u:p:q@h:1/d") == "postgresql://u:***@h:1/d"
    assert describe("postgresql://u:p@h:1/d") == "h:1/d" and describe("postgresql://u:p@h/d") == "h:5432/d"




def test_bad_database_settings_are_one_line_before_any_stage_without_the_password(
        postgres_server, isolated_data_dir, capsys, monkeypatch):
    secret = postgres_server.password
    url = postgres_server.url()
    wrong = postgres_server.url(password="not-the-" + secret[:6] + "zz")
    line = refused_run_line(wrong, capsys, monkeypatch)
    assert line.startswith("error: $SCTC_DATABASE_URL") and f"127.0.0.1:{postgres_server.port}/postgres" in line
    assert "password authentication failed" in line and secret[:6] + "zz" not in line and secret not in line

    unreachable = url.replace(f":{postgres_server.port}/", ":1/")
    line = refused_run_line(unreachable, capsys, monkeypatch)
    assert "$SCTC_DATABASE_URL" in line and "127.0.0.1:1/postgres" in line and secret not in line

    # a user who may log in but not create the cache's schema
    database = postgres_server.create_database().rsplit("/", 1)[1]
    postgres_server.execute(f"CREATE ROLE limited LOGIN PASSWORD '{secret}'")
    limited = postgres_server.url(database, user="limited")
    line = refused_run_line(limited, capsys, monkeypatch)
    assert "may not create the schema 'sctc_cache'" in line and secret not in line

    line = refused_run_line("mysql://u:hunter2@h/d", capsys, monkeypatch)
    assert "expected a postgresql:// URL" in line and "hunter2" not in line
    assert not (isolated_data_dir / "cache").exists()  # nothing was opened or created locally


def _filled_sqlite(path: Path) -> None:
    cache = open_cache(path)
    identity = {"backend": "b", "model": "m"}
    for index in range(40):
        request = GenerationRequest.user(f"问题 {index}", seed=index)
        result = GenerationResult(f"答 {index}", input_tokens=3) if index % 5 else \
            GenerationResult(None, "refusal", "filtered")
        cache.put(cache_key(identity, request), identity, request, result)
    for index in range(7):
        cache.put_score(f"s{index}", identity, "前文", f"續{index}", -0.1 * index - 1 / 3)
    cache.claim(["a claim"], "someone", lease_s=600)
    cache.close()


def _dump(path: Path) -> dict[str, list[tuple]]:
    with sqlite3.connect(path) as connection:
        return {table: connection.execute(f"SELECT * FROM {table} ORDER BY key").fetchall()
                for table in ("responses", "scores")}


def test_cache_export_and_import_round_trip_sqlite_postgres_sqlite(postgres_url, tmp_path, capsys):
    source, back = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    _filled_sqlite(source)
    assert main(["cache", "export", "--cache", str(source), "--to", postgres_url]) == 0
    printed = capsys.readouterr().out
    assert "responses: 40 rows" in printed and "scores: 7 rows" in printed and "40 new" in printed
    assert redacted(postgres_url) in printed and postgres_url not in printed  # the password is not printed
    assert main(["cache", "export", "--cache", str(source), "--to", postgres_url]) == 0  # idempotent
    assert "0 new" in capsys.readouterr().out
    assert main(["cache", "import", "--cache", str(back), "--from", postgres_url]) == 0
    assert _dump(back) == _dump(source)  # every row, byte for byte (REAL and DOUBLE PRECISION are both 8 bytes)
    stored = open_cache(postgres_url)
    assert stored.count() == 40 and stored.claim(["a claim"], "me", lease_s=1).claimed == ["a claim"]  # no claims


class Slow(ModelBackend):
    """Answers each request after `delay_s`; the test stops the database meanwhile."""

    delay_s: float = 0.0

    def identity(self):
        return {"backend": "slow", "model": "slow"}

    def _generate_uncached(self, requests, on_result):
        for index, request in enumerate(requests):
            time.sleep(self.delay_s)
            on_result(index, GenerationResult(f"answer {request.prompt}"))

    def claim_chunk_size(self) -> int:
        return 2


@pytest.mark.slow
def test_a_database_restart_mid_generate_ends_calls_in_flight_as_errors_and_a_rerun_completes(
        postgres_server, postgres_url, monkeypatch):
    monkeypatch.setenv("SCTC_CLAIM_LEASE_S", "2")  # the claims it could not release lapse by then
    cache = open_cache(postgres_url)
    cache.retry_s = 0.5
    requests = [GenerationRequest.user(f"q{index}") for index in range(4)]
    backend = Slow(delay_s=1.5)
    stopper = threading.Timer(0.5, postgres_server.stop_server)  # while the first chunk's first answer is on its way
    stopper.start()
    with pytest.raises((CacheUnavailable, GenerationHalted)) as lost:
        backend.generate(requests, cache=cache)
    stopper.join()
    assert postgres_server.password not in str(lost.value) and "$SCTC_DATABASE_URL" in str(lost.value)
    postgres_server.start_again()
    assert cache.count() == 0  # what arrived while the database was away was not stored
    results = backend.generate(requests, cache=cache)  # the pool reconnects
    assert [result.outcome for result in results] == ["ok"] * 4 and cache.count() == 4

    # A restart shorter than the retry window is invisible: the operation reconnects and goes on.
    cache.retry_s = 30
    postgres_server.restart()
    assert cache.count() == 4 and cache.get(cache_key(backend.identity(), requests[0])).text == "answer q0"


def _host(tmp_path: Path, name: str, url: str, base_url: str, **environment: str) -> tuple[subprocess.Popen, Path]:
    data = tmp_path / name
    data.mkdir()
    out = tmp_path / f"{name}.json"
    env = {**os.environ, "SCTC_DATA_DIR": str(data), "SCTC_DATABASE_URL": url, KEY_ENV: "sk-test",
           "PYTHONPATH": str(REPO), **environment}
    command = [sys.executable, "-m", "sctc_assets_tests.pg_host", base_url, str(PROMPTS), str(CONCURRENCY), str(out)]
    return subprocess.Popen(command, cwd=REPO, env=env, start_new_session=True), out


def _paid_twice(server: StubOpenAIServer) -> int:
    return sum(count - 1 for count in server.answered_per_body().values())


@pytest.mark.slow
def test_two_hosts_share_the_prompts_through_postgres_and_one_killed_host_lapses_by_lease(postgres_url, tmp_path):
    # Two hosts at once: every answer stored once, paid twice at most `concurrency` times.
    with StubOpenAIServer(latency_s=0.005) as server:
        hosts = [_host(tmp_path, name, postgres_url, server.base_url) for name in ("one", "two")]
        for process, _ in hosts:
            assert process.wait(300) == 0
        reports = [json.loads(out.read_text()) for _, out in hosts]
        assert all(report["outcomes"] == {"ok": PROMPTS} for report in reports), reports
        cache = open_cache(postgres_url)
        assert cache.count(model="stub-model") == PROMPTS
        assert len(server.answered_per_body()) == PROMPTS and _paid_twice(server) <= CONCURRENCY
        both = {process.pid for process, _ in hosts}
        assert len(both) == 2 and min(server.counts().values()) > 0
        for folder in ("one", "two"):  # no host wrote a local cache file: only the database is shared
            assert not (tmp_path / folder / "cache" / "responses.sqlite").exists()

    # kill -9 of one host mid-run: its claims lapse by their (short) lease, the other finishes, nothing is lost.
    fresh = postgres_url.rsplit("/", 1)[0] + "/postgres"
    with StubOpenAIServer(latency_s=0.02) as server:
        import psycopg

        with psycopg.connect(fresh, autocommit=True) as connection:
            connection.execute("DROP SCHEMA IF EXISTS sctc_cache CASCADE")
        lease = {"SCTC_CLAIM_LEASE_S": "2"}
        victim, _ = _host(tmp_path, "victim", fresh, server.base_url, **lease)
        survivor, survivor_out = _host(tmp_path, "survivor", fresh, server.base_url, **lease)
        deadline = time.monotonic() + 120
        while len(server.requests) < 300:
            assert victim.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait(30)
        assert survivor.wait(300) == 0
        assert json.loads(survivor_out.read_text())["outcomes"] == {"ok": PROMPTS}
        assert open_cache(fresh).count(model="stub-model") == PROMPTS
        # paid twice: the races of two live hosts, plus what the victim had in flight when it died
        assert _paid_twice(server) <= 2 * CONCURRENCY


@pytest.mark.slow
def test_a_host_whose_database_restarts_mid_run_stores_no_error_as_an_answer_and_a_rerun_completes(
        postgres_server, postgres_url, tmp_path):
    with StubOpenAIServer(latency_s=0.02) as server:
        # a short lease: the claims the host could not release while the database was away lapse by the rerun
        lease = {"SCTC_CLAIM_LEASE_S": "2"}
        host, out = _host(tmp_path, "one", postgres_url, server.base_url, SCTC_DATABASE_RETRY_S="0.5", **lease)
        deadline = time.monotonic() + 120
        while len(server.requests) < 200:
            assert host.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        postgres_server.stop_server()
        host.wait(120)
        postgres_server.start_again()
        report = json.loads(out.read_text())
        assert host.returncode == 1 and "$SCTC_DATABASE_URL" in report["error"], report
        assert postgres_server.password not in out.read_text()
        cache = open_cache(postgres_url)
        stored = cache.count(model="stub-model")
        assert 0 < stored < PROMPTS
        answered_before = set(server.answered_per_body())
        rerun, rerun_out = _host(tmp_path, "rerun", postgres_url, server.base_url, **lease)
        assert rerun.wait(300) == 0
        assert json.loads(rerun_out.read_text())["outcomes"] == {"ok": PROMPTS}
        assert cache.count(model="stub-model") == PROMPTS
        # asked again: only what was answered but never stored (in flight when the database went away)
        assert _paid_twice(server) <= CONCURRENCY
        assert len(answered_before) - stored <= CONCURRENCY
