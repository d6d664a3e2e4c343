"""What the stubs of Anthropic's and Gemini's batch APIs share (`anthropic_batch_stub.py`, `gemini_batch_stub.py`):
a threaded HTTP server on 127.0.0.1 holding batches that move through their provider's states one per poll, faults
scripted per call, and a log to count from.

Scripting (the same on both stubs):
- `plan(BatchPlan(...), ...)`: how the next batches created behave, one plan each (then the default): polls that
  still see a batch running (`running_polls`), how it ends (`end`: `completed`, `expired`, `cancelled` by the
  provider, `failed` as a whole), how many of its lines (in order) were answered before an early end (`answered`),
  a results file cut mid-line (`cut_results`), result lines for custom ids the batch never had (`unknown_ids`), and,
  on Gemini, whether results come inline or as a responses file (`output`).
- `script_line(prompt, *fates)`: the next lines carrying `prompt` (one fate each, in any batch, then answered):
  `answer` (the echo answer of the synchronous stub), `refusal`, `invalid` (a final error of the request itself),
  `server_error`, `overloaded`, `rate_limited` (errors worth asking again).
- `fail_next(call, *faults)`: the next calls of `call` (`create`, `poll`, `list`, `results`, `cancel`) fail, one
  fault each: `429` (with `Retry-After: 0`), `500`, or, for `create` only, `lost` (the batch IS created, the answer
  is a 500: a client that simply retried would create it twice).

Log, for counting: `calls` (Counter of `create`, `created`, `poll`, `list`, `results`, `cancel`, `unauthorized`),
`created` (the batches, in order), `answered` (Counter: per custom id, the answers (succeeded lines) handed out: more
than 1 means paid twice), `paid_twice()`. The key header is checked on every call against `api_key` and never
echoed.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Mapping
from urllib.parse import parse_qs, urlsplit

LINE_FATES = ("answer", "refusal", "invalid", "server_error", "overloaded", "rate_limited")
CALLS = ("create", "poll", "list", "results", "cancel")
FAULTS = ("429", "500", "lost")
ENDS = ("completed", "expired", "cancelled", "failed")


@dataclass(frozen=True)
class BatchPlan:
    running_polls: int = 1
    end: str = "completed"
    answered: int | None = None  # lines answered before an early end (expired/cancelled/failed); None: 0
    cut_results: bool = False
    unknown_ids: int = 0
    output: str = "inline"  # Gemini: "inline" or "file"

    def __post_init__(self) -> None:
        if self.end not in ENDS:
            raise ValueError(f"end {self.end!r}: one of {ENDS}")


@dataclass
class StubBatch:
    id: str
    label: str | None
    lines: list[tuple[str, Any]]  # (custom id, the request body of that line)
    plan: BatchPlan
    created_at: float
    model: str = ""
    polls: int = 0
    cancel_requested: bool = False
    cancel_seen_at: int | None = None  # the poll that first saw the cancellation
    ended: bool = False
    results: list[tuple[str, str]] = field(default_factory=list)  # (custom id, fate) once ended


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"


def json_reply(status: int, body: Any, headers: dict[str, str] | None = None) -> Reply:
    return Reply(status, json.dumps(body, ensure_ascii=False).encode("utf-8"), headers or {})


class BatchStubServer:
    """The shared machinery; a subclass implements `route` (its API's paths) and the answers' shapes."""

    key_header = "x-api-key"

    def __init__(self, *, api_key: str = "stub-batch-key"):
        self.api_key = api_key
        self.calls: Counter[str] = Counter()
        self.created: list[StubBatch] = []
        self.answered: Counter[str] = Counter()
        self.batches: dict[str, StubBatch] = {}
        self._plans: deque[BatchPlan] = deque()
        self.default_plan = BatchPlan()
        self._fates: dict[str, deque[str]] = defaultdict(deque)
        self._faults: dict[str, deque[str]] = defaultdict(deque)
        self._lock = threading.RLock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="batch-stub", daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> "BatchStubServer":
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    # --- scripting -------------------------------------------------------------------------------------------------

    def plan(self, *plans: BatchPlan) -> None:
        with self._lock:
            self._plans.extend(plans)

    def script_line(self, prompt: str, *fates: str) -> None:
        unknown = sorted(set(fates) - set(LINE_FATES))
        if unknown:
            raise ValueError(f"unknown line fate(s) {unknown}; known: {LINE_FATES}")
        with self._lock:
            self._fates[prompt].extend(fates)

    def fail_next(self, call: str, *faults: str) -> None:
        if call not in CALLS or set(faults) - set(FAULTS) or ("lost" in faults and call != "create"):
            raise ValueError(f"fail_next({call!r}, {faults}): calls {CALLS}, faults {FAULTS} ('lost': create only)")
        with self._lock:
            self._faults[call].extend(faults)

    def paid_twice(self) -> int:
        """Custom ids answered more than once (each answer a paid request)."""
        with self._lock:
            return sum(1 for times in self.answered.values() if times > 1)

    # --- for the subclasses ----------------------------------------------------------------------------------------

    def fault(self, call: str) -> str | None:
        """Count the call and pop its next scripted fault."""
        with self._lock:
            self.calls[call] += 1
            queued = self._faults[call]
            return queued.popleft() if queued else None

    def faulted(self, call: str) -> Reply | None:
        """Count the call; the error reply of its next scripted fault, if any."""
        fault = self.fault(call)
        return self.fault_reply(fault) if fault else None

    def fault_reply(self, fault: str) -> Reply:
        if fault == "429":
            return self.error_reply(429, "rate_limited", {"Retry-After": "0"})
        return self.error_reply(500, "server_error")

    def error_reply(self, status: int, kind: str, headers: dict[str, str] | None = None) -> Reply:
        raise NotImplementedError

    def new_batch(self, batch_id: str, label: str | None, lines: list[tuple[str, Any]]) -> StubBatch:
        with self._lock:
            plan = self._plans.popleft() if self._plans else self.default_plan
            batch = StubBatch(batch_id, label, lines, plan, time.time())
            self.batches[batch_id] = batch
            self.created.append(batch)
            self.calls["created"] += 1
            return batch

    def prompt_of(self, body: Any) -> str:
        raise NotImplementedError

    def line_rejection(self, body: Any) -> bool:
        """Whether the API refuses this line's request as malformed (a final error for that line)."""
        return False

    def poll(self, batch: StubBatch) -> None:
        """One poll: the batch moves one state on; at its end its lines get their fates."""
        with self._lock:
            batch.polls += 1
            if batch.ended:
                return
            if batch.cancel_requested and batch.cancel_seen_at is None:
                batch.cancel_seen_at = batch.polls
            if self.ends_now(batch):
                self._end(batch)

    def ends_now(self, batch: StubBatch) -> bool:
        return batch.cancel_requested or batch.polls > batch.plan.running_polls

    def _end(self, batch: StubBatch) -> None:
        plan = batch.plan
        early = batch.cancel_requested or plan.end != "completed"
        answered = (plan.answered or 0) if early else len(batch.lines)
        missing = "canceled" if batch.cancel_requested or plan.end == "cancelled" else \
            "expired" if plan.end == "expired" else None  # failed: the rest never answered
        batch.ended = True
        for index, (custom_id, body) in enumerate(batch.lines):
            if index < answered:
                fate = "invalid" if self.line_rejection(body) else self._next_fate(self.prompt_of(body))
                if fate in ("answer", "refusal"):
                    self.answered[custom_id] += 1
                batch.results.append((custom_id, fate))
            elif missing is not None:
                batch.results.append((custom_id, missing))
        for number in range(plan.unknown_ids):
            batch.results.append((f"{number:064x}"[::-1].replace("0", "e"), "answer"))

    def _next_fate(self, prompt: str) -> str:
        queued = self._fates[prompt]
        return queued.popleft() if queued else "answer"

    def authorized(self, headers: Mapping[str, str]) -> bool:
        if headers.get(self.key_header) == self.api_key:
            return True
        with self._lock:
            self.calls["unauthorized"] += 1
        return False

    def route(self, method: str, path: str, query: dict[str, str], headers: Mapping[str, str],
              body: Any) -> Reply:
        raise NotImplementedError


def poll_until_ended(client: Any, provider_id: str, most: int = 10) -> list[str]:
    """Poll a `BatchClient` until its batch ended: the states seen, one a poll."""
    states = []
    for _ in range(most):
        status = client.status(provider_id)
        states.append(status.state)
        if status.ended:
            return states
    raise AssertionError(f"{provider_id} never ended: {states}")


def results_body(lines: list[bytes], cut: bool) -> bytes:
    """JSONL of `lines`, the last one cut in half (no newline) when `cut`."""
    if cut and lines:
        return b"".join(line + b"\n" for line in lines[:-1]) + lines[-1][: len(lines[-1]) // 2]
    return b"".join(line + b"\n" for line in lines)


def _handler_for(server: BatchStubServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def _serve(self, method: str) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
            parts = urlsplit(self.path)
            query = {name: values[-1] for name, values in parse_qs(parts.query).items()}
            headers = {name.lower(): value for name, value in self.headers.items()}
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                reply = server.error_reply(400, "invalid")
            else:
                reply = server.route(method, parts.path, query, headers, body)
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(reply.body)

        def log_message(self, format: str, *args: Any) -> None:
            """Silent."""

    return Handler
