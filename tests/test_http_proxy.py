"""The LLM and embedding clients reach their server through the proxy the environment names
(``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, ``NO_PROXY``), as the openai SDK's own client
does, and keep their whole-reply deadline there. Given a transport of its own, the HTTP
library ignores those variables: behind a proxy, neither could reach its server."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from everos_reflect.embedding.openai_embed import OpenAIEmbedder
from everos_reflect.http_deadline import deadline_http_client

pytest_plugins = ["tests.fake_openai"]

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


@pytest.fixture
def proxy(monkeypatch: pytest.MonkeyPatch, fake_openai: Any) -> Any:
    """The fake server, named the environment's HTTP proxy (it answers a proxied request as
    the server it names would)."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.setenv("HTTP_PROXY", fake_openai.base_url.removesuffix("/v1"))
    return fake_openai


def test_the_remote_embedder_goes_through_the_environments_proxy(proxy: Any) -> None:
    embedder = OpenAIEmbedder(model="m", dimensions=8, base_url="http://embedder.invalid/v1",
                              timeout=10.0, retries=0)
    assert embedder.embed(["hello"]).shape == (1, 8)
    assert [r.path for r in proxy.requests] == ["http://embedder.invalid/v1/embeddings"]


def test_a_reply_trickling_through_the_proxy_still_times_out(proxy: Any) -> None:
    proxy.script(proxy.Reply('{"title": "T", "content": "' + "x" * 400 + '"}', trickle=0.05))
    client = openai.OpenAI(api_key="k", base_url="http://llm.invalid/v1", max_retries=0,
                           timeout=0.5, http_client=deadline_http_client(0.5))
    with pytest.raises(openai.APITimeoutError):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert [r.path for r in proxy.requests] == ["http://llm.invalid/v1/chat/completions"]


def test_a_host_no_proxy_names_is_reached_directly(monkeypatch: pytest.MonkeyPatch,
                                                  proxy: Any) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    embedder = OpenAIEmbedder(model="m", dimensions=8, base_url=proxy.base_url, timeout=10.0,
                              retries=0)
    assert embedder.embed(["hello"]).shape == (1, 8)
    assert [r.path for r in proxy.requests] == ["/v1/embeddings"]
