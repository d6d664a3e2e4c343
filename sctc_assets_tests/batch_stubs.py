"""Stubs of the providers' batch APIs, for tests and benchmarks: real HTTP on 127.0.0.1, the real states and files.

This file holds OpenAI's Batch API (`OpenAIBatchStub`) and what any batch stub may share (`multipart_fields`); the
other providers' batch stubs live with their own stub servers.

`OpenAIBatchStub` is the chat-completions stub (`StubOpenAIServer`: synchronous calls answered as before, its
`script`, `faults` and `reasoning_model`) plus the Batch API under the same `base_url` (`…/v1`):

- `POST /v1/files` (multipart/form-data, `purpose=batch`, a `file` part) → a file object; `DELETE /v1/files/{id}`;
  `GET /v1/files/{id}/content` → the file's bytes (input, output or error file).
- `POST /v1/batches` `{input_file_id, endpoint: "/v1/chat/completions", completion_window: "24h", metadata}`;
  `GET /v1/batches/{id}`; `GET /v1/batches?limit=&after=` (newest first, `has_more`); `POST /v1/batches/{id}/cancel`.
- Each poll (`GET /v1/batches/{id}`) moves a batch one state: `validating` → `in_progress` (`hold` more polls there)
  → `finalizing` → `completed`; scripted ends: `failed` (from `validating`, with `errors`), `expired` (from
  `in_progress`, `answered` lines done, the rest `batch_expired` in the error file), `cancelled` by the provider
  (`in_progress` → `cancelling` → `cancelled`, the rest `batch_cancelled`). `POST …/cancel` moves it to `cancelling`
  (the next poll: `cancelled`). A line is answered when its batch ends, like a synchronous call of the chat stub:
  a `script_line(prompt, reply)` reply first (per prompt, in order), else the `reasoning_model`'s 400 for a
  parameter it refuses, else the echo answer with usage; a 200 goes to the output file, anything else to the error
  file (`response.status_code` and the error body), as OpenAI writes them. A line whose input is malformed (no
  custom_id, a repeated one, another url) fails validation.
- Every call needs `Authorization: Bearer <api_key>` when `api_key` is given (else a 401 that does not quote it).

Scripts (each queued for the next batch created, or the next call of a route):
- `script_batch(end=..., answered=..., hold=..., cut_output=..., unknown_ids=..., errors=...)`: how the next batch
  created behaves (`BatchScript`); unscripted batches complete with every line answered.
- `script_line(prompt, *replies)`: the replies (`api_error(400, …)`, `api_error(500, …)`, `completion(…)`) the next
  batch lines carrying that prompt get.
- `script_call(route, *replies, executed=False)`: the next calls of `route` (`upload`, `create`, `poll`, `list`,
  `download`, `cancel`, `delete`) get these replies (`api_error(429, …, headers={"Retry-After": "0"})`,
  `api_error(500, …)`, `DROP_CONNECTION`); with `executed=True` the call takes effect first and only its answer is
  lost (a batch created, then a 500).
- `finish(batch_id=None)`: move a batch (every open batch) to its scripted end without polls.

Counts, for assertions: `call_counts()` (calls per route, scripted faults included), `calls` (each `BatchCall`),
`batches` (id → `StubBatch`: its state, lines, polls), `batch_answers()` (per custom_id, lines answered with a 200:
over 1 means paid twice), `lines_answered` (each `LineAnswer`), `deleted_files`, `authorizations_seen` (whether any
call came without the right key).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Mapping
from urllib.parse import parse_qs, urlsplit

from sctc_assets_tests.openai_stub_server import (COMPLETIONS_PATH, DROP_CONNECTION, StubOpenAIServer, StubReply,
                                                  _handler_for, api_error)

ROUTES = ("upload", "create", "poll", "list", "download", "cancel", "delete")
EXPIRED_MESSAGE = "This request could not be executed before the completion window of 24hr expired."
CANCELLED_MESSAGE = "This request was not executed because the batch was cancelled."


def multipart_fields(content_type: str, payload: bytes) -> dict[str, tuple[str | None, bytes]]:
    """The parts of a multipart/form-data body: name → (filename or None, content). Raises ValueError when it is
    not one."""
    kind, _, parameters = content_type.partition(";")
    if kind.strip().lower() != "multipart/form-data":
        raise ValueError(f"expected multipart/form-data, got {content_type!r}")
    boundary = next((value.strip().strip('"') for name, _, value in
                     (item.strip().partition("=") for item in parameters.split(";")) if name == "boundary"), "")
    if not boundary:
        raise ValueError("multipart/form-data without a boundary")
    fields: dict[str, tuple[str | None, bytes]] = {}
    delimiter = b"--" + boundary.encode()
    if not payload.rstrip().endswith(delimiter + b"--"):
        raise ValueError("multipart body without its closing boundary")
    for part in payload.split(delimiter)[1:-1]:
        head, separator, content = part.removeprefix(b"\r\n").partition(b"\r\n\r\n")
        if not separator or not content.endswith(b"\r\n"):
            raise ValueError("malformed multipart part")
        disposition = next((line for line in head.decode("utf-8").split("\r\n")
                            if line.lower().startswith("content-disposition:")), "")
        attributes = dict((name.strip(), value.strip().strip('"')) for name, _, value in
                          (item.partition("=") for item in disposition.split(";")[1:]))
        if "name" not in attributes:
            raise ValueError("multipart part without a name")
        fields[attributes["name"]] = (attributes.get("filename"), content[:-2])
    return fields


@dataclass(frozen=True)
class BatchScript:
    """How one batch behaves. `end`: `completed`, `failed` (validation, with `errors`), `expired` or `cancelled` (by
    the provider); `answered`: lines done before an expiry or a cancellation (None: half, rounded down); `hold`:
    extra polls in `in_progress`; `cut_output`: the output file ends in the middle of its last line;
    `unknown_ids`: custom ids this batch never had, answered in its output file."""

    end: str = "completed"
    answered: int | None = None
    hold: int = 0
    cut_output: bool = False
    unknown_ids: tuple[str, ...] = ()
    errors: tuple[dict[str, Any], ...] = ({"code": "invalid_request", "message": "stub: validation failed",
                                           "line": 1},)

    def __post_init__(self) -> None:
        if self.end not in ("completed", "failed", "expired", "cancelled"):
            raise ValueError(f"end {self.end!r}: one of completed, failed, expired, cancelled")


@dataclass
class StubBatch:
    id: str
    input_file_id: str
    lines: list[dict[str, Any]]
    script: BatchScript
    metadata: dict[str, Any]
    created_at: int
    status: str = "validating"
    polls: int = 0
    held: int = 0
    invalid: list[dict[str, Any]] = field(default_factory=list)  # validation errors of the input
    output_file_id: str | None = None
    error_file_id: str | None = None
    counts: dict[str, int] = field(default_factory=lambda: {"total": 0, "completed": 0, "failed": 0})
    stamps: dict[str, int] = field(default_factory=dict)  # in_progress_at, completed_at, …
    cancel_requested: bool = False


@dataclass(frozen=True)
class BatchCall:
    route: str
    method: str
    path: str
    status: int
    scripted: bool = False


@dataclass(frozen=True)
class LineAnswer:
    batch_id: str
    custom_id: str
    status: int


class OpenAIBatchStub(StubOpenAIServer):
    """The chat stub with OpenAI's Batch API (see the module docstring). Use as a context manager."""

    def __init__(self, *, api_key: str | None = None, **options: Any):
        super().__init__(**options)
        self.api_key = api_key
        self.files: dict[str, dict[str, Any]] = {}  # id → {"data", "purpose", "filename", "created_at"}
        self.batches: dict[str, StubBatch] = {}
        self.calls: list[BatchCall] = []
        self.lines_answered: list[LineAnswer] = []
        self.deleted_files: list[str] = []
        self.unauthorized = 0  # calls refused for a missing or wrong key
        self._batch_scripts: deque[BatchScript] = deque()
        self._line_scripts: dict[str, deque[StubReply]] = {}
        self._call_scripts: dict[str, deque[tuple[StubReply, bool]]] = {route: deque() for route in ROUTES}
        self._serial = 0
        self._batch_lock = threading.RLock()
        self._httpd.RequestHandlerClass = _batch_handler_for(self)

    # --- scripts -------------------------------------------------------------------------------------------------

    def script_batch(self, **settings: Any) -> BatchScript:
        """Queue how the next batch created behaves (`BatchScript`'s fields); returns the script."""
        if "unknown_ids" in settings:
            settings["unknown_ids"] = tuple(settings["unknown_ids"])
        if "errors" in settings:
            settings["errors"] = tuple(settings["errors"])
        script = BatchScript(**settings)
        with self._batch_lock:
            self._batch_scripts.append(script)
        return script

    def script_line(self, prompt: str, *replies: StubReply) -> None:
        with self._batch_lock:
            self._line_scripts.setdefault(prompt, deque()).extend(replies)

    def script_call(self, route: str, *replies: StubReply, executed: bool = False) -> None:
        if route not in ROUTES:
            raise ValueError(f"route {route!r}: one of {ROUTES}")
        with self._batch_lock:
            self._call_scripts[route].extend((reply, executed) for reply in replies)

    def finish(self, batch_id: str | None = None) -> None:
        with self._batch_lock:
            for batch in [self.batches[batch_id]] if batch_id else list(self.batches.values()):
                while batch.status not in ("completed", "failed", "expired", "cancelled"):
                    self._advance(batch)

    # --- counts --------------------------------------------------------------------------------------------------

    def call_counts(self) -> Counter[str]:
        with self._batch_lock:
            return Counter(call.route for call in self.calls)

    def batch_answers(self) -> Counter[str]:
        """Per custom_id, the batch lines answered with a 200 (each one paid for)."""
        with self._batch_lock:
            return Counter(line.custom_id for line in self.lines_answered if line.status == 200)

    # --- the API -------------------------------------------------------------------------------------------------

    def _id(self, prefix: str) -> str:
        self._serial += 1
        return f"{prefix}_stub{self._serial:06d}"

    def handle(self, method: str, target: str, headers: Mapping[str, str], payload: bytes) -> StubReply:
        parts = urlsplit(target)
        path, query = parts.path, parse_qs(parts.query)
        route, ident = _route(method, path)
        if route is None:
            return api_error(404, f"Invalid URL ({method} {path})", code="unknown_url")
        with self._batch_lock:
            if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
                self.unauthorized += 1
                reply = api_error(401, "Incorrect API key provided. You can find your API key at "
                                  "https://platform.openai.com/account/api-keys.", code="invalid_api_key")
                self.calls.append(BatchCall(route, method, path, 401, scripted=False))
                return reply
            scripted = self._call_scripts[route].popleft() if self._call_scripts[route] else None
            if scripted is not None and not scripted[1]:
                self.calls.append(BatchCall(route, method, path, scripted[0].status, scripted=True))
                return scripted[0]
            reply = self._serve(route, ident, query, headers, payload)
            if scripted is not None:  # done, but the answer is lost
                reply = scripted[0]
            self.calls.append(BatchCall(route, method, path, reply.status, scripted=scripted is not None))
            return reply

    def _serve(self, route: str, ident: str | None, query: Mapping[str, list[str]], headers: Mapping[str, str],
               payload: bytes) -> StubReply:
        if route == "upload":
            return self._upload(headers.get("content-type", ""), payload)
        if route in ("download", "delete"):
            file = self.files.get(ident or "")
            if file is None:
                return api_error(404, f"No such File object: {ident}", code=None)
            if route == "delete":
                del self.files[ident]
                self.deleted_files.append(ident)
                return StubReply(200, {"id": ident, "object": "file", "deleted": True})
            return StubReply(200, {}, raw=file["data"], content_type="application/octet-stream")
        if route == "create":
            return self._create(payload)
        if route == "list":
            return self._list(query)
        batch = self.batches.get(ident or "")
        if batch is None:
            return api_error(404, f"No batch found with id '{ident}'.", code=None)
        if route == "cancel":
            if batch.status in ("completed", "failed", "expired", "cancelled"):
                return api_error(400, f"Cannot cancel a batch with status '{batch.status}'.", code=None)
            batch.cancel_requested = True
            if batch.status != "cancelling":
                self._move(batch, "cancelling")
            return StubReply(200, self._batch_object(batch))
        batch.polls += 1  # poll
        self._advance(batch)
        return StubReply(200, self._batch_object(batch))

    def _upload(self, content_type: str, payload: bytes) -> StubReply:
        try:
            fields = multipart_fields(content_type, payload)
        except ValueError as error:
            return api_error(400, f"stub: {error}", code=None)
        purpose = fields.get("purpose", (None, b""))[1].decode("utf-8", "replace")
        if purpose != "batch":
            return api_error(400, f"stub: purpose {purpose!r}, expected 'batch'", code=None)
        if "file" not in fields or not fields["file"][0]:
            return api_error(400, "stub: no 'file' part with a filename", code=None)
        filename, data = fields["file"]
        file_id = self._id("file")
        created = int(time.time())
        self.files[file_id] = {"data": data, "purpose": "batch", "filename": filename, "created_at": created}
        return StubReply(200, {"id": file_id, "object": "file", "bytes": len(data), "created_at": created,
                               "filename": filename, "purpose": "batch", "status": "processed"})

    def _create(self, payload: bytes) -> StubReply:
        try:
            body = json.loads(payload)
        except ValueError:
            return api_error(400, "stub: the body is not JSON", code=None)
        file = self.files.get(body.get("input_file_id", ""))
        if file is None:
            return api_error(400, f"stub: no file {body.get('input_file_id')!r}", code="invalid_request")
        if body.get("endpoint") != COMPLETIONS_PATH or body.get("completion_window") != "24h":
            return api_error(400, "stub: endpoint must be /v1/chat/completions and completion_window 24h",
                             code="invalid_request")
        lines, invalid, seen = [], [], set()
        for number, raw in enumerate(file["data"].splitlines(), start=1):
            try:
                line = json.loads(raw)
            except ValueError:
                invalid.append({"code": "invalid_json_line", "message": "not JSON", "line": number})
                continue
            custom_id = line.get("custom_id") if isinstance(line, dict) else None
            if not isinstance(custom_id, str) or custom_id in seen:
                invalid.append({"code": "duplicate_custom_id" if custom_id in seen else "missing_required_parameter",
                                "message": f"custom_id {custom_id!r}", "line": number})
            elif line.get("method") != "POST" or line.get("url") != COMPLETIONS_PATH or \
                    not isinstance(line.get("body"), dict):
                invalid.append({"code": "invalid_url", "message": "line must POST a body to /v1/chat/completions",
                                "line": number})
            else:
                seen.add(custom_id)
                lines.append(line)
        script = self._batch_scripts.popleft() if self._batch_scripts else BatchScript()
        batch = StubBatch(self._id("batch"), body["input_file_id"], lines, script,
                          dict(body.get("metadata") or {}), int(time.time()), invalid=invalid)
        batch.counts["total"] = 0
        self.batches[batch.id] = batch
        return StubReply(200, self._batch_object(batch))

    def _list(self, query: Mapping[str, list[str]]) -> StubReply:
        limit = int(query.get("limit", ["20"])[0])
        after = query.get("after", [None])[0]
        newest_first = list(reversed(self.batches.values()))
        if after is not None:
            ids = [batch.id for batch in newest_first]
            newest_first = newest_first[ids.index(after) + 1:] if after in ids else []
        page = newest_first[:limit]
        data = [self._batch_object(batch) for batch in page]
        return StubReply(200, {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
                               "last_id": data[-1]["id"] if data else None, "has_more": len(newest_first) > limit})

    # --- a batch's life ------------------------------------------------------------------------------------------

    def _move(self, batch: StubBatch, status: str) -> None:
        batch.status = status
        batch.stamps[f"{status}_at"] = int(time.time())

    def _advance(self, batch: StubBatch) -> None:
        script = batch.script
        if batch.status == "validating":
            if batch.invalid or script.end == "failed":
                batch.invalid = batch.invalid or [dict(error) for error in script.errors]
                self._move(batch, "failed")
            else:
                batch.counts["total"] = len(batch.lines)
                self._move(batch, "in_progress")
        elif batch.status == "in_progress":
            if batch.held < script.hold:
                batch.held += 1
            elif script.end == "expired":
                self._end(batch, "expired")
            elif script.end == "cancelled":
                self._move(batch, "cancelling")
            else:
                self._move(batch, "finalizing")
        elif batch.status == "finalizing":
            self._end(batch, "completed")
        elif batch.status == "cancelling":
            self._end(batch, "cancelled")

    def _end(self, batch: StubBatch, status: str) -> None:
        """Answer the batch's lines (all, or the scripted share) and write its output and error files."""
        lines = batch.lines
        done = len(lines) if status == "completed" else \
            (batch.script.answered if batch.script.answered is not None else len(lines) // 2)
        if batch.cancel_requested:  # cancelled by the client: the scripted share was done before (default none)
            done = batch.script.answered or 0
        output, errors = [], []
        for line in lines[:done]:
            reply = self._answer_line(line["body"])
            self.lines_answered.append(LineAnswer(batch.id, line["custom_id"], reply.status))
            (output if reply.status == 200 else errors).append(_output_line(line["custom_id"], reply))
        code, message = ("batch_expired", EXPIRED_MESSAGE) if status == "expired" else \
            ("batch_cancelled", CANCELLED_MESSAGE)
        for line in lines[done:]:
            errors.append({"id": self._id("batch_req"), "custom_id": line["custom_id"], "response": None,
                           "error": {"code": code, "message": message}})
        for custom_id in batch.script.unknown_ids:
            output.append(_output_line(custom_id, self.echo("unknown", {})))
        batch.counts.update(total=len(lines), completed=len(output) - len(batch.script.unknown_ids),
                            failed=len(errors))
        if output:
            data = b"".join(json.dumps(record).encode("utf-8") + b"\n" for record in output)
            if batch.script.cut_output:
                last = len(json.dumps(output[-1]).encode("utf-8")) + 1
                data = data[: len(data) - last + last // 2]
            batch.output_file_id = self._file(data, f"{batch.id}_output.jsonl")
        if errors:
            batch.error_file_id = self._file(b"".join(json.dumps(record).encode("utf-8") + b"\n"
                                                      for record in errors), f"{batch.id}_error.jsonl")
        self._move(batch, status)

    def _file(self, data: bytes, filename: str) -> str:
        file_id = self._id("file")
        self.files[file_id] = {"data": data, "purpose": "batch_output", "filename": filename,
                               "created_at": int(time.time())}
        return file_id

    def _answer_line(self, body: dict[str, Any]) -> StubReply:
        prompt = self.prompt_of(body)
        queued = self._line_scripts.get(prompt)
        if queued:
            return queued.popleft()
        refused = self.reasoning_model.check(body) if self.reasoning_model else None
        if refused is not None:
            return refused
        reply = self.echo(prompt, body)
        reply.body["model"] = body.get("model", "stub-model")
        return self.reasoning_model.answer(reply, body) if self.reasoning_model else reply

    def _batch_object(self, batch: StubBatch) -> dict[str, Any]:
        return {"id": batch.id, "object": "batch", "endpoint": COMPLETIONS_PATH, "input_file_id": batch.input_file_id,
                "completion_window": "24h", "status": batch.status, "output_file_id": batch.output_file_id,
                "error_file_id": batch.error_file_id, "created_at": batch.created_at,
                "expires_at": batch.created_at + 86400, **batch.stamps,
                "errors": {"object": "list", "data": batch.invalid} if batch.status == "failed" else None,
                "request_counts": dict(batch.counts), "metadata": dict(batch.metadata) or None}


def _output_line(custom_id: str, reply: StubReply) -> dict[str, Any]:
    body: Any = reply.body if reply.raw is None else reply.raw.decode("utf-8", "replace")
    return {"id": f"batch_req_{custom_id[:12]}", "custom_id": custom_id,
            "response": {"status_code": reply.status, "request_id": f"req_{custom_id[:12]}", "body": body},
            "error": None}


def _route(method: str, path: str) -> tuple[str | None, str | None]:
    parts = path.rstrip("/").split("/")[1:]  # "", "v1", …
    if parts[:1] != ["v1"]:
        return None, None
    rest = parts[1:]
    if rest == ["files"] and method == "POST":
        return "upload", None
    if len(rest) == 2 and rest[0] == "files" and method == "DELETE":
        return "delete", rest[1]
    if len(rest) == 3 and rest[0] == "files" and rest[2] == "content" and method == "GET":
        return "download", rest[1]
    if rest == ["batches"]:
        return ("create" if method == "POST" else "list" if method == "GET" else None), None
    if len(rest) == 2 and rest[0] == "batches" and method == "GET":
        return "poll", rest[1]
    if len(rest) == 3 and rest[0] == "batches" and rest[2] == "cancel" and method == "POST":
        return "cancel", rest[1]
    return None, None


def _batch_handler_for(stub: OpenAIBatchStub) -> type:
    base = _handler_for(stub)

    class Handler(base):  # type: ignore[valid-type, misc]
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            self._batch_call("GET")

        def do_DELETE(self) -> None:  # noqa: N802
            self._batch_call("DELETE")

        def do_POST(self) -> None:  # noqa: N802
            if self.path.split("?")[0] == COMPLETIONS_PATH:
                super().do_POST()
            else:
                self._batch_call("POST")

        def _batch_call(self, method: str) -> None:
            payload = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            headers = {name.lower(): value for name, value in self.headers.items()}
            self._send(stub.handle(method, self.path, headers, payload))

    return Handler


__all__ = ["BatchCall", "BatchScript", "DROP_CONNECTION", "LineAnswer", "OpenAIBatchStub", "StubBatch",
           "multipart_fields"]
