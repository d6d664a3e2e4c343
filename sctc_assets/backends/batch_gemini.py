"""Gemini's Batch API ("batch mode") as a `BatchClient` (`lib/batches.py`), for `GeminiBackend.batch_client()`.

- Create: `POST /v1beta/models/{model}:batchGenerateContent` with `{"batch": {"displayName": label, "inputConfig":
  {"requests": {"requests": [{"request", "metadata": {"key": custom_id}}]}}}}`: inline requests, each `request` the
  very `GenerateContentRequest` the synchronous backend sends (`GeminiBackend._request_body`), at most 20 MB a
  creation (the API's limit for inline requests; the driver splits at `max_bytes`). The answer is a long-running
  operation whose `name` (`batches/…`) is the provider id.
- Poll: `GET /v1beta/{name}`: the operation's `metadata` holds the batch: `state` (`BATCH_STATE_PENDING` →
  `BATCH_STATE_RUNNING` → `BATCH_STATE_SUCCEEDED` / `_FAILED` / `_CANCELLED` / `_EXPIRED`, or the SDK's `JOB_STATE_*`
  names: both are read) and `batchStats` (`requestCount`, `successfulRequestCount`, `failedRequestCount`,
  `pendingRequestCount`, int64 strings); `done` and a final state end it; an `error` says why a batch failed.
- Results: the operation's `response` (or `metadata.output`) holds `inlinedResponses.inlinedResponses[]`, each
  `{"metadata": {"key"}, "response" | "error"}`; or a `responsesFile`, streamed from
  `GET /download/v1beta/{file}:download?alt=media` (JSONL, `{"key", "response" | "error"}` a line). A response is
  read as the synchronous backend reads one (a blocked prompt or a safety stop is a refusal); an error (a
  `google.rpc.Status`) whose code says the request is wrong (`INVALID_ARGUMENT`, `FAILED_PRECONDITION`,
  `OUT_OF_RANGE`, `UNIMPLEMENTED`, or an HTTP 4xx other than 408/409/429) is a final error result, any other a line
  to retry. Lines without a key, and a responses file's last line cut short, are skipped: the driver retries what
  it never saw (an expired or cancelled batch lists only the requests it finished).
- Cancel: `POST /v1beta/{name}:cancel`. Find: `GET /v1beta/batches` (paged) for the batch whose `displayName` is
  the label.
"""

from __future__ import annotations

import logging
from typing import Any, Iterator, Mapping, Sequence
from urllib.parse import quote

from sctc_assets.backends.api_backend import redact
from sctc_assets.backends.batch_common import ProviderBatchClient, answer_of, count, create_once, json_line, mapping
from sctc_assets.lib.batches import BatchApiError, BatchLine, BatchStatus, LineResult
from sctc_assets.lib.generation import GenerationResult

log = logging.getLogger(__name__)

API_VERSION = "v1beta"
ENDED_STATES = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED"})
# google.rpc.Code values that blame the request itself: asking again cannot help.
FINAL_ERROR_CODES = frozenset({3, 9, 11, 12})  # INVALID_ARGUMENT, FAILED_PRECONDITION, OUT_OF_RANGE, UNIMPLEMENTED
FINAL_ERROR_STATUSES = frozenset({"INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE", "UNIMPLEMENTED"})
_LIST_PAGE = 100
_MAX_LIST_PAGES = 50
_ENVELOPE_BYTES = 1024


class GeminiBatchClient(ProviderBatchClient):
    """Batch mode for one `GeminiBackend` (its requests, its answers, its key); see the module docstring."""

    provider = "gemini"
    # The API sets no count of its own for inline requests; their bytes (20 MB) bound a batch first.
    max_requests = 100_000
    max_bytes = 20_000_000 - _ENVELOPE_BYTES

    # --- the BatchClient protocol ----------------------------------------------------------------------------------

    def submit(self, lines: Sequence[BatchLine], label: str) -> str:
        if not lines:
            raise ValueError("a batch needs at least one line")
        payload = {"batch": {"displayName": label,
                             "inputConfig": {"requests": {"requests": [self._line(line) for line in lines]}}}}
        path = self._backend._request_path().removesuffix(":generateContent") + ":batchGenerateContent"
        return create_once(self._http, path, payload, read_id=self._batch_name,
                           find=lambda: self.find(label, created_after=0.0, size=len(lines)))

    def find(self, label: str, *, created_after: float, size: int) -> str | None:
        """The batch whose display name is `label` (labels are unique local ids: `created_after` and `size` are not
        needed to tell it apart)."""
        found: list[str] = []
        token: str | None = None
        for _ in range(_MAX_LIST_PAGES):
            query = f"?pageSize={_LIST_PAGE}" + (f"&pageToken={quote(token, safe='')}" if token else "")
            page = mapping(self._http.json("GET", f"/{API_VERSION}/batches{query}"))
            for operation in page.get("operations") or page.get("batches") or []:
                batch = _batch_of(operation)
                if batch.get("displayName") == label and isinstance(mapping(operation).get("name"), str):
                    found.append(operation["name"])
            token = page.get("nextPageToken") if isinstance(page.get("nextPageToken"), str) else None
            if not token:
                break
        else:
            log.warning("listing Gemini batches stopped after %d pages without finding %s", _MAX_LIST_PAGES, label)
        if len(found) > 1:
            log.warning("%d Gemini batches are named %s: %s is taken", len(found), label, found[0])
        return found[0] if found else None

    def status(self, provider_id: str) -> BatchStatus:
        operation = self._operation(provider_id)
        batch = _batch_of(operation)
        state = batch.get("state") if isinstance(batch.get("state"), str) else "BATCH_STATE_UNSPECIFIED"
        stats = mapping(batch.get("batchStats"))
        counts = {name: count(stats.get(field)) for name, field in
                  (("total", "requestCount"), ("succeeded", "successfulRequestCount"),
                   ("failed", "failedRequestCount"), ("pending", "pendingRequestCount"))}
        ended = state.rsplit("_", 1)[-1] in ENDED_STATES or operation.get("done") is True
        error = mapping(operation.get("error"))
        message = redact(str(error["message"]), self._api_key)[:300] if error.get("message") else None
        return BatchStatus(state=state, ended=ended, counts=counts, message=message)

    def results(self, provider_id: str) -> Iterator[LineResult]:
        operation = self._operation(provider_id)
        output = mapping(operation.get("response")) or mapping(_batch_of(operation).get("output"))
        inlined = output.get("inlinedResponses")
        if isinstance(inlined, Mapping):
            inlined = inlined.get("inlinedResponses")
        for item in inlined if isinstance(inlined, list) else []:
            result = self._line_result(mapping(item), mapping(mapping(item).get("metadata")).get("key"))
            if result is not None:
                yield result
        responses_file = output.get("responsesFile")
        if isinstance(responses_file, str) and responses_file:
            for raw in self._http.lines(f"/download/{API_VERSION}/{quote(responses_file, safe='/')}:download"
                                        "?alt=media"):
                line = json_line(raw)
                if line is None:
                    continue  # cut short or garbled: never seen, so retried by the driver
                key = line.get("key", mapping(line.get("metadata")).get("key"))
                result = self._line_result(line, key)
                if result is not None:
                    yield result

    def cancel(self, provider_id: str) -> None:
        self._http.json("POST", f"{self._name_path(provider_id)}:cancel")

    # --- helpers ---------------------------------------------------------------------------------------------------

    def _line(self, line: BatchLine) -> dict[str, Any]:
        return {"request": self._backend._request_body(line.request), "metadata": {"key": line.custom_id}}

    def _operation(self, provider_id: str) -> Mapping[str, Any]:
        operation = self._http.json("GET", self._name_path(provider_id))
        if not isinstance(operation, Mapping):
            raise BatchApiError(f"GET {self._name_path(provider_id)}: the answer is not a batch operation")
        return operation

    def _line_result(self, item: Mapping[str, Any], key: Any) -> LineResult | None:
        if not isinstance(key, str):
            return None  # no key: the driver retries the line it never saw
        if "error" in item:
            error = mapping(item.get("error"))
            code, status = error.get("code"), error.get("status")
            message = redact(str(error.get("message") or "(no message)"), self._api_key)[:300]
            named = status if isinstance(status, str) else f"code {code}"
            if _is_final(code, status):
                return LineResult(key, result=GenerationResult(
                    text=None, outcome="error", message=f"batch line failed: {named}: {message}"))
            return LineResult(key, retry=f"failed: {named}: {message}")
        return answer_of(self._backend, key, item.get("response"))

    @staticmethod
    def _batch_name(answer: Any) -> str:
        name = answer.get("name") if isinstance(answer, Mapping) else None
        if not isinstance(name, str) or not name.startswith("batches/"):
            raise BatchApiError("batchGenerateContent: the answer names no batch (batches/…)")
        return name

    @staticmethod
    def _name_path(provider_id: str) -> str:
        if not provider_id.startswith("batches/"):
            raise BatchApiError(f"{provider_id!r} is not a Gemini batch name (batches/…)")
        return f"/{API_VERSION}/batches/{quote(provider_id.removeprefix('batches/'), safe='')}"


def _batch_of(operation: Any) -> Mapping[str, Any]:
    """The batch an operation describes: its `metadata` (a `GenerateContentBatch`), or the operation itself when an
    API version answers with the batch directly."""
    operation = mapping(operation)
    metadata = mapping(operation.get("metadata"))
    return metadata if metadata else operation


def _is_final(code: Any, status: Any) -> bool:
    if isinstance(status, str) and status:
        return status in FINAL_ERROR_STATUSES
    if isinstance(code, int) and not isinstance(code, bool):
        if code >= 100:  # an HTTP status
            return 400 <= code < 500 and code not in (408, 409, 429)
        return code in FINAL_ERROR_CODES
    return False
