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

from typing import Any, ClassVar, Mapping, Optional

from pydantic import Field

from sctc_assets.backends.api_backend import (LOCAL_SERVER_KEY, ApiBackend, ErrorBody, count_or_none, merged,
                                              redact, server_delay, text_or_none)
from sctc_assets.lib.estimate import TokenCounter, tiktoken_counter
from sctc_assets.lib.generation import GenerationRequest, GenerationResult

# The names tests and other modules import from here.
_redact, _server_delay = redact, server_delay
__all__ = ["LOCAL_SERVER_KEY", "OpenAIBackend"]

_CONTENT_FILTER_CODES = frozenset({"content_filter", "content_policy_violation"})
_CONTENT_FILTER_PHRASES = ("content management policy", "content filter", "content_filter")


class OpenAIBackend(ApiBackend):
    """Chat completions from an OpenAI-compatible endpoint, with bounded concurrency and retries."""

    backend_name: ClassVar[str] = "openai"
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

    def token_counter(self) -> TokenCounter | None:
        """tiktoken's encoding of an OpenAI model name, when the tokenizer registry holds a copy of it."""
        return tiktoken_counter(self.model) if self.model else None

    def _identity_params(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "max_tokens": self.max_tokens, "top_p": self.top_p,
                "seed": self.seed, "system_prompt": self.system_prompt, "extra_body": self.extra_body}

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

    def _error_result(self, status: int, error: ErrorBody) -> GenerationResult:
        if status == 400 and _is_content_filter(error.code, error.message):
            return GenerationResult(text=None, outcome="refusal", message=error.message)
        return super()._error_result(status, error)

    def _request_body(self, request: GenerationRequest) -> dict[str, Any]:
        return self._completion_body(request)

    def _completion_body(self, request: GenerationRequest) -> dict[str, Any]:
        messages = [dict(message) for message in request.messages]
        if self.system_prompt is not None and not any(message.get("role") == "system" for message in messages):
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": self.temperature}
        # Unset options are omitted rather than sent as null: some compatible servers reject explicit nulls.
        optional = {"max_tokens": self.max_tokens, "top_p": self.top_p, "seed": request.seed}
        body.update({name: value for name, value in optional.items() if value is not None})
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
    finish_reason = text_or_none(choice.get("finish_reason"))
    return GenerationResult(
        text=_content_text(choice["message"].get("content")),
        # A completion cut by the provider's filter is its refusal; the partial text is kept for inspection.
        outcome="refusal" if finish_reason == "content_filter" else "ok",
        input_tokens=count_or_none(usage.get("prompt_tokens")),
        output_tokens=count_or_none(usage.get("completion_tokens")),
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
