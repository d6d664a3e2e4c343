"""Ctrl-C and SIGTERM for `sctc run`: the first stops after the model calls under way are stored, a second quits.

Dagster turns SIGINT into an error inside whatever step is running (the step fails, its answers in flight are
lost to the table, and the run goes on with the next partition). So the runner executes each Dagster run in a
worker thread, where Dagster leaves signal handlers alone, and the main thread keeps these handlers: the first
signal sets `sctc_assets.lib.interrupt.request_stop`, which every backend checks before its next request, and the
runner starts no further stage; a second signal ends the process at once (`os._exit(130)`).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

from sctc_assets.lib.interrupt import request_stop, stop_reason

EXIT_INTERRUPTED = 130
# `sctc run`'s status when every stage that did not finish waits for provider batches still running (`--no-wait`):
# nothing failed; the same command collects them later.
EXIT_WAITING = 3
# The class name Dagster records for a stage whose backend left provider batches running (`BatchesPending`).
PENDING_ERROR = "BatchesPending"
T = TypeVar("T")


@contextmanager
def stop_on_signals(log: Callable[[str], None] = print) -> Iterator[None]:
    """Within this block SIGINT and SIGTERM request a stop; a second one exits with status 130 at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, _frame) -> None:
        name = signal.Signals(signum).name
        if stop_reason() is not None:
            sys.stdout.flush()
            sys.stderr.write(f"\n{name} again: quitting now (answers already stored are kept)\n")
            sys.stderr.flush()
            os._exit(EXIT_INTERRUPTED)
        request_stop(f"interrupted ({name})")
        log(f"\n{name}: stopping once the model calls under way are stored ({name} again quits at once)")

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def in_worker_thread(work: Callable[[], T]) -> T:
    """Run `work` in a thread and wait for it, so signals reach the main thread's handlers, not Dagster's."""
    outcome: dict[str, object] = {}

    def target() -> None:
        try:
            outcome["value"] = work()
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc

    worker = threading.Thread(target=target, name="sctc-run-stage", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.2)  # a bounded wait lets the main thread run signal handlers promptly
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]
