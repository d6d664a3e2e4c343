"""What the batch clients (`batch_openai.py`, `batch_anthropic.py`, `batch_gemini.py`) share with each other and
with the synchronous backend they stand in for.

- `batch_http(backend)`: a `BatchHttp` with the backend's base URL, authentication headers (the key read from the
  environment at that moment, as the synchronous path reads it), extra headers, timeout and retry settings.
- `create_once(...)`: a batch creation that is never sent twice for one outcome (`BatchHttp.create`: a creation
  answered with a 500, or whose answer was lost, may well have created the batch, so the client's `find` is asked
  before each such retry, and when it finds the batch its id is returned instead of creating another).
- `answer_of(backend, custom_id, payload)`: a line's answer read exactly as the synchronous backend reads a 200 body
  (`_is_answer`, `_answer_result`: refusals, truncation, usage), or a retry when the body has another shape.
- `json_line(raw)`: one JSONL line parsed, or None for a line that does not parse (a file cut mid-line).
- `ProviderBatchClient`: what both clients are made of besides their API: the backend, its `BatchHttp`, closing,
  the retry count and the bytes a line takes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
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


@dataclass(frozen=True)
class _Found:
    provider_id: str


def create_once(http: BatchHttp, path: str, payload: Any, *, read_id: Callable[[Any], str],
                find: Callable[[], str | None]) -> str:
    """POST `payload` to `path` through `BatchHttp.create`, which asks `find()` before retrying a failure whose
    outcome is unknown: the found batch's id when the failed attempt created it after all, else `read_id(answer)`."""

    def found() -> _Found | None:
        provider_id = find()
        return None if provider_id is None else _Found(provider_id)

    answer = http.create(path, payload, found)
    return answer.provider_id if isinstance(answer, _Found) else read_id(answer)


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
