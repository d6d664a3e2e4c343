"""OpenAI's Batch API as a `BatchClient` (`lib/batches.py`): half-price chat completions, answered within 24 h.

One batch is one JSONL file uploaded with purpose `batch` (`POST /files`, multipart), each line
`{"custom_id": <cache key>, "method": "POST", "url": "/v1/chat/completions", "body": <the request>}` where the body is
exactly what the synchronous backend POSTs (`OpenAIBackend._request_body`: same model, messages, parameters, seed,
learned parameter rules); then `POST /batches` with that file, the chat-completions endpoint, the 24 h window and
the label in `metadata.sctc_batch` (so `find` can tell, after a crash or a lost answer, whether the batch exists).
A batch moves `validating` → `in_progress` → `finalizing` → `completed`, or ends `failed` (validation; `errors` says
why), `expired` (the window passed: the lines done are in the output file, the others in the error file with
`batch_expired`) or `cancelled` (after `cancelling`; the rest `batch_cancelled`). Limits: 50,000 requests and
200 MB per input file.

Results are streamed: the output file (`output_file_id`) then the error file (`error_file_id`), line by line. Each
line's `response.body` is read as the synchronous backend reads a chat completion (`_answer_result`; a completion
cut by the content filter is a refusal); a 4xx line is final as the synchronous backend would make it
(`_error_result`: a content-filter 400 is a refusal, another an error with the API's message), except a 400
refusing a parameter of a reasoning model (`unsupported_parameter`/`unsupported_value`): the backend learns the
adaptation (`_adapt_to`) and the line is returned to be retried, so the next round (a batch or a synchronous call)
sends the adapted body. A 408/409/429/5xx line, `batch_expired`, `batch_cancelled` or any error without a response is
retried; a line that does not parse (a file cut mid-line) is skipped and counted in `skipped_lines`: the driver
retries the lines it never saw.

Files: the uploaded input file is deleted once the batch has ended and its results were read to the end (it holds
nothing the cache lacks), and when the batch could not be created; the output and error files are left to
OpenAI's retention (a collection interrupted midway reads them again). Deletion is best-effort: a failure is
counted (`files_kept`), never raised.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any, Iterator, Mapping, Sequence

from sctc_assets.backends.api_backend import ApiBackend, ParameterRefused, error_body, redact
from sctc_assets.backends.batch_common import ProviderBatchClient
from sctc_assets.backends.batch_http import BatchHttp
from sctc_assets.backends.http_client import HttpResponse
from sctc_assets.lib.batches import BatchApiError, BatchLine, BatchStatus, LineResult
from sctc_assets.lib.generation import GenerationResult

ENDPOINT = "/v1/chat/completions"
COMPLETION_WINDOW = "24h"
LABEL_KEY = "sctc_batch"  # the metadata key carrying the batch's label (the local id)
MAX_REQUESTS = 50_000
MAX_BYTES = 200_000_000  # "up to 200 MB": the decimal reading, the smaller one
ENDED_STATES = frozenset({"failed", "completed", "expired", "cancelled"})
_RETRIED_STATUS = frozenset({408, 409, 429, 529})
_RETRIED_CODES = {"batch_expired": "expired before the batch's window ended",
                  "batch_cancelled": "the batch was cancelled before this line ran"}
_PARAMETER_CODES = frozenset({"unsupported_parameter", "unsupported_value"})
# `find` pages back through the listing (newest first) until batches older than this before `created_after`.
_CLOCK_SKEW_S = 3600.0


class OpenAIBatchClient(ProviderBatchClient):
    """The Batch API of `backend`'s endpoint, with `backend`'s key, headers, timeout and retry policy (use as a
    context manager, or `close()`). `backend` is an `OpenAIBackend`: it writes each line's body and reads each
    answer, so a batch asks and reads exactly what a synchronous call would."""

    provider = "openai"
    max_requests = MAX_REQUESTS
    max_bytes = MAX_BYTES

    def __init__(self, backend: ApiBackend, http: BatchHttp | None = None):
        super().__init__(backend, http)
        self.skipped_lines = 0  # result lines that did not parse (a file cut mid-line), over this client's life
        self.adapted_lines = 0  # lines returned for a retry after the backend adapted to a refused parameter
        self.files_kept = 0  # input files whose deletion failed

    # --- submission ----------------------------------------------------------------------------------------------

    def _line(self, line: BatchLine) -> bytes:
        record = {"custom_id": line.custom_id, "method": "POST", "url": ENDPOINT,
                  "body": self._backend._request_body(line.request)}
        return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"

    def line_bytes(self, line: BatchLine) -> int:
        return len(self._line(line))

    def submit(self, lines: Sequence[BatchLine], label: str) -> str:
        if not lines:
            raise ValueError("a batch needs at least one line")
        if len(lines) > self.max_requests:
            raise ValueError(f"{len(lines)} lines: OpenAI's Batch API takes at most {self.max_requests} per batch")
        data = b"".join(self._line(line) for line in lines)
        if len(data) > self.max_bytes:
            raise ValueError(f"{len(data)} bytes: OpenAI's Batch API takes at most {self.max_bytes} per input file")
        started = time.time()
        file_id = self._upload(data, f"{label}.jsonl")
        payload = {"input_file_id": file_id, "endpoint": ENDPOINT, "completion_window": COMPLETION_WINDOW,
                   "metadata": {LABEL_KEY: label}}
        try:
            batch = self._http.create("/batches", payload, lambda: self._find(label, started - _CLOCK_SKEW_S))
        except BatchApiError:
            # Refused, or retries ran out: the last attempt may have created it (its answer lost), so one last look.
            batch = self._find(label, started - _CLOCK_SKEW_S)
            if batch is None:
                self._delete_file(file_id)
                raise
        batch_id = batch.get("id") if isinstance(batch, Mapping) else None
        if not isinstance(batch_id, str) or not batch_id:
            raise BatchApiError(f"POST {self._http.base_url}/batches answered without a batch id")
        return batch_id

    def _upload(self, data: bytes, filename: str) -> str:
        boundary = f"sctc-{secrets.token_hex(16)}"
        while boundary.encode() in data:  # never, in practice: 128 random bits
            boundary = f"sctc-{secrets.token_hex(16)}"
        body = b"".join([
            f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'.encode(),
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
            f"Content-Type: application/jsonl\r\n\r\n".encode(),
            data, f"\r\n--{boundary}--\r\n".encode()])
        # A repeated upload (after a lost answer) costs nothing: only a batch is paid for.
        response = self._http.request("POST", "/files", body,
                                      {"Content-Type": f"multipart/form-data; boundary={boundary}"})
        try:
            file_id = json.loads(response.body).get("id")
        except (ValueError, UnicodeDecodeError, AttributeError):
            file_id = None
        if not isinstance(file_id, str) or not file_id:
            raise BatchApiError(f"POST {self._http.base_url}/files answered without a file id")
        return file_id

    def _delete_file(self, file_id: str) -> None:
        try:
            self._http.request("DELETE", f"/files/{file_id}")
        except Exception:  # noqa: BLE001 - best-effort: a kept file costs storage, never an answer
            self.files_kept += 1

    # --- finding, polling, cancelling ----------------------------------------------------------------------------

    def find(self, label: str, *, created_after: float = 0.0, size: int = 0) -> str | None:
        batch = self._find(label, created_after - _CLOCK_SKEW_S)
        return batch["id"] if batch is not None else None

    def _find(self, label: str, not_before: float) -> dict[str, Any] | None:
        """The newest batch whose metadata carries `label`, paging back (newest first) until batches created before
        `not_before`."""
        after: str | None = None
        while True:
            page = self._http.json("GET", "/batches?limit=100" + (f"&after={after}" if after else ""))
            batches = [batch for batch in (page.get("data") if isinstance(page, Mapping) else None) or []
                       if isinstance(batch, Mapping) and isinstance(batch.get("id"), str)]
            for batch in batches:
                metadata = batch.get("metadata")
                if isinstance(metadata, Mapping) and metadata.get(LABEL_KEY) == label:
                    return dict(batch)
            older = [batch for batch in batches if isinstance(batch.get("created_at"), (int, float))
                     and batch["created_at"] < not_before]
            if not batches or older or not page.get("has_more"):
                return None
            after = batches[-1]["id"]

    def _batch(self, provider_id: str) -> dict[str, Any]:
        batch = self._http.json("GET", f"/batches/{provider_id}")
        if not isinstance(batch, Mapping) or not isinstance(batch.get("status"), str):
            raise BatchApiError(f"GET {self._http.base_url}/batches/{provider_id} answered without a status")
        return dict(batch)

    def status(self, provider_id: str) -> BatchStatus:
        batch = self._batch(provider_id)
        state = batch["status"]
        counts = batch.get("request_counts")
        counts = {name: int(value) for name, value in counts.items() if isinstance(value, int)} \
            if isinstance(counts, Mapping) else {}
        return BatchStatus(state=state, ended=state in ENDED_STATES, counts=counts,
                           message=redact(_failure_message(batch), self._api_key) if state == "failed" else None)

    def cancel(self, provider_id: str) -> None:
        self._http.json("POST", f"/batches/{provider_id}/cancel")

    # --- results -------------------------------------------------------------------------------------------------

    def results(self, provider_id: str) -> Iterator[LineResult]:
        batch = self._batch(provider_id)
        if batch["status"] not in ENDED_STATES:
            raise BatchApiError(f"batch {provider_id} is {batch['status']}: its results are not ready")
        for name in ("output_file_id", "error_file_id"):
            file_id = batch.get(name)
            if isinstance(file_id, str) and file_id:
                for raw in self._http.lines(f"/files/{file_id}/content"):
                    line = self._read_line(raw)
                    if line is None:
                        self.skipped_lines += 1
                    else:
                        yield line
        input_file = batch.get("input_file_id")
        if isinstance(input_file, str) and input_file:
            self._delete_file(input_file)

    def _read_line(self, raw: bytes) -> LineResult | None:
        try:
            record = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            return None
        if not isinstance(record, Mapping) or not isinstance(record.get("custom_id"), str):
            return None
        custom_id = record["custom_id"]
        response = record.get("response")
        if not isinstance(response, Mapping) or not isinstance(response.get("status_code"), int):
            error = record.get("error") if isinstance(record.get("error"), Mapping) else {}
            code = error.get("code")
            why = _RETRIED_CODES.get(str(code)) or \
                f"{code or 'error'}: {redact(_text(error.get('message')), self._api_key)}"
            return LineResult(custom_id, retry=why)
        status, body = response["status_code"], response.get("body")
        if 200 <= status < 300:
            if not self._backend._is_answer(body):
                return LineResult(custom_id, retry=f"HTTP {status}: the line's body is not a chat completion")
            return LineResult(custom_id, result=self._backend._answer_result(body, None))  # type: ignore[arg-type]
        error = error_body(HttpResponse(status, {}, json.dumps(body, ensure_ascii=False).encode("utf-8")),
                           self._api_key)
        if status in _RETRIED_STATUS or status >= 500:
            return LineResult(custom_id, retry=f"HTTP {status}: {error.message}")
        outcome = self._backend._error_result(status, error)
        if isinstance(outcome, ParameterRefused):
            if self._backend._adapt_to(outcome):
                self.adapted_lines += 1
                return LineResult(custom_id, retry=f"HTTP 400: {outcome.message} (adapted: the next request "
                                                   "is sent without it)")
            outcome = GenerationResult(text=None, outcome="error", message=f"HTTP 400: {outcome.message}")
        return LineResult(custom_id, result=outcome)


def _failure_message(batch: Mapping[str, Any]) -> str:
    """Why a batch failed validation, from its `errors.data` (line number, code and message of each)."""
    errors = batch.get("errors")
    data = errors.get("data") if isinstance(errors, Mapping) else None
    parts = []
    for error in data if isinstance(data, list) else []:
        if isinstance(error, Mapping):
            where = f"line {error['line']}: " if isinstance(error.get("line"), int) else ""
            parts.append(f"{where}{error.get('code') or 'error'}: {_text(error.get('message'))}")
    return "; ".join(parts[:5]) + (f" (+{len(parts) - 5} more)" if len(parts) > 5 else "") or "validation failed"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
