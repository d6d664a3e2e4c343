"""A small asyncio HTTP/1.1 client (h11 over asyncio streams) for JSON requests to one endpoint.

Why not the openai SDK or httpx: measured by `bench/openai_concurrency.py`, they cost 2.5–5 ms of CPU per request
(httpcore's pool scans every connection on each request), which caps a 64-wide run against a 200 ms endpoint at a
fraction of its ideal speed-up; this client costs about 0.4 ms. It does what the backend needs and no more: one
keep-alive connection per concurrent caller, TLS with the system's certificates, `$HTTPS_PROXY`/`$HTTP_PROXY`/
`$NO_PROXY` (CONNECT tunnels for https, absolute-form requests for http), a timeout over the whole exchange.
Failures are raised as `TransportError`/`TimeoutError`; statuses and bodies are the caller's to judge.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import sys
import urllib.request
from dataclasses import dataclass
from typing import AsyncIterator, Mapping
from urllib.parse import unquote, urlsplit

import h11

_READ_SIZE = 65536


class TransportError(Exception):
    """The exchange failed below HTTP: refused or dropped connection, TLS failure, a malformed HTTP response."""


@dataclass(frozen=True)
class HttpResponse:
    status: int
    headers: Mapping[str, str]  # names in lower case
    body: bytes


@dataclass(frozen=True)
class _Origin:
    scheme: str
    host: str
    port: int

    @classmethod
    def parse(cls, url: str) -> "_Origin":
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        return cls(parts.scheme, parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))

    @property
    def authority(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer
        self.h11 = h11.Connection(h11.CLIENT)

    def reusable(self) -> bool:
        return self.h11.our_state is h11.IDLE and not self.reader.at_eof() and not self.writer.is_closing()

    def close(self) -> None:
        self.writer.close()


def _default_ssl_context() -> ssl.SSLContext:
    try:  # the operating system's trust store, as the openai SDK uses
        import truststore

        return truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    except ImportError:
        return ssl.create_default_context()


class HttpClient:
    """Requests to `base_url` (POST, GET, downloads streamed by `stream`); use as an async context manager. Callers
    bound the concurrency themselves."""

    def __init__(self, base_url: str, *, timeout_s: float, user_agent: str = "sctc-assets",
                 ssl_context: ssl.SSLContext | None = None, proxy: str | None = None, use_env_proxy: bool = True):
        self.base_url = base_url.rstrip("/") if "?" not in base_url else base_url
        self._origin = _Origin.parse(self.base_url)
        parts = urlsplit(self.base_url)
        self._path = parts.path.rstrip("/")
        self._query = f"?{parts.query}" if parts.query else ""  # e.g. Azure's ?api-version=…
        self._timeout_s = timeout_s
        self._user_agent = user_agent
        self._ssl = ssl_context if ssl_context is not None or self._origin.scheme == "http" else _default_ssl_context()
        self._proxy = _Origin.parse(proxy) if proxy else (self._env_proxy() if use_env_proxy else None)
        self._proxy_auth = _proxy_authorization(proxy or (self._env_proxy_url() if use_env_proxy else None))
        self._idle: list[_Connection] = []

    async def __aenter__(self) -> "HttpClient":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    def _env_proxy_url(self) -> str | None:
        if urllib.request.proxy_bypass_environment(self._origin.host):
            return None
        return urllib.request.getproxies_environment().get(self._origin.scheme)

    def _env_proxy(self) -> _Origin | None:
        url = self._env_proxy_url()
        return _Origin.parse(url if "://" in url else f"http://{url}") if url else None

    async def post(self, path: str, body: bytes, headers: Mapping[str, str]) -> HttpResponse:
        """POST `body` to `base_url + path`; the timeout covers connecting, sending and reading the whole answer."""
        return await self.request("POST", path, body, headers)

    async def request(self, method: str, path: str, body: bytes, headers: Mapping[str, str]) -> HttpResponse:
        """`method` (GET, POST, DELETE) `base_url + path` with `body`; the timeout covers the whole exchange."""
        try:
            return await asyncio.wait_for(self._request(method, path, body, headers), self._timeout_s)
        except asyncio.TimeoutError:
            raise TimeoutError(f"no complete answer within {self._timeout_s:g}s") from None

    async def _request(self, method: str, path: str, body: bytes, headers: Mapping[str, str]) -> HttpResponse:
        connection = await self._checkout()
        try:
            response = await self._exchange(connection, path, body, headers, method=method)
        except BaseException:
            connection.close()  # mid-exchange (an error, a timeout, a cancellation): its state is unknown
            raise
        self._release(connection)
        return response

    def _release(self, connection: _Connection) -> None:
        if connection.h11.our_state is h11.DONE and connection.h11.their_state is h11.DONE:
            connection.h11.start_next_cycle()
            self._idle.append(connection)
        else:
            connection.close()

    async def stream(self, method: str, path: str, headers: Mapping[str, str],
                     body: bytes = b"") -> tuple[HttpResponse, AsyncIterator[bytes]]:
        """Send a request and read the status and headers only: the body comes from the returned iterator chunk by
        chunk (a large download is never held whole), each read bounded by the timeout. The response's `body` is
        empty. Read the iterator to its end (or close it) before the next request."""
        connection = await self._checkout()
        try:
            head = await asyncio.wait_for(self._send_and_head(connection, path, body, headers, method),
                                          self._timeout_s)
        except asyncio.TimeoutError:
            connection.close()
            raise TimeoutError(f"no answer within {self._timeout_s:g}s") from None
        except BaseException:
            connection.close()
            raise

        async def chunks() -> AsyncIterator[bytes]:
            finished = False
            try:
                while True:
                    try:
                        chunk = await asyncio.wait_for(self._next_chunk(connection), self._timeout_s)
                    except asyncio.TimeoutError:
                        raise TimeoutError(f"the download stalled for {self._timeout_s:g}s") from None
                    if chunk is None:
                        finished = True
                        return
                    yield chunk
            finally:
                if finished:
                    self._release(connection)
                else:
                    connection.close()

        return head, chunks()

    async def _checkout(self) -> _Connection:
        while self._idle:
            connection = self._idle.pop()
            if connection.reusable():
                return connection
            connection.close()  # the server closed it while idle
        return await self._connect()

    async def _connect(self) -> _Connection:
        origin = self._origin
        try:
            if self._proxy is None:
                reader, writer = await asyncio.open_connection(
                    origin.host, origin.port, ssl=self._ssl if origin.scheme == "https" else None)
            else:
                reader, writer = await asyncio.open_connection(self._proxy.host, self._proxy.port)
                if origin.scheme == "https":
                    await self._tunnel(reader, writer)
                    if sys.version_info < (3, 11):
                        raise TransportError("https through a proxy needs Python 3.11 or later")
                    await writer.start_tls(self._ssl, server_hostname=origin.host)
        except (OSError, ssl.SSLError) as error:
            where = f"{origin.host}:{origin.port}" + (f" through proxy {self._proxy.host}:{self._proxy.port}"
                                                      if self._proxy else "")
            raise TransportError(f"cannot connect to {where}: {type(error).__name__}: {error}") from None
        return _Connection(reader, writer)

    async def _tunnel(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        target = f"{self._origin.host}:{self._origin.port}"
        lines = [f"CONNECT {target} HTTP/1.1", f"Host: {target}"]
        if self._proxy_auth:
            lines.append(f"Proxy-Authorization: {self._proxy_auth}")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        head = await reader.readuntil(b"\r\n\r\n")
        status = head.split(b" ", 2)[1:2]
        if status != [b"200"]:
            first = head.split(b"\r\n", 1)[0].decode("latin-1", "replace")
            raise TransportError(f"proxy {self._proxy.host}:{self._proxy.port} refused the tunnel: {first}")

    async def _exchange(self, connection: _Connection, path: str, body: bytes,
                        headers: Mapping[str, str], *, method: str = "POST") -> HttpResponse:
        head = await self._send_and_head(connection, path, body, headers, method)
        chunks = []
        while True:
            chunk = await self._next_chunk(connection)
            if chunk is None:
                return HttpResponse(head.status, head.headers, b"".join(chunks))
            chunks.append(chunk)

    async def _send_and_head(self, connection: _Connection, path: str, body: bytes, headers: Mapping[str, str],
                             method: str) -> HttpResponse:
        """Send the request and read up to the response's head; the body is left for `_next_chunk`."""
        if self._proxy is not None and self._origin.scheme == "http":
            target = f"http://{self._origin.authority}{self._path}{path}{self._query}"  # absolute form, for the proxy
        else:
            target = f"{self._path}{path}{self._query}"
        request_headers = [("Host", self._origin.authority), ("User-Agent", self._user_agent),
                           ("Content-Length", str(len(body))), *headers.items()]
        if self._proxy_auth and self._origin.scheme == "http":
            request_headers.append(("Proxy-Authorization", self._proxy_auth))
        state = connection.h11
        try:
            connection.writer.write(state.send(h11.Request(method=method, target=target, headers=request_headers))
                                    + state.send(h11.Data(data=body)) + state.send(h11.EndOfMessage()))
            await connection.writer.drain()
            while True:
                event = state.next_event()
                if event is h11.NEED_DATA:
                    data = await connection.reader.read(_READ_SIZE)
                    if not data and state.their_state is h11.SEND_RESPONSE:
                        raise TransportError("the server closed the connection without answering")
                    state.receive_data(data)
                elif isinstance(event, h11.Response):
                    return HttpResponse(event.status_code, {name.decode("latin-1").lower(): value.decode("latin-1")
                                                            for name, value in event.headers}, b"")
                elif isinstance(event, h11.ConnectionClosed):
                    raise TransportError("the server closed the connection without answering")
        except h11.RemoteProtocolError as error:
            raise TransportError(f"malformed HTTP response: {error}") from None
        except (OSError, asyncio.IncompleteReadError) as error:
            raise TransportError(f"{type(error).__name__}: {error}") from None

    async def _next_chunk(self, connection: _Connection) -> bytes | None:
        """The next piece of the response body, or None at its end."""
        state = connection.h11
        try:
            while True:
                event = state.next_event()
                if event is h11.NEED_DATA:
                    state.receive_data(await connection.reader.read(_READ_SIZE))
                elif isinstance(event, h11.Data):
                    return bytes(event.data)
                elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                    return None
        except h11.RemoteProtocolError as error:
            raise TransportError(f"malformed HTTP response: {error}") from None
        except (OSError, asyncio.IncompleteReadError) as error:
            raise TransportError(f"{type(error).__name__}: {error}") from None


def _proxy_authorization(url: str | None) -> str | None:
    if not url:
        return None
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.username is None:
        return None
    credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode("utf-8")
    return "Basic " + base64.b64encode(credentials).decode("ascii")
