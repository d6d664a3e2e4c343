"""Backend for any OpenAI-compatible chat-completions endpoint (OpenAI, Azure OpenAI, vLLM, llama.cpp server, ...).

Requests go through a small h11 client (`http_client.py`) rather than the openai SDK: the SDK costs ~12× the CPU per
request, which caps a wide run's speed-up (`bench/openai_concurrency.py` measures both). The worker loop, retries
(honour `Retry-After`, exponential backoff otherwise; what survives them becomes an `error` result, not an exception)
and the API key's handling are those every provider backend shares (`api_backend.py`): the key is read from the
environment at call time and handed only to the HTTP client; it never becomes a field, part of `identity()`, a result
message or a cache row. Trial k of a prompt is sent with seed `seed + k` when `seed` is set, so trials are distinct,
reproducible samples; without `seed` none is sent and the server's own randomness separates them (not reproducible).
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar, Mapping, Optional

from pydantic import Field, PrivateAttr, field_validator

from sctc_assets.backends.api_backend import (LOCAL_SERVER_KEY, ApiBackend, ErrorBody, ParameterRefused,
                                              count_or_none, merged, redact, server_delay, text_or_none)
from sctc_assets.backends.batch_openai import OpenAIBatchClient
from sctc_assets.lib.cost_estimate import TokenCounter, tiktoken_counter
from sctc_assets.lib.generation import (TRUNCATED_MESSAGE, GenerationRequest, GenerationResult, is_truncated,
                                        think_blocks)

# The names tests and other modules import from here.
_redact, _server_delay = redact, server_delay
__all__ = ["LOCAL_SERVER_KEY", "OpenAIBackend"]

_CONTENT_FILTER_CODES = frozenset({"content_filter", "content_policy_violation"})
_CONTENT_FILTER_PHRASES = ("content management policy", "content filter", "content_filter")
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


class OpenAIBackend(ApiBackend):
    """Chat completions from an OpenAI-compatible endpoint, with bounded concurrency and retries."""

    backend_name: ClassVar[str] = "openai"
    batch_api: ClassVar[Optional[str]] = "openai"
    observable: ClassVar[bool] = True  # `observe:` in the registry: a one-token chat call reports the served model
    answer_kind: ClassVar[str] = "a chat completion"

    base_url: str = Field(default="https://api.openai.com/v1", description="Endpoint root, up to and including /v1.")
    api_key_env: str = Field(
        default="OPENAI_API_KEY",
        description="Name of the environment variable holding the API key; empty for servers without authentication.",
    )
    seed: Optional[int] = Field(
        default=None, description="Base sampling seed: trial k is sent with seed + k. None: no seed is sent, trials "
        "are separated by the server's own randomness and are not reproducible.",
    )
    system_prompt: Optional[str] = Field(
        default=None, description="System message prepended to requests that carry none."
    )
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

    def token_counter(self) -> TokenCounter | None:
        """tiktoken's encoding of an OpenAI model name, when the tokenizer registry holds a copy of it."""
        return tiktoken_counter(self.model) if self.model else None

    def _identity_params(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "max_tokens": self.max_tokens, "top_p": self.top_p,
                "seed": self.seed, "system_prompt": self.system_prompt, "extra_body": self.extra_body,
                # Only when set: the keys of entries without it stay what they were before the setting existed.
                **({"reasoning_effort": self.reasoning_effort} if self.reasoning_effort is not None else {})}

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

    def _adapt_to(self, refused: ParameterRefused) -> bool:
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

    def generate(self, requests, **options):  # type: ignore[override]
        self._said = []
        return super().generate(requests, **options)

    def batch_client(self) -> OpenAIBatchClient:
        """OpenAI's Batch API at this entry's endpoint (`batch_openai.py`), with its key, headers, timeout and retry
        policy: lines carry the bodies `_request_body` writes and are read as synchronous answers are. The caller
        closes it."""
        return OpenAIBatchClient(self)

    def request_seed(self, request: GenerationRequest) -> int | None:
        return None if self.seed is None else self.seed + int(request.trial)

    def _request_path(self) -> str:
        return "/chat/completions"

    def _auth_headers(self, api_key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}"}

    def _is_answer(self, payload: Any) -> bool:
        return _is_chat_completion(payload)

    def _answer_result(self, payload: Mapping[str, Any], latency_s: float) -> GenerationResult:
        return _completion_result(payload, latency_s)

    def _error_result(self, status: int, error: ErrorBody) -> GenerationResult | ParameterRefused:
        if status == 400 and _is_content_filter(error.code, error.message):
            return GenerationResult(text=None, outcome="refusal", message=error.message)
        if status == 400 and error.code in _PARAMETER_CODES and isinstance(error.param, str):
            return ParameterRefused(error.param, error.code, error.message)
        return super()._error_result(status, error)

    def _request_body(self, request: GenerationRequest) -> dict[str, Any]:
        return self._completion_body(request)

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
        return merged(body, self.extra_body)


def _is_content_filter(code: Any, message: str) -> bool:
    if str(code) in _CONTENT_FILTER_CODES:
        return True
    return any(phrase in message.lower() for phrase in _CONTENT_FILTER_PHRASES)


def _is_chat_completion(payload: Any) -> bool:
    """Whether a 200 body is a usable completion: `choices` a list of objects that each carry a `message` object."""
    if not isinstance(payload, Mapping) or not isinstance(payload.get("choices"), list):
        return False
    return all(isinstance(choice, Mapping) and isinstance(choice.get("message"), Mapping)
               for choice in payload["choices"])


def _completion_result(payload: Mapping[str, Any], latency_s: float) -> GenerationResult:
    provenance = {"served_model": text_or_none(payload.get("model")),
                  "system_fingerprint": text_or_none(payload.get("system_fingerprint"))}
    if not payload["choices"]:
        return GenerationResult(text=None, outcome="error", message="the response had no choices", latency_s=latency_s,
                                **provenance)
    choice = payload["choices"][0]
    usage = payload.get("usage") if isinstance(payload.get("usage"), Mapping) else {}
    details = usage.get("completion_tokens_details")
    finish_reason = text_or_none(choice.get("finish_reason"))
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
        input_tokens=count_or_none(usage.get("prompt_tokens")),
        output_tokens=count_or_none(usage.get("completion_tokens")),
        finish_reason=finish_reason,
        latency_s=latency_s,
        reasoning=reasoning,
        reasoning_tokens=count_or_none(details.get("reasoning_tokens")) if isinstance(details, Mapping) else None,
        **provenance,
    )


def _reasoning_text(message: Mapping[str, Any]) -> str | None:
    """The reasoning a chat-completion message carries beside its content: `reasoning_content` (DeepSeek, older
    vLLM), `reasoning` (OpenRouter, vLLM) or `reasoning_details` (OpenRouter: text and summary parts; encrypted
    parts hold nothing readable). Routers send the same reasoning in several of them: the first one given wins."""
    for name in ("reasoning_content", "reasoning"):
        if text_or_none(message.get(name)):
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
