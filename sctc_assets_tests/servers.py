"""Small helpers for tests and scripts that start a server in a subprocess (dagster-webserver, PostgreSQL)."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until_answers(url: str, process: subprocess.Popen, timeout: float = 180.0) -> None:
    """Return once `url` answers 200; raise RuntimeError when `process` exits first or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args[0] if isinstance(process.args, list) else process.args} exited with "
                               f"{process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(1)
    raise RuntimeError(f"{url} did not answer within {timeout:.0f} s")
