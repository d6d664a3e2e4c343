"""A scriptable stub of Anthropic's Messages API on 127.0.0.1 (`POST /v1/messages`), for tests and benchmarks.

It misbehaves as the real API does: a request without a key (`x-api-key`, or `Authorization: Bearer` as the SDK 2.x
sends it) gets a 401 `authentication_error`, one without `anthropic-version` or `max_tokens`, or with a `system`
role inside `messages`, a 400 `invalid_request_error` (the API takes the system prompt as the top-level `system`
only), and so does a `temperature` or `top_p` sent for a model in `no_sampling_models` (Claude Opus 4.7 and later:
"`temperature` is deprecated for this model"); `script(prompt, ...)` queues a `stop_reason: refusal`
answer (`refusal()`), a 529 `overloaded_error` or 429 `rate_limit_error` with `retry-after` (`overloaded()`,
`rate_limited()`), or a body cut short (`cut_body()`) for the next requests carrying that prompt. Every other request
gets an echo answer with usage. Requests are recorded with the kind of reply they got (`ok` and `answer` end a
request; `scripted` is a failure worth retrying; `rejected` a 4xx), so tests count what was sent, answered and paid
twice, as with the OpenAI stub (`ProviderStubServer`, in `openai_stub_server.py`).
"""

from __future__ import annotations

from typing import Any, Mapping

from sctc_assets_tests.openai_stub_server import ProviderStubServer, StubReply, cut_short

MESSAGES_PATH = "/v1/messages"


def message(text: str, *, stop_reason: str = "end_turn", input_tokens: int = 7, output_tokens: int = 3,
            model: str = "claude-stub", thinking: str | None = None) -> StubReply:
    content: list[dict[str, Any]] = []
    if thinking is not None:
        content.append({"type": "thinking", "thinking": thinking, "signature": "stub-signature"})
    if text:
        content.append({"type": "text", "text": text})
    return StubReply(200, {"id": "msg_stub", "type": "message", "role": "assistant", "model": model,
                           "content": content, "stop_reason": stop_reason, "stop_sequence": None,
                           "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}})


def error(status: int, kind: str, text: str, headers: dict[str, str] | None = None) -> StubReply:
    return StubReply(status, {"type": "error", "error": {"type": kind, "message": text},
                              "request_id": "req_stub"}, headers or {})


def refusal() -> StubReply:
    """What Claude's safety classifiers give: a 200 with `stop_reason: refusal` and no text."""
    return message("", stop_reason="refusal", output_tokens=0)


def overloaded(retry_after_s: float = 0.0) -> StubReply:
    return error(529, "overloaded_error", "Overloaded", {"retry-after": f"{retry_after_s:g}"})


def rate_limited(retry_after_s: float = 0.0) -> StubReply:
    return error(429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit",
                 {"retry-after": f"{retry_after_s:g}"})


def cut_body(prompt: str = "") -> StubReply:
    return cut_short(echo_message(prompt))


def echo_message(prompt: str) -> StubReply:
    text = f"echo: {prompt}"
    return message(text, input_tokens=len(prompt), output_tokens=len(text))


def prompt_of(body: Mapping[str, Any]) -> str:
    users = [item.get("content", "") for item in body.get("messages", []) if isinstance(item, Mapping)
             and item.get("role") == "user"]
    last = users[-1] if users else ""
    if isinstance(last, list):  # content blocks
        return "".join(block.get("text", "") for block in last if isinstance(block, Mapping))
    return last


class StubAnthropicServer(ProviderStubServer):
    """Use as a context manager; `base_url` is what an `AnthropicBackend` should point at."""

    no_sampling_models = frozenset({"claude-opus-4-7", "claude-opus-4-8"})

    def accepts(self, path: str) -> bool:
        return path == MESSAGES_PATH

    def prompt_of(self, body: dict[str, Any]) -> str:
        return prompt_of(body)

    def echo(self, prompt: str, body: dict[str, Any]) -> StubReply:
        return echo_message(prompt)

    def rejection(self, body: dict[str, Any], headers: Mapping[str, str], path: str) -> StubReply | None:
        if not headers.get("x-api-key") and not headers.get("authorization", "").startswith("Bearer "):
            return error(401, "authentication_error", "x-api-key header is required")
        if not headers.get("anthropic-version"):
            return error(400, "invalid_request_error", "anthropic-version: header is required")
        if not isinstance(body.get("max_tokens"), int):
            return error(400, "invalid_request_error", "max_tokens: Field required")
        if any(isinstance(item, Mapping) and item.get("role") == "system" for item in body.get("messages", [])):
            return error(400, "invalid_request_error",
                         'messages: Unexpected role "system". The Messages API accepts a top-level `system` '
                         'parameter, not "system" as an input message role.')
        sampling = [name for name in ("temperature", "top_p", "top_k") if name in body]
        if sampling and body.get("model") in self.no_sampling_models:
            return error(400, "invalid_request_error", f"`{sampling[0]}` is deprecated for this model.")
        return None
