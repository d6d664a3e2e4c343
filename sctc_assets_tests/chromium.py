"""A small Chrome DevTools Protocol client over Debian's `chromium`, for tests that open a page in a real browser:
it records console errors, uncaught exceptions, failed loads and every request, evaluates JavaScript and takes
screenshots. Nothing leaves the machine: background networking is off and pages are file:// URLs."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
         "--disable-default-apps", "--disable-extensions", "--remote-debugging-port=0")


def find_chromium() -> str | None:
    return next((path for path in map(shutil.which, CANDIDATES) if path), None)


class Browser:
    """One headless Chromium and one page, driven over its DevTools websocket."""

    def __init__(self, executable: str, *, width: int = 1400, height: int = 1000, timeout: float = 60.0):
        self.timeout = timeout
        self._profile = tempfile.TemporaryDirectory(prefix="sctc-chromium-", ignore_cleanup_errors=True)
        self._process = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={self._profile.name}", f"--window-size={width},{height}",
             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        port = self._devtools_port()
        page = next(target for target in self._targets(port) if target.get("type") == "page")
        from websockets.sync.client import connect

        self._socket = connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=timeout)
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")

    def _devtools_port(self) -> int:
        marker = Path(self._profile.name) / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"chromium exited with {self._process.returncode} before it opened DevTools")
            if marker.exists() and marker.read_text().strip():
                return int(marker.read_text().split()[0])
            time.sleep(0.1)
        raise TimeoutError("chromium did not open its DevTools port")

    def _targets(self, port: int) -> list[dict[str, Any]]:
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as response:
                    targets = json.load(response)
                if any(target.get("type") == "page" for target in targets):
                    return targets
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("chromium opened no page target")
            time.sleep(0.1)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one command and wait for its answer; events arriving meanwhile are kept in `events`."""
        self._next_id += 1
        ident = self._next_id
        self._socket.send(json.dumps({"id": ident, "method": method, "params": params}))
        deadline = time.monotonic() + self.timeout
        while True:
            message = json.loads(self._socket.recv(timeout=max(0.1, deadline - time.monotonic())))
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def wait_for(self, method: str) -> dict[str, Any]:
        for event in self.events:
            if event["method"] == method:
                return event
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            message = json.loads(self._socket.recv(timeout=max(0.1, deadline - time.monotonic())))
            if "method" in message:
                self.events.append(message)
                if message["method"] == method:
                    return message
        raise TimeoutError(f"no {method} event")

    def open(self, url: str) -> None:
        self.events.clear()
        self.call("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:60]}…: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path, *, full_page: bool = False) -> None:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            metrics = self.call("Page.getLayoutMetrics")["cssContentSize"]
            params.update(captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": metrics["width"],
                                                            "height": metrics["height"], "scale": 1})
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", **params)["data"]))

    def problems(self) -> list[str]:
        """Console errors, uncaught exceptions, failed loads and HTTP errors seen since the page was opened."""
        found = []
        for event in self.events:
            method, params = event["method"], event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append(f"console.{params['type']}: {[arg.get('value') for arg in params.get('args', [])]}")
            elif method == "Runtime.exceptionThrown":
                found.append(f"exception: {params['exceptionDetails'].get('text')}")
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                found.append(f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}")
            elif method == "Network.loadingFailed":
                found.append(f"failed load: {params.get('errorText')} ({params.get('type')})")
            elif method == "Network.responseReceived" and params["response"].get("status", 200) >= 400:
                found.append(f"HTTP {params['response']['status']}: {params['response']['url']}")
        return found

    def requested_urls(self) -> list[str]:
        return [event["params"]["request"]["url"] for event in self.events
                if event["method"] == "Network.requestWillBeSent"]

    def close(self) -> None:
        try:
            self._socket.close()
        finally:
            self._signal_group(signal.SIGTERM)
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            # Chromium's renderer and utility processes outlive the browser process for a moment and still write
            # into the profile (a removal then fails with "Directory not empty"): stop them all, then remove it.
            self._signal_group(signal.SIGKILL)
            for _ in range(20):
                shutil.rmtree(self._profile.name, ignore_errors=True)
                if not Path(self._profile.name).exists():
                    break
                time.sleep(0.1)
            self._profile.cleanup()

    def _signal_group(self, signum: int) -> None:
        try:
            os.killpg(self._process.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
