"""A process-wide request to stop asking models (Ctrl-C, SIGTERM): set once, read by every backend and the runner.

Backends check `stop_reason()` before starting each new request or batch, so what is already under way is stored
and nothing new is started; `sctc run` checks it before each stage. Thread-safe, no Dagster.
"""

from __future__ import annotations

import threading

_lock = threading.Lock()
_reason: str | None = None


def request_stop(reason: str) -> None:
    """Ask every model call loop of this process to stop; the first reason given is kept."""
    global _reason
    with _lock:
        if _reason is None:
            _reason = reason


def stop_reason() -> str | None:
    """Why a stop was requested, or None while work may go on."""
    with _lock:
        return _reason


def clear_stop() -> None:
    """Forget a stop request (a new run in the same process, tests)."""
    global _reason
    with _lock:
        _reason = None
