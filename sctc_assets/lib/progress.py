"""Progress reports for long generation loops, throttled so logs stay readable, and a line at the start and at
the end of each download."""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path
from typing import Callable, Iterator


class ProgressReporter:
    """Calls `emit(message)` at most every `interval_s` seconds, and always at the start and at completion."""

    def __init__(self, label: str, emit: Callable[[str], None], *, interval_s: float = 10.0):
        self.label = label
        self.emit = emit
        self.interval_s = interval_s
        self._last = 0.0
        self._first_done: int | None = None
        self._rate_origin: tuple[float, int] | None = None

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if self._first_done is None:
            self._first_done = done  # cached answers arrive at once and would distort the rate
            self.emit(f"{self.label}: {done}/{total} already answered (response cache), {total - done} to go")
            self._last = now
            return
        if self._rate_origin is None:
            # Measured from the first new answer: model loading and connection set-up are not throughput.
            self._rate_origin = (now, done)
        if done < total and now - self._last < self.interval_s:
            return
        self._last = now
        origin_time, origin_done = self._rate_origin
        elapsed = now - origin_time
        rate = (done - origin_done) / elapsed if elapsed > 0 else 0.0
        pace = f"{rate:.2f}/s, eta {(total - done) / rate:.0f}s" if rate > 0 else "measuring pace"
        self.emit(f"{self.label}: {done}/{total} ({done / max(total, 1):.0%}), {pace}")


def human_size(size: int | None) -> str:
    if size is None:
        return "size unknown"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class DownloadLines:
    """What `download_lines` yields: set `path` to the file that arrived when `where` is its folder."""

    def __init__(self) -> None:
        self.path: Path | None = None


@contextlib.contextmanager
def download_lines(verb: str, done: str, what: str, where: Path, *, size: int | None = None,
                   emit: Callable[[str], None] | None = None) -> Iterator[DownloadLines]:
    """`<verb> <what> (<size>) into <where>` before, `<done> <what>: <size> in <s>` after, on stderr.

    A first run's only long silences are its downloads; one line at each end (not a percentage) tells a person
    what the wait is for and keeps a log to two lines per file. Nothing is said after a failure: its error is.
    """
    emit = emit or _to_stderr
    emit(f"{verb} {what} ({human_size(size)}) into {where}")
    started = time.monotonic()
    lines = DownloadLines()
    yield lines
    arrived = lines.path or where
    final = arrived.stat().st_size if arrived.is_file() else size
    emit(f"{done} {what}: {human_size(final)} in {time.monotonic() - started:.1f} s")
