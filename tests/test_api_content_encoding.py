"""A request body sent compressed (``Content-Encoding: gzip``): the API reads no encoding, so
it answered "request body is not valid JSON: it is not UTF-8 (byte 0x8b at offset 1)", which
sends the client hunting for a bad character. Now a 415 names the encoding."""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.runtime import Runtime
from tests.api_client import ApiClient

BODY = json.dumps({"query": "dogs"}).encode()


@pytest.fixture
def call(root: Path) -> Iterator[ApiClient]:
    runtime = Runtime(root, embedder=HashEmbedder())
    yield ApiClient(runtime)
    runtime.close()


@pytest.mark.parametrize(("encoding", "body"), [
    ("gzip", gzip.compress(BODY)),
    ("deflate", zlib.compress(BODY)),
    ("br", b"\x8b\x07\x80" + BODY),
], ids=["gzip", "deflate", "br"])
def test_a_compressed_body_is_a_415_naming_its_encoding(
        call: ApiClient, encoding: str, body: bytes) -> None:
    resp = call("POST", "/api/v1/memory/search", content=body,
                headers={"content-type": "application/json", "content-encoding": encoding})
    assert resp.status_code == 415, resp.text
    assert resp.json()["error"] == {"code": "unsupported_media_type", "message": (
        f"the request body must be sent uncompressed; got Content-Encoding: '{encoding}'")}


@pytest.mark.parametrize("encoding", ["identity", "Identity", ""])
def test_a_body_marked_identity_or_no_encoding_is_read(call: ApiClient, encoding: str) -> None:
    resp = call("POST", "/api/v1/memory/search", content=BODY,
                headers={"content-type": "application/json", "content-encoding": encoding})
    assert resp.status_code == 200, resp.text
