"""Backend for Anthropic's Messages API (`POST {base_url}/v1/messages`), natively rather than through a router.

The request: `x-api-key` and `anthropic-version` headers; `model`, `max_tokens` (required by the API), `messages` of
user and assistant turns only (the API refuses a `system` role there with a 400), the system prompt as the top-level
`system` (a request's own system message first, else the entry's `system_prompt`), `temperature` and `top_p` when set.
The answer: the text blocks of `content` joined; the thinking blocks (extended thinking, enabled with `extra_body:
{thinking: {type: enabled, budget_tokens: N}}`) are its `reasoning`, kept apart. `stop_reason` `refusal` (the model's
safety classifiers stopped it) is outcome `refusal`; `max_tokens` with thinking and no text is `truncated`; usage is
`input_tokens` and `output_tokens` (thinking included: the API does not count it apart). Errors are `{"type": "error",
"error": {"type", "message"}}`: 429 and 529 (`overloaded_error`) and 5xx are retried honouring `retry-after`
(`api_backend.py`, shared with the `openai` backend). `batch_client()` sends the same requests through the Message
Batches API at half the price (`batch_anthropic.py`).
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping, Optional

from pydantic import Field

from sctc_assets.backends.api_backend import ApiBackend, count_or_none, merged, text_or_none
from sctc_assets.backends.batch_anthropic import AnthropicBatchClient
from sctc_assets.lib.generation import TRUNCATED_MESSAGE, GenerationRequest, GenerationResult, is_truncated

# The API version sent. 2023-06-01 still takes `temperature` and `top_p` for the models that accept them;
# 2026-10-21 (the anthropic SDK 2.x's default) refuses every sampling parameter.
ANTHROPIC_VERSION = "2023-06-01"


class AnthropicBackend(ApiBackend):
    """Claude models through Anthropic's Messages API, with bounded concurrency and retries."""

    backend_name: ClassVar[str] = "anthropic"
    batch_api: ClassVar[Optional[str]] = "anthropic"
    answer_kind: ClassVar[str] = "a message"

    base_url: str = Field(default="https://api.anthropic.com",
                          description="API root, as the anthropic SDK takes it (requests go to /v1/messages).")
    api_key_env: str = Field(
        default="ANTHROPIC_API_KEY",
        description="Name of the environment variable holding the API key (sent as x-api-key); empty for a server "
                    "without authentication.",
    )
    # Not sent unless set: Claude Opus 4.7 and later answer any temperature with a 400 ("`temperature` is
    # deprecated for this model"), and API version 2026-10-21 refuses every sampling parameter.
    temperature: Optional[float] = Field(
        default=None, description="Sent only when set (newer Claude models refuse it; None: the model's default).")
    # The Messages API requires max_tokens: no null here.
    max_tokens: int = Field(default=512, ge=1)
    system_prompt: Optional[str] = Field(
        default=None, description="Top-level `system` of requests that carry no system message of their own."
    )

    def batch_client(self) -> AnthropicBatchClient:
        """Message Batches (`batch_anthropic.py`) for this model: the same requests, read the same way."""
        return AnthropicBatchClient(self)

    def _request_path(self) -> str:
        return "/v1/messages"

    def _auth_headers(self, api_key: str) -> dict[str, str]:
        return {"x-api-key": api_key, "anthropic-version": ANTHROPIC_VERSION}

    def _request_body(self, request: GenerationRequest) -> dict[str, Any]:
        system = [message["content"] for message in request.messages if message.get("role") == "system"]
        messages = [{"role": message["role"], "content": message["content"]} for message in request.messages
                    if message.get("role") != "system"]
        body: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens, "messages": messages}
        system_text = "\n\n".join(system) if system else self.system_prompt
        optional = {"system": system_text, "temperature": self.temperature, "top_p": self.top_p}
        body.update({name: value for name, value in optional.items() if value is not None})
        return merged(body, self.extra_body)

    def _is_answer(self, payload: Any) -> bool:
        return isinstance(payload, Mapping) and isinstance(payload.get("content"), list) and \
            all(isinstance(block, Mapping) for block in payload["content"])

    def _answer_result(self, payload: Mapping[str, Any], latency_s: float) -> GenerationResult:
        usage = payload.get("usage") if isinstance(payload.get("usage"), Mapping) else {}
        stop = text_or_none(payload.get("stop_reason"))
        blocks = payload["content"]
        text = "".join(block["text"] for block in blocks
                       if block.get("type") == "text" and isinstance(block.get("text"), str))
        thinking = [block["thinking"] for block in blocks
                    if block.get("type") == "thinking" and isinstance(block.get("thinking"), str)]
        reasoning = "\n\n".join(part for part in thinking if part.strip()) or None
        if stop == "refusal":
            # Claude's safety classifiers stopped the answer: a refusal; any text before it is kept for inspection.
            outcome, message = "refusal", "stop_reason refusal"
        elif is_truncated(text, reasoning, stop):
            outcome, message = "truncated", TRUNCATED_MESSAGE
        else:
            outcome, message = "ok", None
        return GenerationResult(
            text=text, outcome=outcome, message=message,
            input_tokens=count_or_none(usage.get("input_tokens")),
            # Billed thinking is part of output_tokens; the Messages API does not count it apart.
            output_tokens=count_or_none(usage.get("output_tokens")),
            finish_reason=stop, latency_s=latency_s, served_model=text_or_none(payload.get("model")),
            reasoning=reasoning,
        )
