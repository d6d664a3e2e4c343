"""A process-wide request to stop starting model calls (Ctrl-C in `sctc run`, a budget reached elsewhere).

Backends check `stop_reason()` (through `ModelBackend.halt_reason()`) before each new request or batch: what is in
flight completes and is stored, nothing new starts. The first reason given is kept until `clear_stop()`.
"""

from __future__ import annotations

import signal
import threading

_lock = threading.Lock()
_reason: str | None = None


def request_stop(reason: str) -> None:
    """Ask every backend in this process to start no new model call. Safe from signal handlers and threads."""
    global _reason
    # A signal handler runs between bytecodes of the main thread, which may hold the lock: never block there.
    if _lock.acquire(timeout=0.1):
        try:
            if _reason is None:
                _reason = reason
        finally:
            _lock.release()
    elif _reason is None:
        _reason = reason


def stop_reason() -> str | None:
    """Why model calls should stop, or None to go on."""
    return _reason


def clear_stop() -> None:
    """Allow model calls again (the next run in the same process starts fresh)."""
    global _reason
    with _lock:
        _reason = None


def restore_interrupt_handler() -> bool:
    """Give SIGINT its default handler where the process inherited it ignored (started with `nohup … &` from a
    non-interactive shell). Dagster copies SIGINT's handler onto SIGTERM, so an ignored SIGINT would make every
    helper it spawns (the `tail -F` of its compute logs) ignore `terminate()` and each step wait for it. Returns
    whether it changed anything; call it from the main thread at start."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        return True
    return False
