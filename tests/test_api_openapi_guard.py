"""The API's own description is behind the bearer token, and nothing it serves needs the
network: Swagger UI and ReDoc load their scripts from a CDN, so they are not served."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.runtime import Runtime
from everos_reflect.settings import ServerSettings, Settings
from tests.api_client import ApiClient


def client(root: Path, token: str | None) -> Iterator[ApiClient]:
    settings = replace(Settings(), server=ServerSettings(token=token))
    runtime = Runtime(root, settings, embedder=HashEmbedder(64))
    yield ApiClient(runtime)
    runtime.close()


@pytest.fixture
def guarded(root: Path) -> Iterator[ApiClient]:
    yield from client(root, "s3cret-token")


@pytest.fixture
def open_api(root: Path) -> Iterator[ApiClient]:
    yield from client(root, None)


def test_the_openapi_document_needs_the_token_when_one_is_set(guarded: ApiClient) -> None:
    resp = guarded("GET", "/openapi.json")
    assert resp.status_code == 401
    assert resp.json()["error"]["code"] == "unauthorized"
    assert resp.headers["www-authenticate"] == "Bearer"
    wrong = guarded("GET", "/openapi.json", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    ok = guarded("GET", "/openapi.json", headers={"Authorization": "Bearer s3cret-token"})
    assert ok.status_code == 200
    assert "/api/v1/memory/search" in ok.json()["paths"]


def test_the_openapi_document_is_open_without_a_token(open_api: ApiClient) -> None:
    resp = open_api("GET", "/openapi.json")
    assert resp.status_code == 200
    assert "/openapi.json" not in resp.json()["paths"]


@pytest.mark.parametrize("token", ["s3cret-token", None])
@pytest.mark.parametrize("path", ["/docs", "/redoc", "/docs/oauth2-redirect"])
def test_no_page_that_loads_scripts_from_a_cdn_is_served(
        root: Path, token: str | None, path: str) -> None:
    for call in client(root, token):
        resp = call("GET", path, headers={"Authorization": "Bearer s3cret-token"})
        assert resp.status_code == 404
        assert "cdn" not in resp.text.lower()
