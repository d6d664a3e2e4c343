"""The suite, `sctc run` and `sctc ui` behave the same when started as a background job of a non-interactive shell
(`nohup … &`), which starts them with SIGINT ignored: Dagster copies SIGINT's handler onto SIGTERM, so without
`restore_interrupt_handler` every compute-log helper it spawns ignores `terminate()`, each step waits 30 s for it,
and the helpers are left running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from sctc_assets_tests.servers import free_port

REPO = Path(__file__).resolve().parents[1]
DAGSTER_CLEANUP_WAIT = 30  # `_clean_up_subprocess` waits this long for a helper that ignores SIGTERM


def _as_background_job() -> None:
    """What `nohup … &` in a non-interactive shell gives the process: SIGINT ignored, no terminal."""
    os.setsid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


def _read(path: Path) -> str:
    try:
        return path.read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:  # ended meanwhile
        return ""


def _processes_mentioning(text: str, where: str = "cmdline") -> list[str]:
    """The live processes whose command line (or environment, `where="environ"`) contains `text`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and entry.name != str(os.getpid()) and text in _read(entry / where):
            if _read(entry / "stat").rsplit(")", 1)[-1].split()[:1] != ["Z"]:
                found.append(f"{entry.name}: {_read(entry / 'cmdline')}")
    return found


@pytest.mark.slow
def test_the_suite_started_in_the_background_reaps_dagsters_compute_log_helpers(tmp_path):
    probe_dir = tmp_path / "instances"
    env = {**os.environ, "SCTC_PROBE_DIR": str(probe_dir), "SCTC_PROBE_OUT": str(tmp_path / "probe.json"),
           "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "sctc_assets_tests/background_probe.py"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600, preexec_fn=_as_background_job)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    probe = json.loads((tmp_path / "probe.json").read_text())
    # Every `tail -F` and `watch_orphans` helper ended and was reaped, and no step waited out Dagster's cleanup for a
    # helper that ignores SIGTERM (a trivial asset takes a few seconds).
    assert [(run["where"], run["children"], run["seconds"] < DAGSTER_CLEANUP_WAIT) for run in probe["runs"]] == \
        [(where, [], True) for where in ("main", "thread", "main", "thread")], probe
    assert str(signal.SIG_IGN) not in (probe["sigint"], probe["sigterm"]), probe
    time.sleep(1)  # a helper orphaned by its parent's exit would still be running now
    assert _processes_mentioning(str(probe_dir)) == []




@pytest.mark.slow
def test_sctc_ui_started_in_the_background_stops_on_sigint_and_leaves_nothing(tmp_path):
    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster"), "SCTC_DATA_DIR": str(tmp_path / "data"),
           "PYTHONPATH": str(REPO)}
    log = (tmp_path / "ui.log").open("w")
    process = subprocess.Popen([sys.executable, "-m", "sctc_assets.cli", "ui", "--port", str(port)], cwd=REPO,
                               env=env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_as_background_job)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            assert process.poll() is None, (tmp_path / "ui.log").read_text()[-3000:]
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=5)
                break
            except OSError:
                time.sleep(1)
        else:
            pytest.fail("the UI never answered: " + (tmp_path / "ui.log").read_text()[-3000:])
        process.send_signal(signal.SIGINT)
        status = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)  # only what this test started: the session it created
            process.wait()
        log.close()
    assert status == 0, (tmp_path / "ui.log").read_text()[-3000:]
    output = (tmp_path / "ui.log").read_text()
    # Dagster's notice that `dagster dev` is superseded by `dg dev` (a CLI this project does not install) is not shown.
    assert "Serving dagster-webserver" in output and "dg dev" not in output and "SupersessionWarning" not in output, \
        output
    deadline = time.monotonic() + 30  # the webserver and daemon end with `dagster dev`, their code servers after
    home = f"DAGSTER_HOME={tmp_path / 'dagster'}"
    while _processes_mentioning(home, "environ") and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _processes_mentioning(home, "environ") == []
