"""Small helpers for tests and scripts that start a server: in a subprocess (dagster-webserver, PostgreSQL), or a
file server in a thread of the test."""

from __future__ import annotations

import http.server
import socket
import subprocess
import threading
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


def serve_bodies(bodies: list[bytes], announced_extra: int = 0,
                 requests: list[str] | None = None) -> http.server.ThreadingHTTPServer:
    """A server on 127.0.0.1 (a free port) answering each GET with the next of `bodies`, announcing
    `announced_extra` bytes more than it sends (a dropped connection); `requests` records the paths asked for. The
    caller shuts it down."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's naming
            if requests is not None:
                requests.append(self.path)
            body = bodies.pop(0)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body) + announced_extra))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
