"""An in-memory provider batch API behind the `BatchClient` protocol (`lib/batches.py`), for the driver's tests and
`bench/batch_scale.py`: no HTTP. Its batches move one state per `status()` poll (OpenAI's names by default:
`validating` → `in_progress` → `finalizing` → `completed`), and each can be scripted to end otherwise: lines that
fail (to retry) or err (final), an expiry or a cancellation with partial results, a results file cut after N
lines, a line with a custom id the batch never sent, a submission or poll that fails like a client whose retries
ran out (`BatchApiError`), or a submission that fails after the batch was created (only `find` sees it).

Every call is logged (`log`), and every line the provider answered is counted per key (`answered`), so a test
asserts what was sent, paid for and lost from the fake's own record.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

from sctc_assets.lib.batches import BatchApiError, BatchLine, BatchStatus, LineResult
from sctc_assets.lib.generation import GenerationRequest, GenerationResult

STATES = ("validating", "in_progress", "finalizing", "completed")
UNKNOWN_ID = "0" * 64


def answer_to(request: GenerationRequest) -> GenerationResult:
    """The fake model's answer: the prompt echoed, with token usage."""
    return GenerationResult(text=f"答：{request.prompt}", input_tokens=10, output_tokens=5, finish_reason="stop")


@dataclass
class Script:
    """How one submitted batch ends (the next one submitted takes the first script queued)."""

    end: str = "completed"  # or "expired" / "cancelled": only the first `partial` lines have results
    partial: int = 0
    cut_after: int | None = None  # the results file stops after this many lines
    unknown: int = 0  # extra lines with a custom id the batch never sent
    polls: int | None = None  # polls before it ends (default: one per state)


@dataclass
class FakeBatch:
    id: str
    label: str
    lines: list[BatchLine]
    created_at: float
    script: Script
    polls: int = 0
    cancelled: bool = False

    @property
    def ended(self) -> bool:
        return self.cancelled or self.polls >= (self.script.polls if self.script.polls is not None
                                                 else len(STATES) - 1)

    @property
    def state(self) -> str:
        if self.ended:
            return "cancelled" if self.cancelled else self.script.end
        return STATES[min(self.polls, len(STATES) - 2)]


class FakeBatchClient:
    """See the module. Thread-safe; shared by the 'processes' (drivers) of a test like a provider's servers."""

    provider = "fake"

    def __init__(self, *, max_requests: int = 1000, max_bytes: int = 10_000_000,
                 answer: Callable[[GenerationRequest], GenerationResult] = answer_to):
        self.max_requests, self.max_bytes = max_requests, max_bytes
        self.answer = answer
        self.batches: dict[str, FakeBatch] = {}
        self.log: list[tuple] = []
        self.answered: Counter[str] = Counter()  # key → lines the provider answered (and billed)
        self.scripts: list[Script] = []
        self.failing: dict[str, int] = {}  # key → batches in which the line still fails (to retry)
        self.erring: set[str] = set()  # keys whose line is a final error (a 400)
        self.refusing: set[str] = set()
        self.submit_failures: list[bool] = []  # per next submission: True = fail after creating the batch
        self.poll_failures = 0  # the next status() calls that fail
        self._lock = threading.Lock()
        self._number = 0

    # --- scripting -------------------------------------------------------------------------------------------------

    def then(self, **script) -> "FakeBatchClient":
        """Queue how the next submitted batch ends (`Script`'s fields)."""
        self.scripts.append(Script(**script))
        return self

    def fail_lines(self, keys, times: int = 1) -> None:
        for key in keys:
            self.failing[key] = times

    def fail_submit(self, times: int = 1, *, after_create: bool = False) -> None:
        self.submit_failures += [after_create] * times

    # --- the protocol ----------------------------------------------------------------------------------------------

    def line_bytes(self, line: BatchLine) -> int:
        return len(json.dumps({"custom_id": line.custom_id, "messages": list(line.request.messages)},
                              ensure_ascii=False).encode("utf-8")) + 1

    def submit(self, lines: Sequence[BatchLine], label: str) -> str:
        assert len(lines) <= self.max_requests and sum(map(self.line_bytes, lines)) <= self.max_bytes
        with self._lock:
            self.log.append(("submit", label, len(lines)))
            failure = self.submit_failures.pop(0) if self.submit_failures else None
            if failure is False:
                raise BatchApiError("POST /batches: HTTP 503 after 6 attempts")
            self._number += 1
            batch_id = f"batch_{self._number:04d}"
            self.batches[batch_id] = FakeBatch(batch_id, label, list(lines), time.time(),
                                               self.scripts.pop(0) if self.scripts else Script())
            if failure:
                raise BatchApiError("POST /batches: timed out after 6 attempts")
            return batch_id

    def find(self, label: str, *, created_after: float, size: int) -> str | None:
        with self._lock:
            self.log.append(("find", label))
            return next((batch.id for batch in self.batches.values() if batch.label == label), None)

    def status(self, provider_id: str) -> BatchStatus:
        with self._lock:
            self.log.append(("status", provider_id))
            if self.poll_failures:
                self.poll_failures -= 1
                raise BatchApiError(f"GET /batches/{provider_id}: HTTP 429 after 6 attempts")
            batch = self.batches[provider_id]
            batch.polls += 1
            counts = {"total": len(batch.lines)}
            if batch.ended:
                counts["completed"] = len(batch.lines) if batch.state == "completed" else batch.script.partial
            return BatchStatus(batch.state, batch.ended, counts)

    def results(self, provider_id: str) -> Iterator[LineResult]:
        with self._lock:
            self.log.append(("results", provider_id))
            batch = self.batches[provider_id]
        assert batch.ended, "results read before the batch ended"
        script = batch.script
        lines = batch.lines if batch.state == "completed" else batch.lines[: script.partial]
        sent = 0
        for position, line in enumerate(lines):
            if script.cut_after is not None and sent >= script.cut_after:
                return
            sent += 1
            yield self._line_result(line)
            if position == 0:
                for _ in range(script.unknown):
                    yield LineResult(UNKNOWN_ID, result=GenerationResult("?"))
        if batch.state == "cancelled":
            for line in batch.lines[script.partial :]:  # Anthropic-style: the rest listed as canceled
                yield LineResult(line.custom_id, retry="canceled")

    def _line_result(self, line: BatchLine) -> LineResult:
        key = line.custom_id
        with self._lock:
            if self.failing.get(key, 0) > 0:
                self.failing[key] -= 1
                return LineResult(key, retry="server_error: HTTP 500")
            if key in self.erring:
                return LineResult(key, result=GenerationResult(None, "error", "HTTP 400: invalid request"))
            self.answered[key] += 1
        if key in self.refusing:
            return LineResult(key, result=GenerationResult(None, "refusal", "content_filter"))
        return LineResult(key, result=self.answer(line.request))

    def cancel(self, provider_id: str) -> None:
        with self._lock:
            self.log.append(("cancel", provider_id))
            self.batches[provider_id].cancelled = True

    # --- what the test asserts on ----------------------------------------------------------------------------------

    def calls(self, kind: str) -> list[tuple]:
        return [entry for entry in self.log if entry[0] == kind]

    def lines_submitted(self) -> Counter[str]:
        """key → times it was sent in a batch."""
        sent: Counter[str] = Counter()
        for batch in self.batches.values():
            sent.update(line.custom_id for line in batch.lines)
        return sent

    @property
    def paid_twice(self) -> int:
        return sum(count > 1 for count in self.answered.values())
