"""What the Anthropic and Gemini batch clients (`batch_anthropic.py`, `batch_gemini.py`) share with each other and
with the synchronous backend they stand in for.

- `batch_http(backend)`: a `BatchHttp` with the backend's base URL, authentication headers (the key read from the
  environment at that moment, as the synchronous path reads it), extra headers, timeout and retry settings.
- `create_once(...)`: a batch creation that is never sent twice for one outcome. `BatchHttp` retries a 5xx or a
  timeout by itself, but a creation answered with a 500 (or whose answer was lost) may well have created the batch;
  so before each retry the client's `find` is asked whether the batch exists, and when it does its id is returned
  instead of creating another (the batch would be paid twice).
- `answer_of(backend, custom_id, payload)`: a line's answer read exactly as the synchronous backend reads a 200 body
  (`_is_answer`, `_answer_result`: refusals, truncation, usage), or a retry when the body has another shape.
- `json_line(raw)`: one JSONL line parsed, or None for a line that does not parse (a file cut mid-line).
- `ProviderBatchClient`: what both clients are made of besides their API: the backend, its `BatchHttp`, closing,
  the retry count and the bytes a line takes.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping

from sctc_assets.backends.api_backend import ApiBackend
from sctc_assets.backends.batch_http import BatchHttp
from sctc_assets.lib.batches import BatchLine, LineResult

# A provider's clock and ours may differ: a batch counts as "created after" a moment when its own creation time is
# no earlier than this many seconds before that moment.
CLOCK_SKEW_S = 300.0


def batch_http(backend: ApiBackend, on_retry: Callable[[str], None] | None = None) -> BatchHttp:
    api_key = backend._read_api_key()
    headers = {**backend._auth_headers(api_key), **(backend.headers or {})}
    return BatchHttp(backend.base_url, headers=headers, api_key=api_key, timeout_s=backend.timeout_s,
                     max_retries=backend.max_retries, backoff_initial_s=backend.backoff_initial_s,
                     backoff_max_s=backend.backoff_max_s, on_retry=on_retry)


class _AlreadyCreated(Exception):
    def __init__(self, provider_id: str):
        super().__init__(provider_id)
        self.provider_id = provider_id


def create_once(http: BatchHttp, path: str, payload: Any, *, read_id: Callable[[Any], str],
                find: Callable[[], str | None]) -> str:
    """POST `payload` to `path` with `http`'s retries, asking `find()` before every retry whether the failed attempt
    created the batch after all: its id when it did (`read_id(answer)` when the creation was answered)."""
    outer = http.on_retry

    def before_retry(description: str) -> None:
        if outer is not None:
            outer(description)
        http.on_retry = outer  # find's own retries are reported as any other
        try:
            found = find()
        finally:
            http.on_retry = before_retry
        if found is not None:
            raise _AlreadyCreated(found)

    http.on_retry = before_retry
    try:
        return read_id(http.json("POST", path, payload))
    except _AlreadyCreated as created:
        return created.provider_id
    finally:
        http.on_retry = outer


def answer_of(backend: ApiBackend, custom_id: str, payload: Any) -> LineResult:
    """A batch line's answer as the synchronous backend reads it (no latency: the batch gives none)."""
    if not backend._is_answer(payload):
        return LineResult(custom_id, retry=f"the batch answered with something other than {backend.answer_kind}")
    return LineResult(custom_id, result=backend._answer_result(payload, None))  # type: ignore[arg-type]


def json_line(raw: bytes) -> Mapping[str, Any] | None:
    try:
        line = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    return line if isinstance(line, Mapping) else None


def mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def count(value: Any) -> int:
    """A count the API sends as a number or (Google's int64) a string; 0 when absent or malformed."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        return 0
    return max(0, number)


class ProviderBatchClient:
    """The part of a `BatchClient` that is not its API's: a subclass sets `provider`, `max_requests`, `max_bytes`,
    `_line` (one request as the creation body lists it) and the protocol's calls."""

    provider = ""
    max_requests = 0
    max_bytes = 0

    def __init__(self, backend: ApiBackend, http: BatchHttp | None = None):
        self._backend = backend
        self._http = http if http is not None else batch_http(backend)
        self._api_key = backend._read_api_key()

    def __enter__(self) -> "ProviderBatchClient":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    @property
    def retries(self) -> int:
        """Failed calls retried so far (429, 5xx, timeouts)."""
        return self._http.retries

    def line_bytes(self, line: BatchLine) -> int:
        return len(json.dumps(self._line(line), ensure_ascii=False).encode("utf-8")) + 1  # the comma between lines

    def _line(self, line: BatchLine) -> dict[str, Any]:
        raise NotImplementedError
