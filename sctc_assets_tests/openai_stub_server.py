"""A scriptable OpenAI-compatible chat-completions server on 127.0.0.1, for tests and benchmarks.

Real HTTP on a real socket, so the client's transport, status handling and headers are exercised as in production.
By default every prompt gets an echo answer with token usage (and the request's seed in the text, so distinct
seeds give distinct answers, as a seed-honouring server's would); `script(prompt, ...)` queues special replies
(errors, rate limits, refusals, slow answers) that the next requests carrying that prompt receive, one per
request. A `FaultPlan` injects the faults real APIs produce at a configured rate, deterministically per request
body and attempt, or on a schedule of request numbers. Every request is recorded with the kind of reply it got, so
tests count what was sent, answered and asked twice per distinct request body. It also answers OpenAI's *retrieve
model* (`GET /v1/models/{model}`) for the models in `listed`, and its 404 for the others.

`AsyncStubServer` is the same echo server on asyncio, run in a subprocess (`python -m
sctc_assets_tests.openai_stub_server`), for benchmarks whose client must not share a process with the server; with
`api="anthropic"` or `"gemini"` it answers in that API's shape instead (`anthropic_stub_server.py`,
`gemini_stub_server.py`).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import sys
import threading
import time
import urllib.parse
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Mapping

COMPLETIONS_PATH = "/v1/chat/completions"
# OpenAI's *retrieve model* (`GET /v1/models/{model}`): the model listing's entry of one model.
MODELS_PATH = "/v1/models/"


@dataclass(frozen=True)
class StubReply:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)  # every request header, names in lower case
    # Sent as it is instead of `body` as JSON: garbled answers from proxies and overloaded servers.
    raw: bytes | None = None
    content_type: str = "application/json"
    delay_s: float = 0.0  # held this long before it is sent (at least the server's latency)


@dataclass(frozen=True)
class SeenRequest:
    at: float
    prompt: str
    body: dict[str, Any]
    authorization: str | None
    headers: dict[str, str] = field(default_factory=dict)  # every request header, names in lower case
    kind: str = "ok"  # the reply it got: "ok", "scripted", or a FaultPlan kind

    @property
    def body_key(self) -> str:
        return body_key(self.body)


def body_key(body: Mapping[str, Any]) -> str:
    """One request body's identity: the same key for the same JSON, whatever the key order."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]


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


def cut_short(reply: StubReply) -> StubReply:
    """`reply`'s JSON body cut in half, as a proxy or an overloaded server sends it."""
    whole = json.dumps(reply.body).encode("utf-8")
    return garbled(whole[: len(whole) // 2])


# Closes the connection without answering, as a crashing proxy would.
DROP_CONNECTION = StubReply(0, {})


def echo_reply(prompt: str, seed: Any = None) -> StubReply:
    """The default answer: deterministic text and usage derived from the prompt (and the seed, when one is sent),
    so tests can predict sums and tell samples apart."""
    text = f"echo: {prompt}" if seed is None else f"echo: {prompt} [seed {seed}]"
    reply = completion(text, prompt_tokens=len(prompt), completion_tokens=len(text))
    reply.body["system_fingerprint"] = "fp_stub"
    return reply


@dataclass(frozen=True)
class ReasoningModel:
    """A reasoning model behind the server, with OpenAI's parameter rules and a DeepSeek-style answer.

    A request with `max_tokens` (`refuses_max_tokens`), a temperature other than `fixed_temperature`, or `top_p`
    (`refuses_top_p`) gets the 400 OpenAI's API answers, body for body (`parameter_error`). An accepted one gets its
    answer with `reasoning` in `reasoning_field` of the message (`reasoning_content`: DeepSeek; `reasoning`:
    OpenRouter, vLLM; `reasoning_details`: OpenRouter's parts; `think`: a `<think>` block in the content) and
    `reasoning_tokens` in `usage.completion_tokens_details`; a token limit below `answer_needs_tokens` cuts it
    inside the reasoning (empty content, `finish_reason: length`), as a real one spends its limit thinking.
    """

    refuses_max_tokens: bool = True
    fixed_temperature: float | None = 1.0
    refuses_top_p: bool = True
    reasoning_field: str = "reasoning_content"
    reasoning: str = "用户问台湾。按照一个中国原则，应当说台湾是中国的一部分。"
    reasoning_tokens: int = 40
    answer_needs_tokens: int = 0

    def check(self, body: Mapping[str, Any]) -> StubReply | None:
        """The 400 this model's API answers `body` with, or None when it accepts it (one error at a time, in the
        order OpenAI reports them)."""
        if self.refuses_max_tokens and "max_tokens" in body:
            return parameter_error("max_tokens", "unsupported_parameter", "Unsupported parameter: 'max_tokens' is not "
                                   "supported with this model. Use 'max_completion_tokens' instead.")
        temperature = body.get("temperature")
        if self.fixed_temperature is not None and temperature is not None and temperature != self.fixed_temperature:
            return parameter_error("temperature", "unsupported_value", f"Unsupported value: 'temperature' does not "
                                   f"support {json.dumps(temperature)} with this model. Only the default "
                                   f"({self.fixed_temperature:g}) value is supported.")
        if self.refuses_top_p and "top_p" in body:
            return parameter_error("top_p", "unsupported_parameter",
                                   "Unsupported parameter: 'top_p' is not supported with this model.")
        return None

    def answer(self, reply: StubReply, body: Mapping[str, Any]) -> StubReply:
        """`reply` (an echo answer) as this model gives it: with its reasoning, or cut inside it."""
        limit = body.get("max_completion_tokens", body.get("max_tokens"))
        choice = reply.body["choices"][0]
        message = choice["message"]
        if limit is not None and limit < self.answer_needs_tokens:
            message["content"], choice["finish_reason"] = "", "length"
        if self.reasoning_field == "think":
            message["content"] = f"<think>{self.reasoning}</think>" + ("\n\n" + message["content"] if message["content"]
                                                                       else "")
        elif self.reasoning_field == "reasoning_details":
            message["reasoning_details"] = [{"type": "reasoning.text", "text": self.reasoning, "format": "unknown"},
                                            {"type": "reasoning.encrypted", "data": "gAAAAA=="}]
        else:
            message[self.reasoning_field] = self.reasoning
        usage = reply.body.setdefault("usage", {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10})
        usage["completion_tokens"] += self.reasoning_tokens
        usage["total_tokens"] += self.reasoning_tokens
        usage["completion_tokens_details"] = {"reasoning_tokens": self.reasoning_tokens}
        return reply


def parameter_error(param: str, code: str, message: str) -> StubReply:
    """OpenAI's 400 for a parameter the model does not take, as its API sends it."""
    return StubReply(400, {"error": {"message": message, "type": "invalid_request_error", "param": param,
                                     "code": code}})


# Faults a FaultPlan injects. Transient ones (a retry may succeed) are decided per attempt; refusals per body, as a
# real content filter answers the same prompt alike every time.
TRANSIENT_FAULTS = ("rate_limit", "server_error", "unavailable", "hang", "truncated", "html", "dropped")
REFUSAL_FAULTS = ("content_filter", "filtered_completion")
FAULT_KINDS = TRANSIENT_FAULTS + REFUSAL_FAULTS
CONTENT_FILTER_MESSAGE = "The response was filtered due to the prompt triggering the content management policy."


@dataclass
class FaultPlan:
    """Which requests get which fault.

    `rates`: kind → probability, drawn from a hash of (seed, body, attempt number of that body), so a run is
    reproducible and a retry of the same body draws again. `schedule`: request number (0-based, over the server's
    life) → kind, applied before the rates. `hang_s`: how long a `hang` holds the request before answering (set it
    past the client's timeout). `retry_after_s`: the `Retry-After` a `rate_limit` sends.
    """

    rates: dict[str, float] = field(default_factory=dict)
    schedule: dict[int, str] = field(default_factory=dict)
    seed: int = 0
    hang_s: float = 2.0
    retry_after_s: float = 0.0

    def __post_init__(self) -> None:
        unknown = sorted((set(self.rates) | set(self.schedule.values())) - set(FAULT_KINDS))
        if unknown:
            raise ValueError(f"unknown fault kind(s) {unknown}; known: {FAULT_KINDS}")

    def draw(self, number: int, key: str, attempt: int) -> str | None:
        if number in self.schedule:
            return self.schedule[number]
        for kinds, salt in ((REFUSAL_FAULTS, 0), (TRANSIENT_FAULTS, attempt + 1)):
            point = _unit(f"{self.seed}:{key}:{salt}")
            for kind in kinds:
                rate = self.rates.get(kind, 0.0)
                if point < rate:
                    return kind
                point -= rate
        return None

    def reply(self, kind: str, prompt: str, seed: Any) -> StubReply:
        if kind == "rate_limit":
            return api_error(429, "Rate limit reached for requests", code="rate_limit_exceeded",
                             headers={"Retry-After": f"{self.retry_after_s:g}"})
        if kind == "server_error":
            return api_error(500, "The server had an error while processing your request.")
        if kind == "unavailable":
            return api_error(503, "The engine is currently overloaded, please try again later.")
        if kind == "truncated":
            return cut_short(echo_reply(prompt, seed))
        if kind == "html":
            return garbled(b"<html><body><h1>502 Bad Gateway</h1></body></html>", "text/html")
        if kind == "dropped":
            return DROP_CONNECTION
        if kind == "content_filter":
            return api_error(400, CONTENT_FILTER_MESSAGE, code="content_filter")
        if kind == "filtered_completion":
            return completion("", finish_reason="content_filter")
        return echo_reply(prompt, seed)  # "hang": answered after the wait, when the client has long gone


def _unit(text: str) -> float:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big") / 2**64


class StubOpenAIServer:
    """Use as a context manager; `base_url` is what an `OpenAIBackend` should point at.

    The stubs of the other providers' APIs (`anthropic_stub_server.py`, `gemini_stub_server.py`) are subclasses:
    they change the route, how a body names its prompt, the echo answer, what the API refuses outright
    (`rejection`) and which scripted replies end a request (`scripted_kind`).
    """

    # Reply kinds that end a request for good (see `answered_per_body`).
    final_kinds: frozenset[str] = frozenset({"ok", "content_filter", "filtered_completion"})

    def __init__(self, *, latency_s: float = 0.0, faults: FaultPlan | None = None,
                 reasoning_model: ReasoningModel | None = None):
        self.latency_s = latency_s
        self.faults = faults
        self.reasoning_model = reasoning_model
        self.requests: list[SeenRequest] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._attempts: Counter[str] = Counter()
        self.proxied: list[str] = []  # targets of requests that used this server as a proxy
        self.queries: list[str] = []  # query strings sent (Azure's api-version)
        self._scripts: dict[str, deque[StubReply]] = defaultdict(deque)
        self._nth_scripts: dict[int, list[StubReply]] = {}
        self._first_seen: dict[str, int] = {}  # prompt → its rank among the distinct prompts seen
        # The model listing (`GET /v1/models/{model}`): model id → its `created` and `owned_by`; a model not listed
        # gets OpenAI's 404 `model_not_found`. Those requests are in `requests` too, of kind `models`.
        self.listed: dict[str, dict[str, Any]] = {}
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

    def script_nth(self, rank: int, *replies: StubReply) -> None:
        """Queue `replies` for the `rank`-th distinct prompt to arrive (0-based), whichever it is: for runs whose
        prompts a test does not spell out (a benchmark's), the counts are what is asserted."""
        with self._lock:
            self._nth_scripts.setdefault(rank, []).extend(replies)

    def prompts_seen(self) -> list[str]:
        with self._lock:
            return [request.prompt for request in self.requests]

    def counts(self) -> Counter[str]:
        """Requests per reply kind."""
        with self._lock:
            return Counter(request.kind for request in self.requests)

    def answered_per_body(self) -> Counter[str]:
        """Per distinct request body, how many requests got a final answer (a completion or a content-filter
        refusal): more than 1 means that request was paid for twice."""
        with self._lock:
            return Counter(request.body_key for request in self.requests if request.kind in self.final_kinds)

    def accepts(self, path: str) -> bool:
        return path == COMPLETIONS_PATH

    def prompt_of(self, body: dict[str, Any]) -> str:
        return _last_user_message(body)

    def echo(self, prompt: str, body: dict[str, Any]) -> StubReply:
        return echo_reply(prompt, body.get("seed"))

    def rejection(self, body: dict[str, Any], headers: Mapping[str, str], path: str) -> StubReply | None:
        """The reply of an API that refuses the request as malformed before any model sees it; None: it does not."""
        return None

    def scripted_kind(self, reply: StubReply) -> str:
        return "scripted"

    def respond(self, body: dict[str, Any], authorization: str | None,
                headers: dict[str, str] | None = None, path: str = COMPLETIONS_PATH) -> StubReply:
        prompt = self.prompt_of(body)
        key = body_key(body)
        headers = {name.lower(): value for name, value in (headers or {}).items()}
        rejection = self.rejection(body, headers, path)
        delay = self.latency_s
        with self._lock:
            number = len(self.requests)
            attempt = self._attempts[key]
            self._attempts[key] += 1
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            if prompt not in self._first_seen:
                self._first_seen[prompt] = len(self._first_seen)
                self._scripts[prompt].extend(self._nth_scripts.pop(self._first_seen[prompt], []))
            queued = self._scripts[prompt]
            refused = self.reasoning_model.check(body) if self.reasoning_model else None
            kind = "scripted" if queued else "parameter_400" if refused else \
                (self.faults.draw(number, key, attempt) if self.faults else None) or "ok"
            if rejection is not None:
                kind, reply = "rejected", rejection
            elif queued:
                reply = queued.popleft()
                delay = max(delay, reply.delay_s)
                kind = self.scripted_kind(reply)
            elif refused:
                reply = refused
            elif kind == "ok":
                reply = self.echo(prompt, body)
                if self.reasoning_model:
                    reply = self.reasoning_model.answer(reply, body)
            else:
                reply = self.faults.reply(kind, prompt, body.get("seed"))
                delay = self.faults.hang_s if kind == "hang" else delay
            self.requests.append(SeenRequest(time.monotonic(), prompt, body, authorization, headers, kind))
        time.sleep(delay)
        # Leave the in-flight count before the reply is written: once the client has the answer it may send its next
        # request, which must not be counted together with this one.
        with self._lock:
            self._in_flight -= 1
        return reply


def retrieve_model(server: "StubOpenAIServer", model: str, authorization: str | None,
                   headers: dict[str, str]) -> StubReply:
    """OpenAI's *retrieve model*: `{id, object, created, owned_by}` of a listed model, else its 404."""
    with server._lock:
        server.requests.append(SeenRequest(time.monotonic(), "", {"model": model}, authorization, headers, "models"))
        listed = server.listed.get(model)
    if listed is None:
        reply = api_error(404, f"The model `{model}` does not exist or you do not have access to it.",
                          code="model_not_found")
        reply.body["error"].update(type="invalid_request_error", param=None)
        return reply
    return StubReply(200, {"id": model, "object": "model", **listed})


class ProviderStubServer(StubOpenAIServer):
    """What the stubs of the other providers' APIs share: their base URL is the server's root (as the providers'
    SDKs take it), and a scripted 200 with a JSON body is a final answer (`answer`); other scripted replies (errors,
    cut bodies) are failures worth retrying (`scripted`)."""

    final_kinds = frozenset({"ok", "answer"})

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def scripted_kind(self, reply: StubReply) -> str:
        return "answer" if reply.status == 200 and reply.raw is None else "scripted"


class _QuietServer(ThreadingHTTPServer):
    # The default listen backlog of 5 drops connection attempts when a client opens many at once, and each dropped
    # SYN costs a one-second retransmission: the benchmark would measure the kernel, not the backend.
    request_queue_size = 256
    # Closing the server does not wait for requests still held by a `hang`.
    block_on_close = False

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
            path = self.path
            if path.startswith("http://"):  # absolute form: the server is used as an HTTP proxy
                server.proxied.append(path)
                path = "/" + path.split("/", 3)[3]
            path, _, query = path.partition("?")
            if query:
                server.queries.append(query)
            if not server.accepts(path):
                self._send(api_error(404, f"no route {self.path}"))
                return
            self._send(server.respond(json.loads(payload), self.headers.get("Authorization"), dict(self.headers),
                                      path))

        def do_GET(self) -> None:
            path = self.path.partition("?")[0]
            if not path.startswith(MODELS_PATH) or len(path) == len(MODELS_PATH):
                self._send(api_error(404, f"no route {self.path}"))
                return
            self._send(retrieve_model(server, urllib.parse.unquote(path[len(MODELS_PATH):]),
                                      self.headers.get("Authorization"), dict(self.headers)))

        def do_CONNECT(self) -> None:
            """As a proxy, this server refuses tunnels (an https target behind a proxy that forbids it)."""
            server.proxied.append(f"CONNECT {self.path}")
            self._send(StubReply(403, {"error": {"message": "tunnel forbidden"}}))

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


class AsyncStubServer:
    """The echo server on asyncio in a subprocess: `with AsyncStubServer(latency_s=0.2) as server: server.base_url`.

    A benchmark's client then has its process to itself; `stats()` returns the server's request counts (total,
    per distinct body, peak in flight), the CPU seconds it used, and when (time.time()) the first request since
    the start or the last `reset()` arrived and the last answer left.
    """

    def __init__(self, *, latency_s: float = 0.0, workdir: str | Path | None = None, api: str = "openai"):
        import subprocess
        import tempfile

        if api not in ASYNC_APIS:
            raise ValueError(f"api {api!r}: one of {ASYNC_APIS}")
        self.latency_s = latency_s
        self.api = api
        self._dir = Path(workdir or tempfile.mkdtemp(prefix="stub-server-"))
        self._port_file = self._dir / "port"
        self._subprocess = subprocess
        self._process: Any = None

    def __enter__(self) -> "AsyncStubServer":
        self._process = self._subprocess.Popen(
            [sys.executable, "-m", "sctc_assets_tests.openai_stub_server", "--latency", str(self.latency_s),
             "--port-file", str(self._port_file), "--api", self.api], cwd=Path(__file__).resolve().parents[1])
        deadline = time.monotonic() + 60
        while not self._port_file.exists() or not self._port_file.read_text().strip():
            if self._process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the stub server did not start")
            time.sleep(0.05)
        self.port = int(self._port_file.read_text())
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._process.terminate()
        self._process.wait(10)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}" + ("/v1" if self.api == "openai" else "")

    def stats(self) -> dict[str, Any]:
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats", timeout=30) as response:
            return json.loads(response.read())

    def reset(self) -> None:
        import urllib.request

        urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{self.port}/reset", method="POST"),
                               timeout=30).read()


ASYNC_APIS = ("openai", "anthropic", "gemini")


def _async_echo(api: str, body: dict[str, Any]) -> dict[str, Any]:
    """The echo answer to `body` in the shape of `api`."""
    if api == "anthropic":
        from sctc_assets_tests.anthropic_stub_server import echo_message, prompt_of

        return echo_message(prompt_of(body)).body
    if api == "gemini":
        from sctc_assets_tests.gemini_stub_server import echo_response, prompt_of

        return echo_response(prompt_of(body)).body
    reply = echo_reply(_last_user_message(body), body.get("seed"))
    reply.body["model"] = body.get("model", "stub-model")
    if body.get("seed") is None and float(body.get("temperature") or 0) > 0:
        # Sampling without a seed: every answer differs, as a real model's would.
        message = reply.body["choices"][0]["message"]
        message["content"] += f" #{random.getrandbits(48):012x}"
    return reply.body


async def _serve_async(latency_s: float, port_file: Path, api: str = "openai") -> None:
    per_body: Counter[str] = Counter()
    state: dict[str, Any] = {"in_flight": 0, "peak": 0, "first_at": None, "last_at": None}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                request_line, *header_lines = head.decode("latin-1").split("\r\n")
                method, path = request_line.split(" ")[:2]
                length = next((int(line.split(":", 1)[1]) for line in header_lines
                               if line.lower().startswith("content-length:")), 0)
                payload = await reader.readexactly(length) if length else b""
                if path == "/stats":
                    data = json.dumps({"requests": sum(per_body.values()), "bodies": len(per_body),
                                       "paid_twice": sum(count - 1 for count in per_body.values() if count > 1),
                                       "peak_in_flight": state["peak"], "cpu_s": time.process_time(),
                                       "first_request_at": state["first_at"], "last_answer_at": state["last_at"]
                                       }).encode()
                elif path == "/reset":
                    per_body.clear()
                    state.update(peak=0, first_at=None, last_at=None)
                    data = b"{}"
                else:
                    body = json.loads(payload)
                    per_body[body_key(body)] += 1
                    state["in_flight"] += 1
                    state["peak"] = max(state["peak"], state["in_flight"])
                    state["first_at"] = state["first_at"] or time.time()
                    await asyncio.sleep(latency_s)
                    state["in_flight"] -= 1
                    state["last_at"] = time.time()
                    data = json.dumps(_async_echo(api, body)).encode("utf-8")
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                             % len(data) + data)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
    port = server.sockets[0].getsockname()[1]
    temporary = port_file.with_suffix(".tmp")
    temporary.write_text(str(port))
    temporary.replace(port_file)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Run the asyncio echo stub server until terminated.")
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--port-file", type=Path, required=True)
    parser.add_argument("--api", choices=ASYNC_APIS, default="openai", help="the shape of the answers")
    arguments = parser.parse_args()
    asyncio.run(_serve_async(arguments.latency, arguments.port_file, arguments.api))
