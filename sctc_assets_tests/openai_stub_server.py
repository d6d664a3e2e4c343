"""A scriptable OpenAI-compatible chat-completions server on 127.0.0.1, for tests and benchmarks.

Real HTTP on a real socket, so the SDK's transport, status handling and headers are exercised as in production.
By default every prompt gets an echo answer with token usage; `script(prompt, ...)` queues special replies
(errors, rate limits, refusals) that the next requests carrying that prompt receive, one per request.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

COMPLETIONS_PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class StubReply:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)  # every request header, names in lower case
    # Sent as it is instead of `body` as JSON: garbled answers from proxies and overloaded servers.
    raw: bytes | None = None
    content_type: str = "application/json"


@dataclass(frozen=True)
class SeenRequest:
    at: float
    prompt: str
    body: dict[str, Any]
    authorization: str | None
    headers: dict[str, str] = field(default_factory=dict)  # every request header, names in lower case


def completion(
    text: str | None,
    *,
    prompt_tokens: int | None = 7,
    completion_tokens: int | None = 3,
    finish_reason: str = "stop",
    model: str = "stub-model",
) -> StubReply:
    body: dict[str, Any] = {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason}
        ],
    }
    if prompt_tokens is not None and completion_tokens is not None:
        body["usage"] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
    return StubReply(200, body)


def api_error(
    status: int, message: str, *, code: str | None = None, headers: dict[str, str] | None = None
) -> StubReply:
    return StubReply(status, {"error": {"message": message, "type": "stub_error", "code": code}}, headers or {})


def garbled(raw: bytes, content_type: str = "application/json", status: int = 200) -> StubReply:
    return StubReply(status, {}, raw=raw, content_type=content_type)


# Closes the connection without answering, as a crashing proxy would.
DROP_CONNECTION = StubReply(0, {})


def echo_reply(prompt: str) -> StubReply:
    """The default answer: deterministic text and usage derived from the prompt, so tests can predict sums."""
    text = f"echo: {prompt}"
    return completion(text, prompt_tokens=len(prompt), completion_tokens=len(text))


class StubOpenAIServer:
    """Use as a context manager; `base_url` is what an `OpenAIBackend` should point at."""

    def __init__(self, *, latency_s: float = 0.0):
        self.latency_s = latency_s
        self.requests: list[SeenRequest] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._scripts: dict[str, deque[StubReply]] = defaultdict(deque)
        self._lock = threading.Lock()
        self._httpd = _QuietServer(("127.0.0.1", 0), _handler_for(self))
        # A short poll interval: `shutdown()` waits for the next poll, which would add half a second to every test.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="openai-stub", daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> "StubOpenAIServer":
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def script(self, prompt: str, *replies: StubReply) -> None:
        with self._lock:
            self._scripts[prompt].extend(replies)

    def prompts_seen(self) -> list[str]:
        with self._lock:
            return [request.prompt for request in self.requests]

    def respond(self, body: dict[str, Any], authorization: str | None,
                headers: dict[str, str] | None = None) -> StubReply:
        prompt = _last_user_message(body)
        with self._lock:
            self.requests.append(SeenRequest(time.monotonic(), prompt, body, authorization,
                                             {name.lower(): value for name, value in (headers or {}).items()}))
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            queued = self._scripts[prompt]
            reply = queued.popleft() if queued else echo_reply(prompt)
        time.sleep(self.latency_s)
        # Leave the in-flight count before the reply is written: once the client has the answer it may send its next
        # request, which must not be counted together with this one.
        with self._lock:
            self._in_flight -= 1
        return reply


class _QuietServer(ThreadingHTTPServer):
    # The default listen backlog of 5 drops connection attempts when a client opens many at once, and each dropped
    # SYN costs a one-second retransmission: the benchmark would measure the kernel, not the backend.
    request_queue_size = 256

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients hanging up (an interrupted run, a closed connection pool) are expected; anything else is shown."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _last_user_message(body: dict[str, Any]) -> str:
    users = [message.get("content", "") for message in body.get("messages", []) if message.get("role") == "user"]
    return users[-1] if users else ""


def _handler_for(server: StubOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # Keep-alive, as real endpoints do; every reply carries Content-Length so connections can be reused.
        protocol_version = "HTTP/1.1"
        # Headers and body leave in separate writes; with Nagle's algorithm on, the client's delayed ACK would add
        # ~40 ms to every reply on a reused connection.
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            payload = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.path != COMPLETIONS_PATH:
                self._send(api_error(404, f"no route {self.path}"))
                return
            self._send(server.respond(json.loads(payload), self.headers.get("Authorization"), dict(self.headers)))

        def _send(self, reply: StubReply) -> None:
            if reply == DROP_CONNECTION:
                self.close_connection = True
                return
            data = reply.raw if reply.raw is not None else json.dumps(reply.body).encode("utf-8")
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(data)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            """Silent: a test run or benchmark would otherwise print one line per request."""

    return Handler
