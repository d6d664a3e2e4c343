"""What every backend of a provider's HTTP API shares: settings, the worker loop, retries, errors and the API key.

The `openai`, `anthropic` and `gemini` backends differ in the request they send and in how they read an answer; the
rest is here, once: requests go through the small h11 client (`http_client.py`, not the providers' SDKs, which cost
several times the CPU per request: `bench/openai_concurrency.py` and `bench/provider_clients.py` measure both), at
most `concurrency` at a time, each worker holding its slot through backoff waits. Retries follow one policy (429,
408, 409, 529 and every 5xx, timeouts, dropped connections and cut JSON bodies; honour `retry-after-ms` /
`Retry-After`, else exponential backoff with jitter), and what survives them becomes an `error` result, not an
exception. 401/403/404 stop the model: every other request would fail alike. The API key is read from the
environment at call time and handed only to the HTTP client: it never becomes a field, part of `identity()`, a
result message or a cache row, and error text is redacted before it is kept.

A subclass sets `backend_name`, the `base_url` and `api_key_env` defaults, and implements `_request_path`,
`_auth_headers`, `_request_body`, `_is_answer` and `_answer_result`; it may refine `_error_result` (its refusal
errors) and `_identity_params`.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import math
import os
import random
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ClassVar, Coroutine, Mapping, Optional, TypeVar
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from sctc_assets.backends.base import BackendUnavailable, ModelBackend, ResultCallback
from sctc_assets.backends.http_client import HttpClient, HttpResponse, TransportError
from sctc_assets.lib.generation import GenerationRequest, GenerationResult
from sctc_assets.lib.interrupt import stop_reason
from sctc_assets.lib.work_queue import WAIT, WorkQueue

# Key for servers that ignore authentication (vLLM, llama.cpp) yet still need the header to be present.
LOCAL_SERVER_KEY = "EMPTY"

# 529: Anthropic's "overloaded". Every 5xx is retried as well.
_RETRYABLE_STATUS = frozenset({408, 409, 429, 529})
# 401/403/404 mean the key, the permission or the model/endpoint is wrong: every other request would fail alike.
_FATAL_STATUS = frozenset({401, 403, 404})
_MAX_MESSAGE_CHARS = 300
# Transport errors quote the Authorization header they refused (h11: "Illegal header value b'Bearer sk-…\\r'").
_BEARER = re.compile(r"Bearer\s+\S+")
_CREDENTIAL_HEADER = re.compile(r"authorization|cookie|api[-_]?key|token|secret|password", re.IGNORECASE)
# Gemini's 429 carries its wait in the body: {"@type": "…RetryInfo", "retryDelay": "30s"}.
_RETRY_DELAY = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")

T = TypeVar("T")


@dataclass(frozen=True)
class TransientFailure:
    """A failed attempt that a later one may get past: 429, 529, 5xx, timeout, dropped connection, cut body."""

    description: str
    server_delay_s: float | None = None


@dataclass(frozen=True)
class ParameterRefused:
    """A 400 naming a request parameter the model does not take (OpenAI's `unsupported_parameter`/
    `unsupported_value`): the request is retried once adapted when the backend knows how (`_adapt_to`)."""

    param: str
    code: str
    message: str


@dataclass(frozen=True)
class ErrorBody:
    """What an error answer says: its code (OpenAI `code`, Anthropic `error.type`, Gemini `status`), its message
    (redacted and shortened), the parameter at fault (OpenAI `param`) and, when the body names one, how long to wait
    (Gemini's `RetryInfo`)."""

    code: Any
    message: str
    retry_delay_s: float | None = None
    param: Any = None


class ApiBackend(ModelBackend):
    """A model behind a provider's HTTP API, with bounded concurrency and retries (see the module's docstring)."""

    backend_name: ClassVar[str] = "api"
    # What `_fatal_message` and the key check call the answer this API gives, e.g. "a chat completion".
    answer_kind: ClassVar[str] = "an answer"

    model: str = Field(description="Model name as the endpoint knows it.")
    base_url: str = Field(description="Endpoint root (an http or https URL).")
    api_key_env: str = Field(
        default="",
        description="Name of the environment variable holding the API key; empty for servers without authentication.",
    )
    temperature: float = 0.0
    max_tokens: Optional[int] = Field(default=512, ge=1)
    top_p: Optional[float] = None
    system_prompt: Optional[str] = Field(
        default=None, description="System prompt for requests that carry none, where the API wants it."
    )
    concurrency: int = Field(default=8, ge=1, description="Requests in flight at once.")
    max_retries: int = Field(default=5, ge=0,
                             description="Retries after 429, 529, 5xx, timeouts and connection errors.")
    backoff_initial_s: float = Field(default=1.0, ge=0.0)
    backoff_max_s: float = Field(
        default=60.0, ge=0.0, description="Cap on any wait between retries, including a server-sent Retry-After."
    )
    timeout_s: float = Field(default=120.0, gt=0.0)
    price_input_per_mtok: Optional[float] = Field(default=None, description="USD per million input tokens.")
    price_output_per_mtok: Optional[float] = Field(default=None, description="USD per million output tokens.")
    extra_body: Optional[dict] = Field(
        default=None, description="Extra JSON fields sent with every request, merged into the body (objects key by "
                                  "key).",
    )
    # Not part of identity(): attribution headers do not change an answer, and cached answers stay valid.
    headers: Optional[dict[str, str]] = Field(
        default=None,
        description="Extra HTTP headers sent with every request, e.g. OpenRouter's HTTP-Referer and X-Title. Not "
                    "for credentials: the key comes from `api_key_env` only.",
    )

    # Provider batches (issue #40; `lib/batch_driver.py`): none of these is part of identity(), since a batch's
    # answer to a request and a synchronous one are the same cache entry.
    batch: bool = Field(default=False, description="Send this model's uncached requests as provider batches (half "
                                                   "price, answers within 24 h); needs a backend with a batch API.")
    batch_poll_seconds: float = Field(default=60.0, ge=1.0, description="Seconds between polls of open batches.")
    batch_price_factor: float = Field(default=0.5, gt=0.0, le=1.0,
                                      description="Batch price over the synchronous price (0.5: half).")
    batch_retry_sync_max: int = Field(default=20, ge=0,
                                      description="Failed, expired or cancelled lines of a batch at or below this "
                                                  "count are retried as ordinary calls; more in a new batch.")
    batch_max_rounds: int = Field(default=3, ge=1,
                                  description="Batches a line may go through before it becomes an error row.")

    @field_validator("batch")
    @classmethod
    def _batch_needs_a_batch_api(cls, batch: bool) -> bool:
        if batch and cls.batch_api is None:
            raise ValueError(f"`batch: true` but the {cls.backend_name} backend has no batch API (those of openai, "
                             "anthropic and gemini have one): remove `batch`")
        return batch

    @field_validator("base_url")
    @classmethod
    def _base_url_is_a_url(cls, base_url: str) -> str:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{base_url!r} is not an http(s) URL (e.g. https://host/v1)")
        return base_url

    @field_validator("headers")
    @classmethod
    def _no_credentials_in_headers(cls, headers: Optional[dict[str, str]]) -> Optional[dict[str, str]]:
        # A registry file is shared and logged; a header carrying a key would leak it, so such names are refused.
        for name, value in (headers or {}).items():
            if _CREDENTIAL_HEADER.search(name):
                raise ValueError(f"header {name!r} looks like a credential; API keys come from the environment "
                                 "variable named by api_key_env, never from the registry")
            if not (isinstance(value, str) and value.isascii() and value.isprintable()):
                raise ValueError(f"header {name!r}: its value must be printable ASCII text")
        return headers

    # --- what a subclass says about its API ----------------------------------------------------------------------

    def _request_path(self) -> str:
        """The path POSTed to, after `base_url`."""
        raise NotImplementedError

    def _auth_headers(self, api_key: str) -> dict[str, str]:
        """The headers carrying the key (and the API version)."""
        raise NotImplementedError

    def _request_body(self, request: GenerationRequest) -> dict[str, Any]:
        raise NotImplementedError

    def _is_answer(self, payload: Any) -> bool:
        """Whether a 200 body has the shape of an answer (else it is retried as a garbled one)."""
        raise NotImplementedError

    def _answer_result(self, payload: Mapping[str, Any], latency_s: float) -> GenerationResult:
        raise NotImplementedError

    def _identity_params(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "max_tokens": self.max_tokens, "top_p": self.top_p,
                "system_prompt": self.system_prompt, "extra_body": self.extra_body}

    def _error_result(self, status: int, error: ErrorBody) -> GenerationResult | ParameterRefused:
        """A final answer to a 4xx that is neither fatal nor retried: an error, unless the API calls it a refusal
        (or a parameter the backend can adapt its requests to)."""
        return GenerationResult(text=None, outcome="error", message=f"HTTP {status}: {error.message}")

    def _adapt_to(self, refused: ParameterRefused) -> bool:
        """Change this model's requests so that `refused.param` is no longer sent as it was; False (the default):
        nothing to change, the 400 is an error."""
        return False

    # --- shared --------------------------------------------------------------------------------------------------

    @classmethod
    def endpoint_lane(cls, settings: Mapping[str, Any]) -> str | None:
        """The entry's base URL (else the field's default), without a trailing slash: each model behind an API gets a
        lane of its own in `sctc run`, and the models behind one endpoint share its stage slots."""
        return str(settings.get("base_url") or cls.model_fields["base_url"].default).rstrip("/")

    def identity(self) -> dict[str, Any]:
        return {"backend": self.backend_name, "endpoint": self.base_url.rstrip("/"), "model": self.model,
                "params": self._identity_params()}

    def pricing(self) -> tuple[float | None, float | None]:
        return self.price_input_per_mtok, self.price_output_per_mtok

    def claim_chunk_size(self) -> int:
        return self.concurrency

    def _generate_from(self, queue: WorkQueue, on_result: ResultCallback) -> None:
        api_key = self._read_api_key()
        run_to_completion(self._generate_all(queue, on_result, api_key))

    def _read_api_key(self) -> str:
        if not self.api_key_env:
            return LOCAL_SERVER_KEY
        # A .env file saved with CRLF line ends leaves "\r" on the key, which the HTTP client rejects quoting the key.
        api_key = os.environ.get(self.api_key_env, "").strip()
        if not api_key:
            raise BackendUnavailable(
                f"environment variable {self.api_key_env} is not set: it must hold the API key for {self.base_url}"
                f" (set api_key_env to an empty string for a local server without authentication)"
            )
        if not (api_key.isascii() and api_key.isprintable()):
            raise BackendUnavailable(
                f"environment variable {self.api_key_env} does not hold a usable API key for {self.base_url}:"
                f" it contains control or non-ASCII characters (a line break or quote copied with it?)"
            )
        return api_key

    async def _generate_all(self, queue: WorkQueue, on_result: ResultCallback, api_key: str) -> None:
        headers = {**self._auth_headers(api_key), "Content-Type": "application/json", "Accept": "application/json",
                   **(self.headers or {})}
        async with HttpClient(self.base_url, timeout_s=self.timeout_s) as client:

            async def worker() -> None:
                # Each worker holds one slot, also through backoff waits, so a throttled endpoint sees fewer
                # requests, not more; it takes the next request only when its last one is answered.
                while True:
                    item = queue.take()
                    if item is None:
                        return
                    if item == WAIT:
                        await asyncio.sleep(queue.poll_s)
                        continue
                    index, request = item
                    on_result(index, await self._ask_with_retries(client, request, headers, api_key))

            workers = [asyncio.ensure_future(worker()) for _ in range(self.concurrency)]
            try:
                await asyncio.gather(*workers)
            finally:
                # When one request raises (a rejected key, a failing callback) the others are stopped here, before
                # the client they use is closed.
                for task in workers:
                    task.cancel()
                await asyncio.gather(*workers, return_exceptions=True)

    async def _ask_with_retries(self, client: HttpClient, request: GenerationRequest, headers: Mapping[str, str],
                                api_key: str) -> GenerationResult:
        body = json.dumps(self._request_body(request), ensure_ascii=False).encode("utf-8")
        attempt = 0
        adapted: set[str] = set()
        while True:
            outcome = await self._attempt(client, body, headers, api_key)
            if isinstance(outcome, ParameterRefused):
                # Retried once per refused parameter, adapted; refused again (or not adaptable): an error.
                if outcome.param in adapted or not self._adapt_to(outcome):
                    return GenerationResult(text=None, outcome="error", message=f"HTTP 400: {outcome.message}")
                adapted.add(outcome.param)
                body = json.dumps(self._request_body(request), ensure_ascii=False).encode("utf-8")
                continue
            if isinstance(outcome, GenerationResult):
                return outcome
            if attempt >= self.max_retries:
                message = f"{outcome.description} (after {attempt + 1} attempts)"
                return GenerationResult(text=None, outcome="error", message=message)
            stopping = stop_reason()
            if stopping is not None:  # Ctrl-C: no new attempt; the request stays unanswered for the next run
                message = f"{outcome.description} (not retried: {stopping})"
                return GenerationResult(text=None, outcome="error", message=message)
            await asyncio.sleep(self._retry_delay(attempt, outcome.server_delay_s))
            attempt += 1

    async def _attempt(self, client: HttpClient, body: bytes, headers: Mapping[str, str],
                       api_key: str) -> GenerationResult | TransientFailure | ParameterRefused:
        """One call: a final result, a failure worth retrying, or `BackendUnavailable` when nothing can succeed."""
        started = time.monotonic()
        try:
            response = await client.post(self._request_path(), body, headers)
        except TimeoutError:
            return TransientFailure(f"timed out after {self.timeout_s:g}s")
        except TransportError as error:
            return TransientFailure(f"connection error: {redact(str(error), api_key)}")
        if not 200 <= response.status < 300:
            return self._status_failure(response, api_key)
        try:
            payload = json.loads(response.body)
        except (ValueError, UnicodeDecodeError) as error:
            shown = redact(response.body[:120].decode("utf-8", "replace"), api_key)
            if response.body.lstrip()[:1] in (b"{", b"["):
                # A proxy or overloaded server cutting the body short: another attempt may get the whole answer.
                return TransientFailure(f"{self.base_url} answered with malformed JSON ({error}): {shown!r}")
            # An HTML error or login page from a proxy, with status 200.
            return TransientFailure(f"{self.base_url} answered with something other than {self.answer_kind}: "
                                    f"{shown!r}")
        if not self._is_answer(payload):
            shown = redact(json.dumps(payload, ensure_ascii=False)[:120], api_key)
            return TransientFailure(f"{self.base_url} answered with something other than {self.answer_kind}: "
                                    f"{shown!r}")
        return self._answer_result(payload, time.monotonic() - started)

    def _status_failure(self, response: HttpResponse,
                        api_key: str) -> GenerationResult | TransientFailure | ParameterRefused:
        error = error_body(response, api_key)
        status = response.status
        if status in _FATAL_STATUS:
            # Never chained or quoted whole: a 401 body quotes (part of) the rejected key.
            raise BackendUnavailable(self._fatal_message(status, error.message))
        if status in _RETRYABLE_STATUS or status >= 500:
            delay = server_delay(response.headers)
            return TransientFailure(f"HTTP {status}: {error.message}",
                                    delay if delay is not None else error.retry_delay_s)
        return self._error_result(status, error)

    def _retry_delay(self, attempt: int, server_delay: float | None) -> float:
        if server_delay is not None:
            return min(self.backoff_max_s, server_delay)
        delay = min(self.backoff_max_s, self.backoff_initial_s * 2**attempt)
        # Jitter keeps the concurrent requests that failed together from all retrying in the same instant.
        return delay + random.uniform(0.0, 0.1 * delay)

    def _fatal_message(self, status: int, message: str) -> str:
        where = f"model {self.model!r} at {self.base_url}"
        if status == 401:
            # The API's own 401 text quotes (part of) the rejected key, so it is left out entirely.
            return f"HTTP 401 from {where}: the API key in {self.api_key_env or '(none)'} was rejected"
        return f"HTTP {status} from {where}: {message}"


def error_body(response: HttpResponse, api_key: str) -> ErrorBody:
    """The code, message and parameter at fault of an error answer: `{"error": {"code"|"type"|"status", "message",
    "param"}}` (OpenAI, Anthropic, Gemini) or plain text; Gemini's `RetryInfo` wait when the body has one."""
    code, text, retry_delay_s, param = None, "", None, None
    try:
        payload = json.loads(response.body)
    except (ValueError, UnicodeDecodeError):
        text = response.body.decode("utf-8", "replace").strip()
    else:
        error = payload.get("error", payload) if isinstance(payload, Mapping) else payload
        if isinstance(error, Mapping):
            code = next((error[name] for name in ("code", "type", "status")
                         if isinstance(error.get(name), str)), error.get("code"))
            text = error["message"] if isinstance(error.get("message"), str) else json.dumps(error, ensure_ascii=False)
            retry_delay_s = _body_retry_delay(error.get("details"))
            param = error.get("param")
        else:
            text = error if isinstance(error, str) else json.dumps(error, ensure_ascii=False)
    message = redact(text or "(empty body)", api_key)
    message = message if len(message) <= _MAX_MESSAGE_CHARS else message[: _MAX_MESSAGE_CHARS - 1] + "…"
    return ErrorBody(code, message, retry_delay_s, param)


def _body_retry_delay(details: Any) -> float | None:
    for detail in details if isinstance(details, list) else []:
        if isinstance(detail, Mapping) and isinstance(detail.get("retryDelay"), str):
            match = _RETRY_DELAY.match(detail["retryDelay"])
            if match:
                return float(match.group(1))
    return None


def redact(text: str, secret: str) -> str:
    # Servers, proxies and the HTTP client echo request headers in error text, sometimes repr-escaped.
    text = _BEARER.sub("Bearer [redacted]", text)
    if not secret or secret == LOCAL_SERVER_KEY:  # the local-server placeholder is no secret
        return text
    for form in dict.fromkeys((secret, repr(secret)[1:-1], repr(secret.encode())[2:-1])):
        text = text.replace(form, "[redacted]")
    return text


def server_delay(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked us to wait (`retry-after-ms`, or `Retry-After` in seconds or as an HTTP date)."""
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        try:
            seconds = float(headers.get(name, "")) * scale
        except ValueError:
            continue
        if math.isfinite(seconds):
            return max(0.0, seconds)
    date = headers.get("retry-after")
    if not date:
        return None
    try:
        when = email.utils.parsedate_to_datetime(date)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def merged(body: dict[str, Any], extra: Mapping[str, Any] | None) -> dict[str, Any]:
    """`body` with `extra` merged in: objects key by key (so `extra_body: {generationConfig: {topK: 40}}` keeps the
    body's other generation settings), anything else replaced."""
    for name, value in (extra or {}).items():
        if isinstance(value, Mapping) and isinstance(body.get(name), dict):
            body[name] = merged(dict(body[name]), value)
        else:
            body[name] = value
    return body


def text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def count_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None


def run_to_completion(coroutine: Coroutine[Any, Any, T]) -> T:
    if not _loop_is_running():
        return asyncio.run(coroutine)
    # A loop already runs in this thread (Jupyter, an async caller): asyncio.run would refuse, and blocking that loop
    # on itself would deadlock, so the coroutine gets a fresh loop in a worker thread.
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def _loop_is_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
