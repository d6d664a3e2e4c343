"""A stub of Gemini's Batch API on 127.0.0.1, for tests (`with StubGeminiBatches() as stub:`; point a `GeminiBackend`
at `stub.base_url` with the key `stub.api_key` in its key variable).

Routes, shaped as the real API's (REST, v1beta):
- `POST /v1beta/models/{model}:batchGenerateContent` `{"batch": {"displayName", "inputConfig": {"requests":
  {"requests": [{"request", "metadata": {"key"}}]}}}}` (snake_case names are accepted too, as by Google's JSON
  parser) → an operation `{"name": "batches/…", "metadata": {"@type": ….GenerateContentBatch, "model",
  "displayName", "state": "BATCH_STATE_PENDING", "batchStats", "createTime"}, "done": false}`; no display name, no
  requests, or a body over 20 MB is a 400 `INVALID_ARGUMENT`.
- `GET /v1beta/batches/{id}` (a poll): `BATCH_STATE_RUNNING` for `plan.running_polls` polls, then
  `BATCH_STATE_SUCCEEDED` / `_EXPIRED` / `_CANCELLED` (the provider's, or after the client's cancel) / `_FAILED`
  with `done: true`; `batchStats` as int64 strings; once ended, `response` (`@type` ….GenerateContentBatchOutput)
  with `inlinedResponses.inlinedResponses[]` (`{"metadata": {"key"}, "response" | "error"}`) or, with
  `plan.output="file"`, a `responsesFile` (`files/…`); a failed batch carries an operation `error` and no output.
  An early end lists only the lines answered before it. Line answers are the synchronous stub's echo
  `GenerateContentResponse`, or a blocked prompt (`refusal`), or a `google.rpc.Status` error: code 3
  `INVALID_ARGUMENT` (`invalid`, or a request the synchronous stub would refuse: no `contents`), 13 (`server_error`),
  14 (`overloaded`), 8 (`rate_limited`).
- `GET /download/v1beta/files/{id}:download?alt=media`: the responses file, JSONL `{"key", "response" | "error"}`
  a line (the last cut in half with `plan.cut_results`).
- `GET /v1beta/batches?pageSize=&pageToken=`: `{"operations": [...], "nextPageToken"}`.
- `POST /v1beta/batches/{id}:cancel`: `{}`.
Every call needs `x-goog-api-key: <api_key>`: none is a 403 `PERMISSION_DENIED`, a wrong one a 400 `API key not
valid` (neither quotes it). Scripting and the log: `provider_batch_stub.py`.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from typing import Any, Mapping

from sctc_assets_tests.gemini_stub_server import blocked, echo_response, prompt_of
from sctc_assets_tests.provider_batch_stub import BatchStubServer, Reply, StubBatch, json_reply, results_body

CREATE = re.compile(r"^/v1beta/models/([^/:]+):batchGenerateContent$")
BATCH = re.compile(r"^/v1beta/batches/([^/:]+)(:cancel)?$")
DOWNLOAD = re.compile(r"^/download/v1beta/files/([^/:]+):download$")
INLINE_LIMIT = 20_000_000
BATCH_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch"
OUTPUT_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatchOutput"
_STATES = {"completed": "BATCH_STATE_SUCCEEDED", "expired": "BATCH_STATE_EXPIRED",
           "cancelled": "BATCH_STATE_CANCELLED", "failed": "BATCH_STATE_FAILED"}
_LINE_ERRORS = {"invalid": (3, "* GenerateContentRequest.contents: contents is not specified"),
                "server_error": (13, "Internal error encountered."),
                "overloaded": (14, "The model is overloaded. Please try again later."),
                "rate_limited": (8, "Resource has been exhausted (e.g. check quota).")}
_HTTP_STATUS = {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED",
                500: "INTERNAL"}


def _field(mapping: Any, camel: str) -> Any:
    """`camel` or its snake_case spelling, as Google's JSON parser takes either."""
    if not isinstance(mapping, Mapping):
        return None
    snake = re.sub(r"([A-Z])", lambda match: "_" + match.group(1).lower(), camel)
    return mapping.get(camel, mapping.get(snake))


class StubGeminiBatches(BatchStubServer):
    key_header = "x-goog-api-key"

    def error_reply(self, status: int, kind: str, headers: dict[str, str] | None = None) -> Reply:
        text = {"rate_limited": "Resource has been exhausted (e.g. check quota).",
                "server_error": "Internal error encountered."}.get(kind, kind)
        return json_reply(status, {"error": {"code": status, "message": text,
                                             "status": _HTTP_STATUS.get(status, "INTERNAL")}}, headers)

    def prompt_of(self, body: Any) -> str:
        return prompt_of(body) if isinstance(body, Mapping) else ""

    def line_rejection(self, body: Any) -> bool:
        return not isinstance(body, Mapping) or not isinstance(body.get("contents"), list) or not body["contents"]

    def route(self, method: str, path: str, query: dict[str, str], headers: Mapping[str, str], body: Any) -> Reply:
        if not headers.get(self.key_header):
            self.calls["unauthorized"] += 1
            return self.error_reply(403, "Method doesn't allow unregistered callers. Please use API Key.")
        if not self.authorized(headers):
            return self.error_reply(400, "API key not valid. Please pass a valid API key.")
        create = CREATE.match(path)
        if method == "POST" and create:
            return self._create(create.group(1), body)
        if method == "GET" and path == "/v1beta/batches":
            return self._list(query)
        download = DOWNLOAD.match(path)
        if method == "GET" and download:
            return self._download(download.group(1), query)
        match = BATCH.match(path)
        batch = self.batches.get(f"batches/{match.group(1)}") if match else None
        if batch is None:
            return self.error_reply(404, f"no batch at {path}")
        if method == "POST" and match.group(2):
            faulted = self.faulted("cancel")
            if faulted:
                return faulted
            with self._lock:
                if not batch.ended:
                    batch.cancel_requested = True
            return json_reply(200, {})
        if method == "GET" and not match.group(2):
            faulted = self.faulted("poll")
            if faulted:
                return faulted
            self.poll(batch)
            return json_reply(200, self._operation(batch))
        return self.error_reply(404, f"no route {method} {path}")

    # --- routes ----------------------------------------------------------------------------------------------------

    def _create(self, model: str, body: Any) -> Reply:
        fault = self.fault("create")
        if fault in ("429", "500"):
            return self.fault_reply(fault)
        batch_body = _field(body, "batch")
        label = _field(batch_body, "displayName")
        requests = _field(_field(_field(batch_body, "inputConfig"), "requests"), "requests")
        if not isinstance(label, str) or not label:
            return self.error_reply(400, "* GenerateContentBatch.display_name: display_name is required")
        if not isinstance(requests, list) or not requests:
            return self.error_reply(400, "* GenerateContentBatch.input_config: requests are required")
        if len(json.dumps(body, ensure_ascii=False).encode("utf-8")) > INLINE_LIMIT:
            return self.error_reply(400, "Request payload size exceeds the limit: 20971520 bytes.")
        lines = [(str(_field(_field(item, "metadata"), "key")), _field(item, "request")) for item in requests]
        with self._lock:
            batch = self.new_batch(f"batches/stub{len(self.created):06d}", label, lines)
            batch.model = f"models/{model}"
        if fault == "lost":
            return self.fault_reply("500")
        return json_reply(200, self._operation(batch))

    def _list(self, query: dict[str, str]) -> Reply:
        faulted = self.faulted("list")
        if faulted:
            return faulted
        size = int(query.get("pageSize", "50"))
        start = int(query.get("pageToken") or 0)
        with self._lock:
            page = self.created[start:start + size]
            more = start + size < len(self.created)
        answer: dict[str, Any] = {"operations": [self._operation(batch, with_output=False) for batch in page]}
        if more:
            answer["nextPageToken"] = str(start + size)
        return json_reply(200, answer)

    def _download(self, file_id: str, query: dict[str, str]) -> Reply:
        faulted = self.faulted("results")
        if faulted:
            return faulted
        batch = next((batch for batch in self.created if _file_id(batch) == file_id and batch.ended), None)
        if batch is None or query.get("alt") != "media":
            return self.error_reply(404, f"no file files/{file_id}")
        requests = dict(batch.lines)
        lines = [json.dumps({"key": key, **_line_output(fate, requests.get(key))}, ensure_ascii=False).encode("utf-8")
                 for key, fate in batch.results if fate not in ("canceled", "expired")]
        return Reply(200, results_body(lines, batch.plan.cut_results), content_type="application/json")

    def _operation(self, batch: StubBatch, with_output: bool = True) -> dict[str, Any]:
        with self._lock:
            if batch.ended:
                end = "cancelled" if batch.cancel_requested else batch.plan.end
                state = _STATES[end]
            else:
                state = "BATCH_STATE_PENDING" if batch.polls == 0 else "BATCH_STATE_RUNNING"
            total = len(batch.lines)
            answered = [fate for _, fate in batch.results[:total]]
            succeeded = sum(1 for fate in answered if fate in ("answer", "refusal"))
            failed = sum(1 for fate in answered if fate in _LINE_ERRORS)
            stats = {"requestCount": str(total), "successfulRequestCount": str(succeeded),
                     "failedRequestCount": str(failed),
                     "pendingRequestCount": str(0 if batch.ended else total)}
            metadata = {"@type": BATCH_TYPE, "model": batch.model,
                        "displayName": batch.label, "createTime": _iso(batch.created_at),
                        "updateTime": _iso(batch.created_at), "batchStats": stats, "state": state}
            operation: dict[str, Any] = {"name": batch.id, "metadata": metadata, "done": batch.ended}
            if batch.ended and state == "BATCH_STATE_FAILED":
                operation["error"] = {"code": 13, "message": "Batch failed: an internal error occurred."}
            elif batch.ended and with_output:
                if batch.plan.output == "file":
                    output: dict[str, Any] = {"responsesFile": f"files/{_file_id(batch)}"}
                else:
                    requests = dict(batch.lines)
                    output = {"inlinedResponses": {"inlinedResponses": [
                        {"metadata": {"key": key}, **_line_output(fate, requests.get(key))}
                        for key, fate in batch.results if fate not in ("canceled", "expired")]}}
                operation["response"] = {"@type": OUTPUT_TYPE, **output}
                metadata["output"] = output
            return operation


def _file_id(batch: StubBatch) -> str:
    return "responses-" + batch.id.removeprefix("batches/")


def _line_output(fate: str, request: Any) -> dict[str, Any]:
    if fate in _LINE_ERRORS:
        code, message = _LINE_ERRORS[fate]
        return {"error": {"code": code, "message": message}}
    reply = blocked() if fate == "refusal" else echo_response(prompt_of(request) if isinstance(request, Mapping)
                                                              else "")
    return {"response": reply.body}


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, timezone.utc).isoformat().replace("+00:00", "Z")
