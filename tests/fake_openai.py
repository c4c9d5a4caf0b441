"""A loopback fake of an OpenAI-compatible server, for tests of the real ``openai`` client.

A real HTTP server on 127.0.0.1 (ephemeral port, own thread) that speaks
``POST /v1/chat/completions`` and ``POST /v1/embeddings`` in the OpenAI wire format, replays a
script of replies, and records every request body.

Use it from a test module with one line (pytest registers the fixture, no import needed)::

    pytest_plugins = ["tests.fake_openai"]

    def test_something(fake_openai):
        fake_openai.script('{"title": "T", "content": "C"}', 429, fake_openai.Drop(),
                           fake_openai.Reply("...", delay=2))
        llm = OpenAILLM(model="m", base_url=fake_openai.base_url, ...)

Script items (consumed in order by chat requests; embeddings have their own queue):
- ``str`` — a 200 reply whose message content is that string; ``dict`` — the same, JSON-encoded;
- ``int`` — that HTTP status with an OpenAI-style error body;
- :class:`Reply`, :class:`Status`, :class:`Drop` — the explicit forms, with delays and options;
- a callable ``body -> item`` — build the reply from the request.
An empty chat queue answers 418 "no scripted reply left": a non-retryable error, so a test that
under-scripts fails loudly instead of retrying. Embeddings default to deterministic vectors.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Reply:
    """A 200 chat completion carrying ``content``."""

    content: str | None
    finish_reason: str = "stop"
    prompt_tokens: int = 11
    completion_tokens: int = 7
    delay: float = 0.0
    #: seconds between the body's bytes, sent one at a time (a server that trickles)
    trickle: float = 0.0


@dataclass
class Status:
    """A non-200 answer; ``body`` defaults to an OpenAI-style error naming the status."""

    code: int
    #: sent as it is when ``bytes`` (e.g. compressed, with a ``content-encoding`` header)
    body: dict[str, Any] | str | bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Drop:
    """Close the connection without answering (after ``delay``)."""

    delay: float = 0.0


Item = Reply | Status | Drop | str | dict | int | Callable[[dict[str, Any]], Any]


@dataclass
class Recorded:
    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    #: TCP_NODELAY on the server's socket (see ``_Handler.disable_nagle_algorithm``)
    nodelay: bool = False


class FakeOpenAI:
    """The server, its script and what it saw. Thread-safe; start() / stop() or the fixture.

    The script item types are reachable from the fixture (``fake_openai.Reply(...)``), so a test
    module needs no import of this module — importing it before pytest registers the plugin
    would cost it assertion rewriting.
    """

    Reply = Reply
    Status = Status
    Drop = Drop

    def __init__(self, *, latency: float = 0.0, embedding_dim: int = 8) -> None:
        #: seconds from a request's arrival to its answer, the reply's own making included
        self.latency = latency
        self.embedding_dim = embedding_dim
        self.requests: list[Recorded] = []
        self.in_flight = 0
        self.max_in_flight = 0
        #: ``(time.monotonic(), requests in flight)`` after every arrival and answer: how full
        #: the client kept its concurrency window, and when
        self.in_flight_log: list[tuple[float, int]] = []
        self._chat: deque[Item] = deque()
        self._embed: deque[Item] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- control --------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        assert self._server is not None, "server not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def script(self, *items: Item) -> None:
        """Queue replies for chat-completion requests."""
        with self._lock:
            self._chat.extend(items)

    def script_embeddings(self, *items: Item) -> None:
        """Queue replies for embedding requests (e.g. a 500); otherwise vectors are computed."""
        with self._lock:
            self._embed.extend(items)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._chat)

    def chat_bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.path.endswith("/chat/completions")]

    def start(self) -> FakeOpenAI:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping on an injected delay
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    # --- used by the handler ------------------------------------------------------------------

    def _next(self, queue: deque[Item]) -> Item | None:
        with self._lock:
            return queue.popleft() if queue else None

    def _enter(self, path: str, body: dict[str, Any], headers: dict[str, str],
               nodelay: bool) -> None:
        with self._lock:
            self.requests.append(Recorded(path, body, headers, nodelay))
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.in_flight_log.append((time.monotonic(), self.in_flight))

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1
            self.in_flight_log.append((time.monotonic(), self.in_flight))

    def _wait(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)


class _Handler(BaseHTTPRequestHandler):
    fake: FakeOpenAI
    protocol_version = "HTTP/1.1"
    # A reply goes out as two writes (headers, then body). With Nagle's algorithm on, the body
    # waits for the client to ACK the headers, which Linux delays by up to 40 ms: every call
    # took ~40 ms longer than ``latency``, more than the client's own overhead. Real servers
    # set TCP_NODELAY; so does this one.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
        pass

    def do_POST(self) -> None:
        arrived = time.monotonic()
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {"_unparsed": raw.decode("utf-8", "replace")}
        fake = self.fake
        nodelay = bool(self.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        fake._enter(self.path, body, {k.lower(): v for k, v in self.headers.items()}, nodelay)
        try:
            if self.path.endswith("/chat/completions"):
                item = _built(fake._next(fake._chat), body)
                fake._wait(fake.latency - (time.monotonic() - arrived))
                self._answer(item, body, chat=True)
            elif self.path.endswith("/embeddings"):
                item = _built(fake._next(fake._embed), body)
                fake._wait(fake.latency - (time.monotonic() - arrived))
                self._answer(item, body, chat=False)
            else:
                fake._wait(fake.latency)
                self._json(404, _error(404, f"no route {self.path}"))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout); nothing to answer
        finally:
            fake._leave()

    def _answer(self, item: Item | None, body: dict[str, Any], *, chat: bool) -> None:
        if item is None:
            if chat:
                self._json(418, _error(418, "fake_openai: no scripted reply left"))
            else:
                self._json(200, _embeddings(body, self.fake.embedding_dim))
            return
        if isinstance(item, str):
            item = Reply(item)
        elif isinstance(item, dict):
            item = Reply(json.dumps(item))
        elif isinstance(item, int):
            item = Status(item)
        self.fake._wait(item.delay)
        if isinstance(item, Drop):
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        elif isinstance(item, Status):
            payload = item.body if item.body is not None else _error(item.code, "scripted")
            self._json(item.code, payload, item.headers)
        else:
            self._json(200, _completion(body, item), trickle=item.trickle)

    def _json(self, code: int, payload: Any, headers: dict[str, str] | None = None,
              trickle: float = 0.0) -> None:
        if isinstance(payload, bytes):
            data = payload
        else:
            data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if not trickle:
            self.wfile.write(data)
            return
        for i in range(len(data)):
            try:
                self.wfile.write(data[i : i + 1])
                self.wfile.flush()
            except OSError:  # the client gave up
                return
            time.sleep(trickle)


def _built(item: Item | None, body: dict[str, Any]) -> Item | None:
    """A callable script item turned into the reply it builds for ``body`` (within the
    latency, as a real server's latency includes making its answer); others as they are."""
    if callable(item) and not isinstance(item, (Reply, Status, Drop)):
        return item(body)
    return item


def _error(code: int, message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "fake_error", "param": None, "code": code}}


def _completion(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": body.get("model", "fake"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.content},
                "finish_reason": reply.finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        },
    }


def fake_vector(text: str, dim: int) -> list[float]:
    """A deterministic unit vector for ``text`` (same text, same vector; nothing semantic)."""
    values: list[float] = []
    counter = 0
    while len(values) < dim:
        digest = hashlib.sha256(f"{counter}:{text}".encode()).digest()
        values.extend((b - 127.5) / 127.5 for b in digest)
        counter += 1
    values = values[:dim]
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [v / norm for v in values]


def _embeddings(body: dict[str, Any], default_dim: int) -> dict[str, Any]:
    texts = body.get("input", [])
    if isinstance(texts, str):
        texts = [texts]
    dim = int(body.get("dimensions") or default_dim)
    tokens = sum(len(str(t).split()) for t in texts)
    as_base64 = body.get("encoding_format") == "base64"  # the SDK's default: packed float32

    def encode(vector: list[float]) -> list[float] | str:
        if not as_base64:
            return vector
        return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()

    return {
        "object": "list",
        "model": body.get("model", "fake"),
        "data": [
            {"object": "embedding", "index": i, "embedding": encode(fake_vector(str(t), dim))}
            for i, t in enumerate(texts)
        ],
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A started FakeOpenAI, stopped after the test."""
    server = FakeOpenAI().start()
    try:
        yield server
    finally:
        server.stop()
