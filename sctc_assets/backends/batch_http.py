"""Synchronous HTTP for the provider batch clients (`batch_openai.py`, `batch_anthropic.py`, `batch_gemini.py`).

A batch client makes a few calls per batch (upload, create, poll, download, cancel), from the batch driver's thread,
so it needs no concurrency: `BatchHttp` runs the project's HTTP client (`http_client.py`) on an event loop of its
own in a daemon thread and blocks on each call, which works the same from a Dagster step, `sctc run`, a sensor or a
notebook whose own loop is running. Every call follows the retry policy of the synchronous backends
(`api_backend.py`): 408, 409, 429, 529 and every 5xx, timeouts, dropped connections and cut bodies are retried with
the server's `retry-after-ms`/`Retry-After` (else exponential backoff with jitter) up to `max_retries` times; 401,
403 and 404 raise `BackendUnavailable` (the key, the permission or the endpoint is wrong); any other status, or
retries run out, raises `BatchApiError` with the API's own message, redacted of the key. Downloads (`lines`) are
streamed: a results file of 100,000 answers is never held whole.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from typing import Any, AsyncIterator, Callable, Iterator, Mapping

from sctc_assets.backends.api_backend import error_body, redact, server_delay
from sctc_assets.backends.base import BackendUnavailable
from sctc_assets.backends.http_client import HttpClient, HttpResponse, TransportError
from sctc_assets.lib.batches import BatchApiError
from sctc_assets.lib.interrupt import stop_reason

_RETRYABLE_STATUS = frozenset({408, 409, 429, 529})
_FATAL_STATUS = frozenset({401, 403, 404})


class Retryable(Exception):
    """A failed attempt worth another (raised inside a `BatchHttp` call, retried by `_with_retries`)."""

    def __init__(self, description: str, delay_s: float | None = None, status: int | None = None):
        super().__init__(description)
        self.description, self.delay_s, self.status = description, delay_s, status


class BatchHttp:
    """Blocking JSON calls and streamed downloads against one API root, with retries (see the module docstring).

    `headers` are sent with every call (authentication, API version); `api_key` is only used to redact error text.
    `on_retry(description)` is told of every retried failure (the driver counts them).
    """

    def __init__(self, base_url: str, *, headers: Mapping[str, str], api_key: str = "", timeout_s: float = 120.0,
                 max_retries: int = 5, backoff_initial_s: float = 1.0, backoff_max_s: float = 60.0,
                 on_retry: Callable[[str], None] | None = None):
        self.base_url = base_url.rstrip("/")
        self._headers = dict(headers)
        self._api_key = api_key
        self._timeout_s = timeout_s
        self.max_retries, self.backoff_initial_s, self.backoff_max_s = max_retries, backoff_initial_s, backoff_max_s
        self.on_retry = on_retry
        self.retries = 0  # failed attempts retried, over this object's life
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="sctc-batch-http", daemon=True)
        self._thread.start()
        self._client = HttpClient(self.base_url, timeout_s=timeout_s)

    def __enter__(self) -> "BatchHttp":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self._call(self._client.aclose())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
            self._loop.close()

    def _call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    # --- calls ---------------------------------------------------------------------------------------------------

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: Mapping[str, str] | None = None) -> HttpResponse:
        """One call with retries: the 2xx response, else `BackendUnavailable`/`BatchApiError`."""
        sent = {**self._headers, "Accept": "application/json", **(headers or {})}
        return self._with_retries(lambda: self._attempt(method, path, body or b"", sent))

    def json(self, method: str, path: str, payload: Any = None) -> Any:
        """A JSON call: `payload` sent as the body (when given), the answer parsed. A 2xx answer that is not JSON (an
        HTML page from a proxy, a body cut short) is retried like a 5xx."""
        body = None if payload is None else json.dumps(payload, ensure_ascii=False).encode("utf-8")
        headers = {"Content-Type": "application/json"} if body is not None else {}
        return self._with_retries(lambda: self._parsed(method, path, self.request(method, path, body, headers)))

    def create(self, path: str, payload: Any, find: Callable[[], Any]) -> Any:
        """POST `payload` (JSON) to `path` to create something that must never exist twice (a batch), the answer
        parsed. A failure whose outcome is unknown (a timeout, a dropped connection, a 5xx, a garbled answer: the
        server may have created it before failing) is followed by `find()` before the next attempt: when it returns
        something other than None (the created object, found by its label), that is returned and nothing is created
        again. A 429/529 refused the call before any work, so it is retried without asking."""
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        headers = {**self._headers, "Accept": "application/json", "Content-Type": "application/json"}
        unknown = False

        def attempt() -> Any:
            nonlocal unknown
            if unknown:
                found = find()
                if found is not None:
                    return found
            unknown = True  # until this attempt's answer says otherwise
            try:
                response = self._attempt("POST", path, body, headers)
            except Retryable as failure:
                unknown = failure.status not in (429, 529)
                raise
            return self._parsed("POST", path, response)

        return self._with_retries(attempt)

    def _attempt(self, method: str, path: str, body: bytes, headers: Mapping[str, str]) -> HttpResponse:
        """One call, without retries: the 2xx response, else `Retryable`/`BackendUnavailable`/`BatchApiError`."""
        try:
            response = self._call(self._client.request(method, path, body, headers))
        except TimeoutError:
            raise Retryable(f"{method} {path}: timed out after {self._timeout_s:g}s") from None
        except TransportError as error:
            raise Retryable(f"{method} {path}: connection error: {redact(str(error), self._api_key)}") from None
        self._check(method, path, response)
        return response

    def _parsed(self, method: str, path: str, response: HttpResponse) -> Any:
        try:
            return json.loads(response.body)
        except (ValueError, UnicodeDecodeError):
            shown = redact(response.body[:120].decode("utf-8", "replace"), self._api_key)
            raise Retryable(f"{method} {path}: answered with something other than JSON: {shown!r}") from None

    def lines(self, path: str, headers: Mapping[str, str] | None = None) -> Iterator[bytes]:
        """The lines of a download (JSONL), streamed: each line without its newline, blank lines skipped. A final
        line without a newline is yielded as it is (the caller decides whether it parses: a file cut mid-line).
        Opening the download is retried; a connection lost midway ends the iteration with `BatchApiError` (the lines
        already yielded stand; the caller retries what it did not get)."""
        sent = {**self._headers, **(headers or {})}

        def attempt() -> tuple[HttpResponse, AsyncIterator[bytes]]:
            try:
                head, chunks = self._call(self._client.stream("GET", path, sent))
            except TimeoutError:
                raise Retryable(f"GET {path}: timed out after {self._timeout_s:g}s") from None
            except TransportError as error:
                raise Retryable(f"GET {path}: connection error: {redact(str(error), self._api_key)}") from None
            if not 200 <= head.status < 300:
                rest = b"".join(self._drain(chunks))
                self._check("GET", path, HttpResponse(head.status, head.headers, rest))
            return head, chunks

        _, chunks = self._with_retries(attempt)
        pending = b""
        try:
            for chunk in self._drain(chunks):
                pending += chunk
                *complete, pending = pending.split(b"\n")
                for line in complete:
                    if line.strip():
                        yield line
        except (TimeoutError, TransportError) as error:
            raise BatchApiError(f"GET {path}: the download broke off: {redact(str(error), self._api_key)}") from None
        if pending.strip():
            yield pending

    def _drain(self, chunks: AsyncIterator[bytes]) -> Iterator[bytes]:
        try:
            while True:
                try:
                    yield self._call(chunks.__anext__())
                except StopAsyncIteration:
                    return
        finally:
            self._call(chunks.aclose())

    # --- policy --------------------------------------------------------------------------------------------------

    def _check(self, method: str, path: str, response: HttpResponse) -> None:
        status = response.status
        if 200 <= status < 300:
            return
        error = error_body(response, self._api_key)
        where = f"{method} {self.base_url}{path}"
        if status in _FATAL_STATUS:
            if status == 401:  # a 401 body quotes (part of) the rejected key: left out entirely
                raise BackendUnavailable(f"HTTP 401 from {where}: the API key was rejected")
            raise BackendUnavailable(f"HTTP {status} from {where}: {error.message}")
        if status in _RETRYABLE_STATUS or status >= 500:
            delay = server_delay(response.headers)
            raise Retryable(f"HTTP {status} from {where}: {error.message}",
                            delay if delay is not None else error.retry_delay_s, status)
        raise BatchApiError(f"HTTP {status} from {where}: {error.message}")

    def _with_retries(self, attempt: Callable[[], Any]) -> Any:
        tries = 0
        while True:
            try:
                return attempt()
            except Retryable as failure:
                if tries >= self.max_retries:
                    raise BatchApiError(f"{failure.description} (after {tries + 1} attempts)") from None
                stopping = stop_reason()
                if stopping is not None:
                    raise BatchApiError(f"{failure.description} (not retried: {stopping})") from None
                self.retries += 1
                if self.on_retry is not None:
                    self.on_retry(failure.description)
                time.sleep(self._delay(tries, failure.delay_s))
                tries += 1

    def _delay(self, attempt: int, server_delay_s: float | None) -> float:
        if server_delay_s is not None:
            return min(self.backoff_max_s, server_delay_s)
        delay = min(self.backoff_max_s, self.backoff_initial_s * 2**attempt)
        return delay + random.uniform(0.0, 0.1 * delay)
