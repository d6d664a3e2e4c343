"""Backend for Google's Gemini API (`POST {base_url}/v1beta/models/{model}:generateContent`), natively.

The request: the key in the `x-goog-api-key` header (never in the URL's `?key=`, which proxies and logs keep);
`contents` of `user` and `model` turns with text `parts`, the system prompt as `systemInstruction` (a request's own
system message first, else the entry's `system_prompt`), and `generationConfig` with `temperature`, `maxOutputTokens`,
`topP` and the trial's `seed` when set. The answer: the first candidate's text parts joined; its thought parts
(`thought: true`, sent when `extra_body: {generationConfig: {thinkingConfig: {includeThoughts: true}}}`) are its
`reasoning`, kept apart, and `usageMetadata.thoughtsTokenCount` its `reasoning_tokens`. A blocked prompt
(`promptFeedback.blockReason`, no candidates) and a candidate stopped by the safety filters (`finishReason` `SAFETY`,
`PROHIBITED_CONTENT`, `BLOCKLIST`, `SPII`) are outcome `refusal`; `MAX_TOKENS` with thoughts and no text is
`truncated`. Usage is `usageMetadata.promptTokenCount`, and `candidatesTokenCount` plus `thoughtsTokenCount` (both
billed as output). Errors are `{"error": {"code", "message", "status"}}`; 429 (with its `RetryInfo` wait when there is
no `Retry-After`), 503 and other 5xx are retried (`api_backend.py`, shared with the `openai` backend). `batch_client()`
sends the same requests through the Batch API at half the price (`batch_gemini.py`).
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping, Optional
from urllib.parse import quote

from pydantic import Field

from sctc_assets.backends.api_backend import ApiBackend, count_or_none, merged, text_or_none
from sctc_assets.backends.batch_gemini import GeminiBatchClient
from sctc_assets.lib.generation import TRUNCATED_MESSAGE, GenerationRequest, GenerationResult, is_truncated

API_VERSION = "v1beta"
# Finish reasons that mean the safety filters stopped the answer (RECITATION, LANGUAGE, OTHER are not refusals).
REFUSAL_FINISH_REASONS = frozenset({"SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY"})


class GeminiBackend(ApiBackend):
    """Gemini models through Google's Generative Language API, with bounded concurrency and retries."""

    backend_name: ClassVar[str] = "gemini"
    batch_api: ClassVar[Optional[str]] = "gemini"
    answer_kind: ClassVar[str] = "a generateContent response"

    base_url: str = Field(default="https://generativelanguage.googleapis.com",
                          description="API root, as the google-genai SDK takes it (requests go to "
                                      "/v1beta/models/{model}:generateContent).")
    api_key_env: str = Field(
        default="GEMINI_API_KEY",
        description="Name of the environment variable holding the API key (sent as x-goog-api-key); empty for a "
                    "server without authentication.",
    )
    seed: Optional[int] = Field(
        default=None, description="Base sampling seed: trial k is sent with seed + k. None: no seed is sent.",
    )
    system_prompt: Optional[str] = Field(
        default=None, description="`systemInstruction` of requests that carry no system message of their own."
    )

    def _identity_params(self) -> dict[str, Any]:
        return {**super()._identity_params(), "seed": self.seed}

    def request_seed(self, request: GenerationRequest) -> int | None:
        return None if self.seed is None else self.seed + int(request.trial)

    def batch_client(self) -> GeminiBatchClient:
        """Batch mode (`batch_gemini.py`) for this model: the same requests, read the same way."""
        return GeminiBatchClient(self)

    def _request_path(self) -> str:
        model = self.model.removeprefix("models/")
        return f"/{API_VERSION}/models/{quote(model, safe='.-_')}:generateContent"

    def _auth_headers(self, api_key: str) -> dict[str, str]:
        return {"x-goog-api-key": api_key}

    def _request_body(self, request: GenerationRequest) -> dict[str, Any]:
        system = [message["content"] for message in request.messages if message.get("role") == "system"]
        contents = [{"role": "model" if message["role"] == "assistant" else "user",
                     "parts": [{"text": message["content"]}]}
                    for message in request.messages if message.get("role") != "system"]
        config = {"temperature": self.temperature, "maxOutputTokens": self.max_tokens, "topP": self.top_p,
                  "seed": request.seed}
        body: dict[str, Any] = {"contents": contents,
                                "generationConfig": {name: value for name, value in config.items()
                                                     if value is not None}}
        system_text = "\n\n".join(system) if system else self.system_prompt
        if system_text is not None:
            body["systemInstruction"] = {"parts": [{"text": system_text}]}
        return merged(body, self.extra_body)

    def _is_answer(self, payload: Any) -> bool:
        if not isinstance(payload, Mapping):
            return False
        candidates = payload.get("candidates")
        if candidates is None:  # no candidates: only an answer when the prompt was blocked
            return isinstance(payload.get("promptFeedback"), Mapping)
        return isinstance(candidates, list) and all(isinstance(candidate, Mapping) for candidate in candidates)

    def _answer_result(self, payload: Mapping[str, Any], latency_s: float) -> GenerationResult:
        usage = payload.get("usageMetadata") if isinstance(payload.get("usageMetadata"), Mapping) else {}
        answer_tokens = count_or_none(usage.get("candidatesTokenCount"))
        thought_tokens = count_or_none(usage.get("thoughtsTokenCount"))
        # Thoughts are billed as output but counted apart from the candidates: output_tokens holds both, as the
        # other APIs' counts do, and reasoning_tokens the thoughts.
        output_tokens = None if answer_tokens is None and thought_tokens is None else \
            (answer_tokens or 0) + (thought_tokens or 0)
        common = {"input_tokens": count_or_none(usage.get("promptTokenCount")), "output_tokens": output_tokens,
                  "reasoning_tokens": thought_tokens, "latency_s": latency_s,
                  "served_model": text_or_none(payload.get("modelVersion"))}
        candidates = payload.get("candidates") or []
        feedback = payload.get("promptFeedback") if isinstance(payload.get("promptFeedback"), Mapping) else {}
        if not candidates:
            blocked = text_or_none(feedback.get("blockReason"))
            if blocked:
                return GenerationResult(text=None, outcome="refusal", message=f"prompt blocked: {blocked}",
                                        finish_reason=blocked, **common)
            return GenerationResult(text=None, outcome="error", message="the response had no candidates", **common)
        candidate = candidates[0]
        finish = text_or_none(candidate.get("finishReason"))
        content = candidate.get("content") if isinstance(candidate.get("content"), Mapping) else {}
        parts = [part for part in (content.get("parts") if isinstance(content.get("parts"), list) else [])
                 if isinstance(part, Mapping) and isinstance(part.get("text"), str)]
        text = "".join(part["text"] for part in parts if not part.get("thought"))
        reasoning = "\n\n".join(part["text"] for part in parts if part.get("thought") and part["text"].strip()) \
            or None
        if finish in REFUSAL_FINISH_REASONS:
            outcome, message = "refusal", f"finishReason {finish}"
        elif is_truncated(text, reasoning, finish):
            outcome, message = "truncated", TRUNCATED_MESSAGE
        else:
            outcome, message = "ok", None
        return GenerationResult(text=text, outcome=outcome, message=message, finish_reason=finish,
                                reasoning=reasoning, **common)
