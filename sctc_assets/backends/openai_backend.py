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
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ClassVar, Coroutine, Mapping, Optional, TypeVar

from pydantic import Field, PrivateAttr, field_validator

from sctc_assets.backends.base import BackendUnavailable, ModelBackend, ResultCallback
from sctc_assets.backends.http_client import HttpClient, HttpResponse, TransportError
from sctc_assets.lib.generation import (TRUNCATED_MESSAGE, GenerationRequest, GenerationResult, is_truncated,
                                        think_blocks)
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
# Reasoning models' parameter rules: which field carries the token limit, which sampling parameters may be left out,
# and the reasoning efforts OpenAI's API takes. A 400 naming one of these (`error.param`) with one of these codes
# is adapted to at run time (`_adapted_rules`).
TOKEN_LIMIT_PARAMS = ("max_tokens", "max_completion_tokens")
OMITTABLE_PARAMS = ("temperature", "top_p")
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
_PARAMETER_CODES = frozenset({"unsupported_parameter", "unsupported_value"})
# What this process learned from such 400s, per (endpoint, model): param → the adaptation. Every backend of that
# model in the run starts adapted, so only the first partition pays the refused call and says so.
_LEARNED: dict[tuple[str, str], dict[str, str]] = {}
_LEARNED_LOCK = threading.Lock()

T = TypeVar("T")


@dataclass(frozen=True)
class _TransientFailure:
    """A failed attempt that a later one may get past: 429, 5xx, timeout, dropped connection."""

    description: str
    server_delay_s: float | None = None


@dataclass(frozen=True)
class _ParameterRefused:
    """A 400 naming a request parameter the model does not take (`unsupported_parameter`/`unsupported_value`)."""

    param: str
    code: str
    message: str


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
    # Reasoning models' parameter rules. Not part of identity(): they change how the entry's request is written,
    # not what is asked, so an answer cached before a rule was set (or learned from a 400) stays that entry's answer.
    token_limit_param: str = Field(
        default="max_tokens", description="The request field that carries max_tokens: `max_tokens`, or "
        "`max_completion_tokens` for models that refuse `max_tokens` (OpenAI's reasoning models; it also bounds "
        "their reasoning). Learned from the API's 400 when left at the default.",
    )
    unsupported_params: Optional[list[str]] = Field(
        default=None, description="Sampling parameters the model refuses, left out of every request: `temperature`, "
        "`top_p` (the model's own default applies). Learned from the API's 400 when not given.",
    )
    reasoning_effort: Optional[str] = Field(
        default=None, description=f"Sent as `reasoning_effort` when set: one of {', '.join(REASONING_EFFORTS)}.",
    )
    # Not part of identity(): attribution headers do not change an answer, and cached answers stay valid.
    headers: Optional[dict[str, str]] = Field(
        default=None,
        description="Extra HTTP headers sent with every request, e.g. OpenRouter's HTTP-Referer and X-Title. Not "
                    "for credentials: the key comes from `api_key_env` only.",
    )

    # The adaptations this backend's calls learned (`_adapt_to`), said in its notes.
    _said: list = PrivateAttr(default_factory=list)

    @field_validator("token_limit_param")
    @classmethod
    def _known_token_limit_param(cls, value: str) -> str:
        if value not in TOKEN_LIMIT_PARAMS:
            raise ValueError(f"expected one of {', '.join(TOKEN_LIMIT_PARAMS)}, found {value!r}")
        return value

    @field_validator("unsupported_params")
    @classmethod
    def _known_unsupported_params(cls, value: Optional[list[str]]) -> Optional[list[str]]:
        unknown = [name for name in value or [] if name not in OMITTABLE_PARAMS]
        if unknown:
            raise ValueError(f"only {', '.join(OMITTABLE_PARAMS)} can be left out, found {unknown}")
        return value

    @field_validator("reasoning_effort")
    @classmethod
    def _known_reasoning_effort(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and value not in REASONING_EFFORTS:
            raise ValueError(f"expected one of {', '.join(REASONING_EFFORTS)}, found {value!r}")
        return value

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
                # Only when set: the keys of entries without it stay what they were before the setting existed.
                **({"reasoning_effort": self.reasoning_effort} if self.reasoning_effort is not None else {}),
            },
        }

    def trials_are_repeats(self) -> bool:
        # A model that takes no temperature samples at its own default: its trials are samples, not repeats.
        return "temperature" not in self._omitted_params() and super().trials_are_repeats()

    def _model_key(self) -> tuple[str, str]:
        return self.base_url.rstrip("/"), self.model

    def _learned(self) -> dict[str, str]:
        with _LEARNED_LOCK:
            return dict(_LEARNED.get(self._model_key(), {}))

    def _limit_param(self) -> str:
        return self._learned().get("token_limit_param", self.token_limit_param)

    def _omitted_params(self) -> set[str]:
        learned = self._learned()
        return set(self.unsupported_params or ()) | {name for name in OMITTABLE_PARAMS if learned.get(name) == "omit"}

    def request_adaptations(self) -> list[str]:
        """How this model's requests differ from what its registry entry says, learned from the API's 400s in this
        run: one line each (recorded in the metadata of every partition whose requests were adapted)."""
        learned = self._learned()
        if learned.get("token_limit_param") == self.token_limit_param:
            del learned["token_limit_param"]  # the entry says so itself
        for name in self.unsupported_params or ():
            learned.pop(name, None)
        lines = []
        limit = learned.get("token_limit_param")
        if limit:
            refused = next(name for name in TOKEN_LIMIT_PARAMS if name != limit)
            lines.append(f"the token limit is sent as {limit} (the API refused {refused}): set "
                         f"`token_limit_param: {limit}` in the registry entry")
        for name in OMITTABLE_PARAMS:
            if learned.get(name) == "omit":
                lines.append(f"{name} left out (the API refused it; the model's default applies): add {name} to "
                             "`unsupported_params` in the registry entry")
        return lines

    def generation_notes(self) -> list[str]:
        # Said once per model in a run: by the backend whose calls learned the adaptation.
        return super().generation_notes() + [f"model {self.model!r}: {line}" for line in self._said]

    def _adapt_to(self, refused: _ParameterRefused) -> bool:
        """Change this model's requests so that `refused.param` is no longer sent as it was; False when there is
        nothing to change (the parameter is not one this backend adapts, or is already left out)."""
        if refused.param in TOKEN_LIMIT_PARAMS and refused.code == "unsupported_parameter":
            change = ("token_limit_param", next(name for name in TOKEN_LIMIT_PARAMS if name != refused.param))
            if self._limit_param() != refused.param:
                return True  # another request learned it meanwhile: retry with the current rules
        elif refused.param in OMITTABLE_PARAMS:
            change = (refused.param, "omit")
            if refused.param in self._omitted_params():
                return True
        else:
            return False
        before = self.request_adaptations()
        with _LEARNED_LOCK:
            _LEARNED.setdefault(self._model_key(), {})[change[0]] = change[1]
        self._said += [line for line in self.request_adaptations() if line not in before]
        return True

    def pricing(self) -> tuple[float | None, float | None]:
        return self.price_input_per_mtok, self.price_output_per_mtok

    def request_seed(self, request: GenerationRequest) -> int | None:
        return None if self.seed is None else self.seed + int(request.trial)

    def claim_chunk_size(self) -> int:
        return self.concurrency

    def generate(self, requests, **options):  # type: ignore[override]
        self._said = []
        return super().generate(requests, **options)

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
        adapted: set[str] = set()
        while True:
            outcome = await self._attempt(client, body, headers, api_key)
            if isinstance(outcome, _ParameterRefused):
                # Retried once per refused parameter, adapted; refused again (or not adaptable): an error.
                if outcome.param in adapted or not self._adapt_to(outcome):
                    return GenerationResult(text=None, outcome="error", message=f"HTTP 400: {outcome.message}")
                adapted.add(outcome.param)
                body = json.dumps(self._completion_body(request), ensure_ascii=False).encode("utf-8")
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
                       api_key: str) -> GenerationResult | _TransientFailure | _ParameterRefused:
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

    def _status_failure(self, response: HttpResponse,
                        api_key: str) -> GenerationResult | _TransientFailure | _ParameterRefused:
        code, message, param = _error_details(response, api_key)
        status = response.status
        if status in _FATAL_STATUS:
            # Never chained or quoted whole: a 401 body quotes (part of) the rejected key.
            raise BackendUnavailable(self._fatal_message(status, message))
        if _is_retryable_status(status):
            return _TransientFailure(f"HTTP {status}: {message}", _server_delay(response.headers))
        if status == 400 and _is_content_filter(code, message):
            return GenerationResult(text=None, outcome="refusal", message=message)
        if status == 400 and code in _PARAMETER_CODES and isinstance(param, str):
            return _ParameterRefused(param, code, message)
        return GenerationResult(text=None, outcome="error", message=f"HTTP {status}: {message}")

    def _completion_body(self, request: GenerationRequest) -> dict[str, Any]:
        messages = [dict(message) for message in request.messages]
        if self.system_prompt is not None and not any(message.get("role") == "system" for message in messages):
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        omitted = self._omitted_params()
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        # Unset options are omitted rather than sent as null: some compatible servers reject explicit nulls.
        optional = {"temperature": self.temperature, self._limit_param(): self.max_tokens, "top_p": self.top_p,
                    "seed": request.seed, "reasoning_effort": self.reasoning_effort}
        body.update({name: value for name, value in optional.items() if value is not None and name not in omitted})
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


def _error_details(response: HttpResponse, api_key: str) -> tuple[Any, str, Any]:
    """The error code, human-readable message and parameter at fault of an error answer (`{"error": {"code",
    "message", "param"}}` or text)."""
    code, text, param = None, "", None
    try:
        payload = json.loads(response.body)
    except (ValueError, UnicodeDecodeError):
        text = response.body.decode("utf-8", "replace").strip()
    else:
        error = payload.get("error", payload) if isinstance(payload, Mapping) else payload
        if isinstance(error, Mapping):
            code, param = error.get("code"), error.get("param")
            text = error["message"] if isinstance(error.get("message"), str) else json.dumps(error, ensure_ascii=False)
        else:
            text = error if isinstance(error, str) else json.dumps(error, ensure_ascii=False)
    message = _redact(text or "(empty body)", api_key)
    return code, message if len(message) <= _MAX_MESSAGE_CHARS else message[: _MAX_MESSAGE_CHARS - 1] + "…", param


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
    details = usage.get("completion_tokens_details")
    finish_reason = _text_or_none(choice.get("finish_reason"))
    text = _content_text(choice["message"].get("content"))
    # The answer (`text`) is what it was before reasoning was kept: `<think>` blocks stay in it, and are copied.
    reasoning = _reasoning_text(choice["message"]) or think_blocks(text)
    # A completion cut by the provider's filter is its refusal; the partial text is kept for inspection.
    outcome = "refusal" if finish_reason == "content_filter" else \
        "truncated" if is_truncated(text, reasoning, finish_reason) else "ok"
    return GenerationResult(
        text=text,
        outcome=outcome,
        message=TRUNCATED_MESSAGE if outcome == "truncated" else None,
        input_tokens=_count_or_none(usage.get("prompt_tokens")),
        output_tokens=_count_or_none(usage.get("completion_tokens")),
        finish_reason=finish_reason,
        latency_s=latency_s,
        reasoning=reasoning,
        reasoning_tokens=_count_or_none(details.get("reasoning_tokens")) if isinstance(details, Mapping) else None,
        **provenance,
    )


def _reasoning_text(message: Mapping[str, Any]) -> str | None:
    """The reasoning a chat-completion message carries beside its content: `reasoning_content` (DeepSeek, older
    vLLM), `reasoning` (OpenRouter, vLLM) or `reasoning_details` (OpenRouter: text and summary parts; encrypted
    parts hold nothing readable). Routers send the same reasoning in several of them: the first one given wins."""
    for name in ("reasoning_content", "reasoning"):
        if _text_or_none(message.get(name)):
            return message[name]
    details = message.get("reasoning_details")
    if isinstance(details, list):
        parts = [part.get("text") or part.get("summary") for part in details if isinstance(part, Mapping)]
        joined = "\n\n".join(part for part in parts if isinstance(part, str) and part)
        return joined or None
    return None


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
