"""Progress reports for long generation loops, throttled so logs stay readable."""

from __future__ import annotations

import time
from typing import Callable


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
