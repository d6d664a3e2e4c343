"""Anthropic's Message Batches API as a `BatchClient` (`lib/batches.py`), for `AnthropicBackend.batch_client()`.

- Create: `POST /v1/messages/batches` with `{"requests": [{"custom_id", "params"}]}`, `params` being the very body the
  synchronous backend sends to `/v1/messages` (`AnthropicBackend._request_body`); at most 100,000 requests and
  256 MB a batch. The answer is a `message_batch` whose `id` is the provider id.
- Poll: `GET /v1/messages/batches/{id}`: `processing_status` `in_progress` → (`canceling`) → `ended`, and
  `request_counts` (`processing`, `succeeded`, `errored`, `canceled`, `expired`).
- Results: once ended, the JSONL at the batch's `results_url`, streamed: one `{"custom_id", "result"}` a line, in
  any order. `succeeded` carries a `message`, read as the synchronous backend reads one (`stop_reason: refusal` is
  a refusal, usage and thinking kept); `errored` carries an error response: an `invalid_request_error` (the request
  itself is wrong: asking again cannot help) is a final error result, anything else (`api_error`,
  `overloaded_error`, `rate_limit_error` …) a line to retry, as are `canceled` and `expired`. A last line cut short
  does not parse and is skipped: the driver retries the lines it never saw. The results URL is only followed on the
  API's own origin (the key is never sent elsewhere); on another, the documented path is used.
- Cancel: `POST /v1/messages/batches/{id}/cancel`.
- Find: the API keeps no label or metadata on a batch, so `find` lists the batches (`GET /v1/messages/batches`,
  newest first, paged with `after_id`) for the single one created after the given moment (less a margin for clock
  skew) with as many requests as were sent; none, or more than one (then it cannot tell which, and says so in the
  log), gives None. A creation whose answer was lost is resolved the same way before it is retried
  (`batch_common.create_once`), and an ambiguous answer there stops the submission rather than risk a second batch.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Any, Iterator, Mapping, Sequence
from urllib.parse import quote, urlsplit

from sctc_assets.backends.api_backend import ApiBackend, redact
from sctc_assets.backends.batch_common import (CLOCK_SKEW_S, ProviderBatchClient, answer_of, count, create_once,
                                               json_line, mapping)
from sctc_assets.backends.batch_http import BatchHttp
from sctc_assets.lib.batches import BatchApiError, BatchLine, BatchStatus, LineResult
from sctc_assets.lib.generation import GenerationResult

log = logging.getLogger(__name__)

BATCHES_PATH = "/v1/messages/batches"
# An errored line of these types is the request's own fault: the same request fails again, so it is a final error.
FINAL_ERROR_TYPES = frozenset({"invalid_request_error", "request_too_large"})
_LIST_PAGE = 100
_MAX_LIST_PAGES = 50


class AnthropicBatchClient(ProviderBatchClient):
    """Message Batches for one `AnthropicBackend` (its requests, its answers, its key); see the module docstring."""

    provider = "anthropic"
    max_requests = 100_000
    # 256 MB a creation request, less the envelope around the lines.
    max_bytes = 256_000_000 - 1024

    def __init__(self, backend: ApiBackend, http: BatchHttp | None = None):
        super().__init__(backend, http)
        self._results_urls: dict[str, str] = {}

    # --- the BatchClient protocol ----------------------------------------------------------------------------------

    def submit(self, lines: Sequence[BatchLine], label: str) -> str:
        """Create one batch of `lines` (`label` is not sent: the API keeps none)."""
        if not lines:
            raise ValueError("a batch needs at least one line")
        started = time.time()
        payload = {"requests": [self._line(line) for line in lines]}

        def find_created() -> str | None:
            found, candidates = self._created(started, len(lines))
            if candidates > 1:
                raise BatchApiError(
                    f"creating an Anthropic batch of {len(lines)} requests failed without an answer, and "
                    f"{candidates} batches of that size were created since: cannot tell whether it was; not created "
                    f"again (the driver resolves it later)")
            return found

        return create_once(self._http, BATCHES_PATH, payload, read_id=self._batch_id, find=find_created)

    def find(self, label: str, *, created_after: float, size: int) -> str | None:
        found, candidates = self._created(created_after, size)
        if candidates > 1:
            log.warning("%d Anthropic batches of %d requests were created after %s: cannot tell which one is %s",
                        candidates, size, _iso(created_after), label)
        return found

    def status(self, provider_id: str) -> BatchStatus:
        batch = self._http.json("GET", self._batch_path(provider_id))
        if not isinstance(batch, Mapping) or not isinstance(batch.get("processing_status"), str):
            raise BatchApiError(f"GET {self._batch_path(provider_id)}: the answer is not a message batch")
        if isinstance(batch.get("results_url"), str):
            self._results_urls[provider_id] = batch["results_url"]
        counts = {name: count(value) for name, value in mapping(batch.get("request_counts")).items()}
        counts["total"] = sum(counts.values())
        state = batch["processing_status"]
        return BatchStatus(state=state, ended=state == "ended", counts=counts)

    def results(self, provider_id: str) -> Iterator[LineResult]:
        if provider_id not in self._results_urls:
            self.status(provider_id)
        for raw in self._http.lines(self._results_path(provider_id)):
            line = json_line(raw)
            if line is None or not isinstance(line.get("custom_id"), str):
                continue  # a line cut short (the file's end) or garbled: never seen, so retried by the driver
            yield self._line_result(line["custom_id"], mapping(line.get("result")))

    def cancel(self, provider_id: str) -> None:
        self._http.json("POST", f"{self._batch_path(provider_id)}/cancel")

    # --- helpers ---------------------------------------------------------------------------------------------------

    def _line(self, line: BatchLine) -> dict[str, Any]:
        return {"custom_id": line.custom_id, "params": self._backend._request_body(line.request)}

    def _line_result(self, custom_id: str, result: Mapping[str, Any]) -> LineResult:
        kind = result.get("type")
        if kind == "succeeded":
            return answer_of(self._backend, custom_id, result.get("message"))
        if kind == "errored":
            error = mapping(result.get("error"))
            if isinstance(error.get("error"), Mapping):  # the error response: {"type": "error", "error": {...}}
                error = error["error"]
            error_type = error.get("type") if isinstance(error.get("type"), str) else "error"
            message = redact(str(error.get("message") or "(no message)"), self._api_key)[:300]
            if error_type in FINAL_ERROR_TYPES:
                return LineResult(custom_id, result=GenerationResult(
                    text=None, outcome="error", message=f"batch line errored: {error_type}: {message}"))
            return LineResult(custom_id, retry=f"errored: {error_type}: {message}")
        if kind in ("canceled", "expired"):
            return LineResult(custom_id, retry=kind)
        return LineResult(custom_id, retry=f"unknown result type {kind!r}")

    @staticmethod
    def _batch_id(answer: Any) -> str:
        if not isinstance(answer, Mapping) or not isinstance(answer.get("id"), str) or not answer["id"]:
            raise BatchApiError(f"POST {BATCHES_PATH}: the answer has no batch id")
        return answer["id"]

    @staticmethod
    def _batch_path(provider_id: str) -> str:
        return f"{BATCHES_PATH}/{quote(provider_id, safe='')}"

    def _results_path(self, provider_id: str) -> str:
        """The results URL as a path under the base URL when it is on the API's own origin and below its root, else
        the documented path: the key goes nowhere else."""
        url = self._results_urls.get(provider_id) or ""
        base = self._http.base_url
        if url.startswith(base + "/") and urlsplit(url).netloc == urlsplit(base).netloc:
            return url[len(base):]
        return f"{self._batch_path(provider_id)}/results"

    def _created(self, created_after: float, size: int) -> tuple[str | None, int]:
        """(the id when exactly one batch of `size` requests was created after `created_after`, how many were)."""
        since = created_after - CLOCK_SKEW_S
        matches: list[str] = []
        after_id: str | None = None
        for _ in range(_MAX_LIST_PAGES):
            query = f"?limit={_LIST_PAGE}" + (f"&after_id={quote(after_id, safe='')}" if after_id else "")
            page = mapping(self._http.json("GET", BATCHES_PATH + query))
            batches = [batch for batch in page.get("data") or [] if isinstance(batch, Mapping)]
            older = False
            for batch in batches:
                created = _timestamp(batch.get("created_at"))
                if created is not None and created < since:
                    older = True  # newest first: the rest are older still
                    break
                counts = mapping(batch.get("request_counts"))
                if sum(count(value) for value in counts.values()) == size and isinstance(batch.get("id"), str):
                    matches.append(batch["id"])
            if older or not page.get("has_more") or not batches or not isinstance(page.get("last_id"), str):
                break
            after_id = page["last_id"]
        return (matches[0] if len(matches) == 1 else None), len(matches)


def _timestamp(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment).isoformat(timespec="seconds")
