"""A scriptable stub of Google's Gemini API on 127.0.0.1 (`POST /v1beta/models/{model}:generateContent`).

It misbehaves as the real API does: a request without a key (`x-goog-api-key`) gets a 403
`PERMISSION_DENIED`, one without `contents` a 400 `INVALID_ARGUMENT`; `script(prompt, ...)` queues a blocked prompt
(`blocked()`: `promptFeedback.blockReason` and no candidates), an answer stopped with `finishReason: SAFETY`
(`safety_stop()`), a 429 `RESOURCE_EXHAUSTED` with `Retry-After` (`rate_limited()`), a 503 `UNAVAILABLE`
(`unavailable()`) or a body cut short (`cut_body()`) for the next requests carrying that prompt. Every other request
gets an echo answer with `usageMetadata`. Requests are recorded as by the OpenAI stub (`ProviderStubServer`; `ok` and
`answer` end a request).
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from sctc_assets_tests.openai_stub_server import ProviderStubServer, StubReply, cut_short

GENERATE_PATH = re.compile(r"^/v1beta/models/[^/:]+:generateContent$")


def response(text: str | None, *, finish_reason: str = "STOP", prompt_tokens: int = 7, output_tokens: int = 3,
             thought: str | None = None, model: str = "gemini-stub") -> StubReply:
    parts: list[dict[str, Any]] = []
    if thought is not None:
        parts.append({"text": thought, "thought": True})
    if text is not None:
        parts.append({"text": text})
    usage = {"promptTokenCount": prompt_tokens, "candidatesTokenCount": output_tokens,
             "totalTokenCount": prompt_tokens + output_tokens}
    return StubReply(200, {"candidates": [{"content": {"role": "model", "parts": parts},
                                           "finishReason": finish_reason, "index": 0}],
                           "usageMetadata": usage, "modelVersion": model, "responseId": "stub"})


def error(status: int, code_name: str, text: str, headers: dict[str, str] | None = None,
          details: list[dict[str, Any]] | None = None) -> StubReply:
    body: dict[str, Any] = {"error": {"code": status, "message": text, "status": code_name}}
    if details:
        body["error"]["details"] = details
    return StubReply(status, body, headers or {})


def blocked(reason: str = "PROHIBITED_CONTENT") -> StubReply:
    """A prompt the API will not answer: `promptFeedback.blockReason` and no candidates."""
    return StubReply(200, {"promptFeedback": {"blockReason": reason},
                           "usageMetadata": {"promptTokenCount": 7, "totalTokenCount": 7},
                           "modelVersion": "gemini-stub"})


def safety_stop() -> StubReply:
    return response(None, finish_reason="SAFETY", output_tokens=0)


def rate_limited(retry_after_s: float = 0.0) -> StubReply:
    return error(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota).",
                 {"Retry-After": f"{retry_after_s:g}"})


def unavailable() -> StubReply:
    return error(503, "UNAVAILABLE", "The model is overloaded. Please try again later.")


def cut_body(prompt: str = "") -> StubReply:
    return cut_short(echo_response(prompt))


def echo_response(prompt: str) -> StubReply:
    text = f"echo: {prompt}"
    return response(text, prompt_tokens=len(prompt), output_tokens=len(text))


def prompt_of(body: Mapping[str, Any]) -> str:
    users = [item for item in body.get("contents", []) if isinstance(item, Mapping) and item.get("role") == "user"]
    parts = users[-1].get("parts", []) if users else []
    return "".join(part.get("text", "") for part in parts if isinstance(part, Mapping))


class StubGeminiServer(ProviderStubServer):
    """Use as a context manager; `base_url` is what a `GeminiBackend` should point at."""


    def accepts(self, path: str) -> bool:
        return bool(GENERATE_PATH.match(path))

    def prompt_of(self, body: dict[str, Any]) -> str:
        return prompt_of(body)

    def echo(self, prompt: str, body: dict[str, Any]) -> StubReply:
        return echo_response(prompt)

    def rejection(self, body: dict[str, Any], headers: Mapping[str, str], path: str) -> StubReply | None:
        if not headers.get("x-goog-api-key"):
            return error(403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers. Please use API Key.")
        if not isinstance(body.get("contents"), list) or not body["contents"]:
            return error(400, "INVALID_ARGUMENT", "* GenerateContentRequest.contents: contents is not specified")
        return None
