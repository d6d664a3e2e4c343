"""A stub of Anthropic's Message Batches API on 127.0.0.1, for tests (`with StubAnthropicBatches() as stub:`; point an
`AnthropicBackend` at `stub.base_url` with the key `stub.api_key` in its key variable).

Routes, shaped as the real API's:
- `POST /v1/messages/batches` `{"requests": [{"custom_id", "params"}]}` → a `message_batch` (`processing_status:
  in_progress`); a custom id that breaks the API's rule (1–64 of `[A-Za-z0-9_-]`) or appears twice is a 400, as is
  an empty or missing list.
- `GET /v1/messages/batches/{id}` (a poll): `in_progress` for `plan.running_polls` polls, then `ended` (a batch the
  client or the provider cancels shows `canceling` on one poll first); `request_counts` `processing`, `succeeded`,
  `errored`, `canceled`, `expired`; `results_url` (absolute, on this server) once ended.
- `GET /v1/messages/batches/{id}/results`: JSONL, one `{"custom_id", "result"}` a line: `succeeded` with the
  synchronous stub's echo `message` (or a `stop_reason: refusal` one), `errored` with an error response
  (`invalid_request_error` for a scripted `invalid` line or for params the synchronous stub would refuse: no
  `max_tokens`, a `system` role, a sampling parameter for a model that takes none; `api_error`, `overloaded_error`,
  `rate_limit_error`), `canceled`, `expired`. A 404 before the batch ended.
- `GET /v1/messages/batches?limit=&after_id=`: newest first, `has_more`, `first_id`, `last_id`.
- `POST /v1/messages/batches/{id}/cancel`: the batch, `canceling`.
Every call needs `x-api-key: <api_key>` (else a 401 `authentication_error` that does not quote it) and
`anthropic-version`. Scripting and the log: `provider_batch_stub.py`.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from typing import Any, Mapping

from sctc_assets_tests.anthropic_stub_server import (MESSAGES_PATH, StubAnthropicServer, echo_message, prompt_of,
                                                     refusal)
from sctc_assets_tests.provider_batch_stub import BatchStubServer, Reply, StubBatch, json_reply, results_body

BATCHES = "/v1/messages/batches"
_CUSTOM_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ERRORS = {"invalid": ("invalid_request_error", "messages: field required"),
           "server_error": ("api_error", "Internal server error"),
           "overloaded": ("overloaded_error", "Overloaded"),
           "rate_limited": ("rate_limit_error", "Number of request tokens has exceeded your rate limit")}
_HTTP_ERRORS = {401: "authentication_error", 404: "not_found_error", 400: "invalid_request_error",
                429: "rate_limit_error", 500: "api_error"}


class StubAnthropicBatches(BatchStubServer):
    key_header = "x-api-key"
    no_sampling_models = StubAnthropicServer.no_sampling_models

    def error_reply(self, status: int, kind: str, headers: dict[str, str] | None = None) -> Reply:
        error_type = _HTTP_ERRORS.get(status, "api_error")
        text = {"rate_limited": "Number of requests has exceeded your rate limit",
                "server_error": "Internal server error"}.get(kind, kind)
        return json_reply(status, {"type": "error", "error": {"type": error_type, "message": text}}, headers)

    def prompt_of(self, body: Any) -> str:
        return prompt_of(body) if isinstance(body, Mapping) else ""

    def line_rejection(self, body: Any) -> bool:
        headers = {"x-api-key": self.api_key, "anthropic-version": "2023-06-01"}
        return StubAnthropicServer.rejection(self, body, headers, MESSAGES_PATH) is not None  # type: ignore[arg-type]

    def route(self, method: str, path: str, query: dict[str, str], headers: Mapping[str, str], body: Any) -> Reply:
        if not self.authorized(headers):
            return json_reply(401, {"type": "error", "error": {"type": "authentication_error",
                                                                 "message": "invalid x-api-key"}})
        if not headers.get("anthropic-version"):
            return self.error_reply(400, "anthropic-version: header is required")
        parts = path.removeprefix(BATCHES).strip("/").split("/") if path.startswith(BATCHES) else None
        if parts is None:
            return self.error_reply(404, f"no route {path}")
        if method == "POST" and parts == [""]:
            return self._create(body)
        if method == "GET" and parts == [""]:
            return self._list(query)
        batch = self.batches.get(parts[0])
        if batch is None:
            return self.error_reply(404, f"no message batch {parts[0]}")
        if method == "GET" and len(parts) == 1:
            faulted = self.faulted("poll")
            if faulted:
                return faulted
            self.poll(batch)
            return json_reply(200, self._batch_json(batch))
        if method == "GET" and parts[1:] == ["results"]:
            faulted = self.faulted("results")
            if faulted:
                return faulted
            if not batch.ended:
                return self.error_reply(404, "results are not available until the batch has ended")
            return Reply(200, self._results(batch), content_type="application/binary")
        if method == "POST" and parts[1:] == ["cancel"]:
            faulted = self.faulted("cancel")
            if faulted:
                return faulted
            with self._lock:
                if not batch.ended:
                    batch.cancel_requested = True
            return json_reply(200, self._batch_json(batch))
        return self.error_reply(404, f"no route {method} {path}")

    def ends_now(self, batch: StubBatch) -> bool:
        # A cancellation (the client's, or the provider's at the plan's end) shows `canceling` on one poll first.
        cancelling = batch.cancel_requested or batch.plan.end == "cancelled"
        due = batch.cancel_requested or batch.polls > batch.plan.running_polls
        if not due:
            return False
        if cancelling:
            if batch.cancel_seen_at is None:
                batch.cancel_seen_at = batch.polls
                return False
            return batch.polls > batch.cancel_seen_at
        return True

    # --- routes ----------------------------------------------------------------------------------------------------

    def _create(self, body: Any) -> Reply:
        fault = self.fault("create")
        if fault in ("429", "500"):
            return self.fault_reply(fault)
        requests = body.get("requests") if isinstance(body, Mapping) else None
        if not isinstance(requests, list) or not requests:
            return self.error_reply(400, "requests: Field required")
        ids = [request.get("custom_id") if isinstance(request, Mapping) else None for request in requests]
        bad = next((custom_id for custom_id in ids if not isinstance(custom_id, str)
                    or not _CUSTOM_ID.match(custom_id)), "")
        if bad != "":
            return self.error_reply(400, f"requests: custom_id {bad!r} does not match ^[a-zA-Z0-9_-]{{1,64}}$")
        if len(set(ids)) != len(ids):
            return self.error_reply(400, "requests: custom_id values must be unique within a batch")
        if any(not isinstance(request.get("params"), Mapping) for request in requests):
            return self.error_reply(400, "requests: params: Field required")
        with self._lock:
            batch = self.new_batch(f"msgbatch_stub{len(self.created):06d}", None,
                                   [(request["custom_id"], request["params"]) for request in requests])
        if fault == "lost":
            return self.fault_reply("500")
        return json_reply(200, self._batch_json(batch))

    def _list(self, query: dict[str, str]) -> Reply:
        faulted = self.faulted("list")
        if faulted:
            return faulted
        limit = int(query.get("limit", "20"))
        with self._lock:
            newest_first = list(reversed(self.created))
        ids = [batch.id for batch in newest_first]
        start = ids.index(query["after_id"]) + 1 if query.get("after_id") in ids else 0
        page = newest_first[start:start + limit]
        return json_reply(200, {"data": [self._batch_json(batch) for batch in page],
                                "has_more": start + limit < len(newest_first),
                                "first_id": page[0].id if page else None, "last_id": page[-1].id if page else None})

    def _batch_json(self, batch: StubBatch) -> dict[str, Any]:
        with self._lock:
            counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
            if batch.ended:
                for _, fate in batch.results[:len(batch.lines)]:  # not the unknown ids after them
                    kind = _result_type(fate)
                    counts[kind] += 1
                # Lines a failed batch never answered stay counted as errored.
                counts["errored"] += len(batch.lines) - sum(counts.values())
            else:
                counts["processing"] = len(batch.lines)
            state = "ended" if batch.ended else "canceling" if batch.cancel_seen_at is not None else "in_progress"
            return {"id": batch.id, "type": "message_batch", "processing_status": state, "request_counts": counts,
                    "created_at": _iso(batch.created_at), "expires_at": _iso(batch.created_at + 86400),
                    "ended_at": _iso(batch.created_at) if batch.ended else None,
                    "cancel_initiated_at": _iso(batch.created_at) if batch.cancel_requested else None,
                    "archived_at": None,
                    "results_url": f"{self.base_url}{BATCHES}/{batch.id}/results" if batch.ended else None}

    def _results(self, batch: StubBatch) -> bytes:
        params = dict(batch.lines)
        lines = [json.dumps({"custom_id": custom_id, "result": _result(fate, params.get(custom_id))},
                            ensure_ascii=False).encode("utf-8") for custom_id, fate in batch.results]
        return results_body(lines, batch.plan.cut_results)


def _result_type(fate: str) -> str:
    if fate in ("answer", "refusal"):
        return "succeeded"
    return fate if fate in ("canceled", "expired") else "errored"


def _result(fate: str, params: Any) -> dict[str, Any]:
    kind = _result_type(fate)
    if kind == "succeeded":
        reply = refusal() if fate == "refusal" else echo_message(prompt_of(params) if params else "")
        return {"type": "succeeded", "message": reply.body}
    if kind == "errored":
        error_type, message = _ERRORS[fate]
        return {"type": "errored", "error": {"type": "error", "error": {"type": error_type, "message": message},
                                              "request_id": "req_stub"}}
    return {"type": kind}


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, timezone.utc).isoformat().replace("+00:00", "Z")
