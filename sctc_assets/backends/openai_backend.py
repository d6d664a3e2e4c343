"""Backend for any OpenAI-compatible chat-completions endpoint (OpenAI, Azure OpenAI, vLLM, llama.cpp server, ...).

Requests go through a small h11 client (`http_client.py`) rather than the openai SDK: the SDK costs ~12× the CPU per
request, which caps a wide run's speed-up (`bench/openai_concurrency.py` measures both). Retries are done here so
that every request follows one policy (honour `Retry-After`, exponential backoff otherwise) and so that what
survives the retries becomes an `error` result, not an exception. The API key is read from the environment at call
time and handed only to the HTTP client: it never becomes a field, part of `identity()`, a result message or a cache
row. Trial k of a prompt is sent with seed `seed + k` when `seed` is set, so trials are distinct, reproducible
samples; without `seed` none is sent and the server's own randomness separates them (not reproducible).
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

from pydantic import Field, field_validator

from sctc_assets.backends.base import BackendUnavailable, ModelBackend, ResultCallback
from sctc_assets.backends.http_client import HttpClient, HttpResponse, TransportError
from sctc_assets.lib.estimate import TokenCounter, tiktoken_counter
from sctc_assets.lib.generation import GenerationRequest, GenerationResult
from sctc_assets.lib.interrupt import stop_reason
from sctc_assets.lib.work_queue import WAIT, WorkQueue

# Key for servers that ignore authentication (vLLM, llama.cpp) yet still need the header to be present.
LOCAL_SERVER_KEY = "EMPTY"

_RETRYABLE_STATUS = frozenset({408, 409, 429})
# 401/403/404 mean the key, the permission or the model/endpoint is wrong: every other request would fail alike.
_FATAL_STATUS = frozenset({401, 403, 404})
_CONTENT_FILTER_CODES = frozenset({"content_filter", "content_policy_violation"})
_CONTENT_FILTER_PHRASES = ("content management policy", "content filter", "content_filter")
_MAX_MESSAGE_CHARS = 300
# Transport errors quote the Authorization header they refused (h11: "Illegal header value b'Bearer sk-…\\r'").
_BEARER = re.compile(r"Bearer\s+\S+")
_CREDENTIAL_HEADER = re.compile(r"authorization|cookie|api[-_]?key|token|secret|password", re.IGNORECASE)

T = TypeVar("T")


@dataclass(frozen=True)
class _TransientFailure:
    """A failed attempt that a later one may get past: 429, 5xx, timeout, dropped connection."""

    description: str
    server_delay_s: float | None = None


class OpenAIBackend(ModelBackend):
    """Chat completions from an OpenAI-compatible endpoint, with bounded concurrency and retries."""

    backend_name: ClassVar[str] = "openai"

    model: str = Field(description="Model name as the endpoint knows it.")
    base_url: str = Field(default="https://api.openai.com/v1", description="Endpoint root, up to and including /v1.")
    api_key_env: str = Field(
        default="OPENAI_API_KEY",
        description="Name of the environment variable holding the API key; empty for servers without authentication.",
    )
    temperature: float = 0.0
    max_tokens: Optional[int] = Field(default=512, ge=1)
    top_p: Optional[float] = None
    seed: Optional[int] = Field(
        default=None, description="Base sampling seed: trial k is sent with seed + k. None: no seed is sent, trials "
        "are separated by the server's own randomness and are not reproducible.",
    )
    system_prompt: Optional[str] = Field(
        default=None, description="System message prepended to requests that carry none."
    )
    concurrency: int = Field(default=8, ge=1, description="Requests in flight at once.")
    max_retries: int = Field(default=5, ge=0, description="Retries after 429, 5xx, timeouts and connection errors.")
    backoff_initial_s: float = Field(default=1.0, ge=0.0)
    backoff_max_s: float = Field(
        default=60.0, ge=0.0, description="Cap on any wait between retries, including a server-sent Retry-After."
    )
    timeout_s: float = Field(default=120.0, gt=0.0)
    price_input_per_mtok: Optional[float] = Field(default=None, description="USD per million input tokens.")
    price_output_per_mtok: Optional[float] = Field(default=None, description="USD per million output tokens.")
    extra_body: Optional[dict] = Field(
        default=None, description="Extra JSON fields sent with every request (e.g. vLLM sampling options)."
    )
    # Not part of identity(): attribution headers do not change an answer, and cached answers stay valid.
    headers: Optional[dict[str, str]] = Field(
        default=None,
        description="Extra HTTP headers sent with every request, e.g. OpenRouter's HTTP-Referer and X-Title. Not "
                    "for credentials: the key comes from `api_key_env` only.",
    )

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

    @classmethod
    def endpoint_lane(cls, settings: Mapping[str, Any]) -> str | None:
        """The entry's base URL (else the field's default), without a trailing slash."""
        return str(settings.get("base_url") or cls.model_fields["base_url"].default).rstrip("/")

    def token_counter(self) -> TokenCounter | None:
        """tiktoken's encoding of an OpenAI model name, when the tokenizer registry holds a copy of it."""
        return tiktoken_counter(self.model) if self.model else None

    def identity(self) -> dict[str, Any]:
        return {
            "backend": self.backend_name,
            "endpoint": self.base_url.rstrip("/"),
            "model": self.model,
            "params": {
                "temperature": self.temperature,
                "max_tokens": self.max_tokens,
                "top_p": self.top_p,
                "seed": self.seed,
                "system_prompt": self.system_prompt,
                "extra_body": self.extra_body,
            },
        }

    def pricing(self) -> tuple[float | None, float | None]:
        return self.price_input_per_mtok, self.price_output_per_mtok

    def request_seed(self, request: GenerationRequest) -> int | None:
        return None if self.seed is None else self.seed + int(request.trial)

    def claim_chunk_size(self) -> int:
        return self.concurrency

    def _generate_from(self, queue: WorkQueue, on_result: ResultCallback) -> None:
        api_key = self._read_api_key()
        _run_to_completion(self._generate_all(queue, on_result, api_key))

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
        headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json",
                   "Accept": "application/json", **(self.headers or {})}
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
        body = json.dumps(self._completion_body(request), ensure_ascii=False).encode("utf-8")
        attempt = 0
        while True:
            outcome = await self._attempt(client, body, headers, api_key)
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
                       api_key: str) -> GenerationResult | _TransientFailure:
        """One call: a final result, a failure worth retrying, or `BackendUnavailable` when nothing can succeed."""
        started = time.monotonic()
        try:
            response = await client.post("/chat/completions", body, headers)
        except TimeoutError:
            return _TransientFailure(f"timed out after {self.timeout_s:g}s")
        except TransportError as error:
            return _TransientFailure(f"connection error: {_redact(str(error), api_key)}")
        if not 200 <= response.status < 300:
            return self._status_failure(response, api_key)
        try:
            payload = json.loads(response.body)
        except (ValueError, UnicodeDecodeError) as error:
            shown = _redact(response.body[:120].decode("utf-8", "replace"), api_key)
            if response.body.lstrip()[:1] in (b"{", b"["):
                # A proxy or overloaded server cutting the body short: another attempt may get the whole answer.
                return _TransientFailure(f"{self.base_url} answered with malformed JSON ({error}): {shown!r}")
            # An HTML error or login page from a proxy, with status 200.
            return _TransientFailure(f"{self.base_url} answered with something other than a chat completion: {shown!r}")
        if not _is_chat_completion(payload):
            shown = _redact(json.dumps(payload, ensure_ascii=False)[:120], api_key)
            return _TransientFailure(f"{self.base_url} answered with something other than a chat completion: {shown!r}")
        return _completion_result(payload, time.monotonic() - started)

    def _status_failure(self, response: HttpResponse, api_key: str) -> GenerationResult | _TransientFailure:
        code, message = _error_details(response, api_key)
        status = response.status
        if status in _FATAL_STATUS:
            # Never chained or quoted whole: a 401 body quotes (part of) the rejected key.
            raise BackendUnavailable(self._fatal_message(status, message))
        if _is_retryable_status(status):
            return _TransientFailure(f"HTTP {status}: {message}", _server_delay(response.headers))
        if status == 400 and _is_content_filter(code, message):
            return GenerationResult(text=None, outcome="refusal", message=message)
        return GenerationResult(text=None, outcome="error", message=f"HTTP {status}: {message}")

    def _completion_body(self, request: GenerationRequest) -> dict[str, Any]:
        messages = [dict(message) for message in request.messages]
        if self.system_prompt is not None and not any(message.get("role") == "system" for message in messages):
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": self.temperature}
        # Unset options are omitted rather than sent as null: some compatible servers reject explicit nulls.
        optional = {"max_tokens": self.max_tokens, "top_p": self.top_p, "seed": request.seed}
        body.update({name: value for name, value in optional.items() if value is not None})
        body.update(self.extra_body or {})
        return body

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


def _is_retryable_status(status: int) -> bool:
    return status in _RETRYABLE_STATUS or status >= 500


def _is_content_filter(code: Any, message: str) -> bool:
    if str(code) in _CONTENT_FILTER_CODES:
        return True
    return any(phrase in message.lower() for phrase in _CONTENT_FILTER_PHRASES)


def _error_details(response: HttpResponse, api_key: str) -> tuple[Any, str]:
    """The error code and human-readable message of an error answer (`{"error": {"code", "message"}}` or text)."""
    code, text = None, ""
    try:
        payload = json.loads(response.body)
    except (ValueError, UnicodeDecodeError):
        text = response.body.decode("utf-8", "replace").strip()
    else:
        error = payload.get("error", payload) if isinstance(payload, Mapping) else payload
        if isinstance(error, Mapping):
            code = error.get("code")
            text = error["message"] if isinstance(error.get("message"), str) else json.dumps(error, ensure_ascii=False)
        else:
            text = error if isinstance(error, str) else json.dumps(error, ensure_ascii=False)
    message = _redact(text or "(empty body)", api_key)
    return code, message if len(message) <= _MAX_MESSAGE_CHARS else message[: _MAX_MESSAGE_CHARS - 1] + "…"


def _redact(text: str, secret: str) -> str:
    # Servers, proxies and the HTTP client echo request headers in error text, sometimes repr-escaped.
    text = _BEARER.sub("Bearer [redacted]", text)
    if not secret or secret == LOCAL_SERVER_KEY:  # the local-server placeholder is no secret
        return text
    for form in dict.fromkeys((secret, repr(secret)[1:-1], repr(secret.encode())[2:-1])):
        text = text.replace(form, "[redacted]")
    return text


def _is_chat_completion(payload: Any) -> bool:
    """Whether a 200 body is a usable completion: `choices` a list of objects that each carry a `message` object."""
    if not isinstance(payload, Mapping) or not isinstance(payload.get("choices"), list):
        return False
    return all(isinstance(choice, Mapping) and isinstance(choice.get("message"), Mapping)
               for choice in payload["choices"])


def _server_delay(headers: Mapping[str, str]) -> float | None:
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


def _completion_result(payload: Mapping[str, Any], latency_s: float) -> GenerationResult:
    provenance = {"served_model": _text_or_none(payload.get("model")),
                  "system_fingerprint": _text_or_none(payload.get("system_fingerprint"))}
    if not payload["choices"]:
        return GenerationResult(text=None, outcome="error", message="the response had no choices", latency_s=latency_s,
                                **provenance)
    choice = payload["choices"][0]
    usage = payload.get("usage") if isinstance(payload.get("usage"), Mapping) else {}
    finish_reason = _text_or_none(choice.get("finish_reason"))
    return GenerationResult(
        text=_content_text(choice["message"].get("content")),
        # A completion cut by the provider's filter is its refusal; the partial text is kept for inspection.
        outcome="refusal" if finish_reason == "content_filter" else "ok",
        input_tokens=_count_or_none(usage.get("prompt_tokens")),
        output_tokens=_count_or_none(usage.get("completion_tokens")),
        finish_reason=finish_reason,
        latency_s=latency_s,
        **provenance,
    )


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: keep the text ones
        return "".join(part.get("text", "") for part in content if isinstance(part, Mapping)
                       and isinstance(part.get("text"), str))
    return ""


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _count_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None


def _run_to_completion(coroutine: Coroutine[Any, Any, T]) -> T:
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
