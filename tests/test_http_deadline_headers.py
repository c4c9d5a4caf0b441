"""The whole-reply deadline of the LLM and embedding clients covers the status line and
headers too: a server trickling its headers (each line well within a read's timeout) held a
call, an interactive search's query embedding included, for as long as it went on."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import openai
import pytest

from everos_reflect.embedding.base import answer_waiting
from everos_reflect.embedding.openai_embed import OpenAIEmbedder
from everos_reflect.errors import ProviderUnavailable
from everos_reflect.http_deadline import deadline_http_client

#: Header lines the server sends, one every LINE_SECONDS: ~5 s in all, ten times the deadline.
LINES, LINE_SECONDS = 100, 0.05


class TricklingServer:
    """Answers one request with a status line, then a header line every LINE_SECONDS;
    ``finished`` is set once it sent them all."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.finished = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            conn.recv(65536)
            try:
                conn.sendall(b"HTTP/1.1 200 OK\r\n")
                for _ in range(LINES):
                    conn.sendall(b"X-Wait: 1\r\n")
                    time.sleep(LINE_SECONDS)
                conn.sendall(b"Content-Length: 0\r\n\r\n")
            except OSError:  # the client went away before the last line
                return
            self.finished.set()


@pytest.fixture
def server() -> Iterator[TricklingServer]:
    trickling = TricklingServer()
    yield trickling
    trickling.sock.close()


def test_a_query_embedding_meeting_trickled_headers_times_out_at_the_deadline(
        server: TricklingServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HTTP_PROXY", raising=False)
    monkeypatch.delenv("http_proxy", raising=False)
    embedder = OpenAIEmbedder(model="m", dimensions=8, base_url=server.base_url, timeout=0.5,
                              retries=0)
    with pytest.raises(ProviderUnavailable, match="timed out"), answer_waiting():
        embedder.embed(["what does Andrew have"])
    assert not server.finished.is_set(), "the call waited for every header line"


def test_an_llm_call_meeting_trickled_headers_times_out_at_the_deadline(
        server: TricklingServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HTTP_PROXY", raising=False)
    monkeypatch.delenv("http_proxy", raising=False)
    client = openai.OpenAI(api_key="k", base_url=server.base_url, max_retries=0, timeout=30,
                           http_client=deadline_http_client(0.5))
    with pytest.raises(openai.APITimeoutError):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert not server.finished.is_set(), "the call waited for every header line"
