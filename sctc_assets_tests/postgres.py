"""A throwaway PostgreSQL server for the tests and the cache benchmark (`bench/cache_backends.py`).

Debian's `postgresql` package (`.ci/run` installs it) puts `initdb` and `pg_ctl` under /usr/lib/postgresql/<v>/bin.
PostgreSQL refuses to run as root, so under root the cluster is made and run by the `postgres` system user the
package creates, in a temporary folder that user owns, on a free local port (TCP on 127.0.0.1 and a socket in that
folder), with password authentication (scram-sha-256) so that the URLs the tests use carry a password. It is
stopped and removed in every path: at the end of the session, and at interpreter exit (`atexit`) when a test run
is interrupted.

`postgres_server` (session) yields the `PostgresServer`; `postgres_url` (per test) a fresh database on it. Without
`initdb` (or psycopg) the tests that need them are skipped, saying why; with `$SCTC_REQUIRE_POSTGRES` set (CI),
that is a failure instead.
"""

from __future__ import annotations

import atexit
import glob
import os
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path

from sctc_assets_tests.servers import free_port

REQUIRE_ENV = "SCTC_REQUIRE_POSTGRES"


def find_pg_bin() -> Path | None:
    """The folder of `initdb` and `pg_ctl`: on PATH, else Debian's newest /usr/lib/postgresql/<v>/bin."""
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(candidates[-1]).parent if candidates else None


def missing_reason() -> str | None:
    """Why no server can be started here, or None."""
    if find_pg_bin() is None:
        return "PostgreSQL's initdb not found (install Debian's `postgresql` package)"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'psycopg[binary]')"
    if os.geteuid() == 0:
        try:
            import pwd

            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no `postgres` system user to run the server as"
    return None




class PostgresServer:
    """One cluster: `start()`, `url(database)`, `create_database()`, `restart()`, `stop()` (idempotent)."""

    def __init__(self, *, user: str = "sctc"):
        self.bin = find_pg_bin()
        self.folder = Path(tempfile.mkdtemp(prefix="sctc-pg-"))
        self.data = self.folder / "data"
        self.log = self.folder / "server.log"
        self.port = free_port()
        self.user = user
        # A password with characters a URL must escape would need quoting everywhere; this one needs none, and is
        # long and unusual enough that a test can look for it in any text.
        self.password = "pw" + secrets.token_hex(12)
        self.running = False
        self._as_postgres = os.geteuid() == 0

    def _command(self, *arguments: str) -> list[str]:
        return (["runuser", "-u", "postgres", "--"] if self._as_postgres else []) + list(arguments)

    def _run(self, *arguments: str, timeout: float = 120) -> None:
        result = subprocess.run(self._command(*arguments), capture_output=True, text=True, timeout=timeout)
        if result.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{' '.join(arguments[:2])} failed ({result.returncode}): "
                               f"{result.stderr.strip() or result.stdout.strip()}\n{log}")

    def start(self) -> "PostgresServer":
        atexit.register(self.stop)
        if self._as_postgres:
            shutil.chown(self.folder, "postgres", "postgres")
        self.folder.chmod(0o700)
        password_file = self.folder / "password"
        password_file.write_text(self.password + "\n")
        if self._as_postgres:
            shutil.chown(password_file, "postgres", "postgres")
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", self.user, "--auth=scram-sha-256",
                  f"--pwfile={password_file}", "-E", "UTF8", "--locale=C", "--no-sync")
        password_file.unlink()
        self._pg_ctl_start()
        return self

    def _pg_ctl_start(self) -> None:
        options = (f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300")
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.log), "-w",
                  "-t", "60", "start")
        self.running = True

    def url(self, database: str = "postgres", *, user: str | None = None, password: str | None = None) -> str:
        return (f"postgresql://{user or self.user}:{self.password if password is None else password}"
                f"@127.0.0.1:{self.port}/{database}")

    def execute(self, sql: str, database: str = "postgres") -> None:
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True) as connection:
            connection.execute(sql)

    def create_database(self, prefix: str = "t") -> str:
        """A new, empty database; returns its URL."""
        name = f"{prefix}_{secrets.token_hex(6)}"
        self.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop_server(self, mode: str = "fast") -> None:
        """Stop the server, keeping its data (`start_again()` brings it back)."""
        if self.running:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")
            self.running = False

    def start_again(self) -> None:
        self._pg_ctl_start()

    def restart(self, mode: str = "fast") -> None:
        self.stop_server(mode)
        self.start_again()

    def stop(self) -> None:
        """Stop the server and remove its folder; safe to call twice."""
        try:
            self.stop_server("immediate")
        except Exception:  # noqa: BLE001  (already down: the folder still goes)
            pass
        shutil.rmtree(self.folder, ignore_errors=True)
        atexit.unregister(self.stop)


def start_server() -> PostgresServer:
    server = PostgresServer()
    try:
        return server.start()
    except BaseException:
        server.stop()
        raise


try:
    import pytest
except ImportError:  # the benchmark imports this module without pytest
    pytest = None

if pytest is not None:

    @pytest.fixture(scope="session")
    def postgres_server():
        reason = missing_reason()
        if reason is not None:
            if os.environ.get(REQUIRE_ENV):
                pytest.fail(f"{reason}; ${REQUIRE_ENV} is set")
            pytest.skip(reason)
        server = start_server()
        try:
            yield server
        finally:
            server.stop()

    @pytest.fixture
    def postgres_url(postgres_server: PostgresServer) -> str:
        """A fresh database of the session's server, with the password in its URL."""
        return postgres_server.create_database()


def refused_run_line(url: str, capsys, monkeypatch) -> str:
    """What `sctc run` prints when $SCTC_DATABASE_URL is `url` and refuses it: one line, before any stage runs."""
    from sctc_assets.cli import main

    monkeypatch.setenv("SCTC_DATABASE_URL", url)
    assert main(["run", "--benchmarks", "term", "--models", "anything"]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 1, errors
    return errors[0]
