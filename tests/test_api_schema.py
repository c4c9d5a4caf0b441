"""The served OpenAPI schema tells the truth: id patterns, error answers, `Allow` on 405, and
schemathesis (every default check, positive and negative cases) finds no conformance failure and
no 5xx."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from everos_reflect.api.app import create_app
from everos_reflect.api.models import EPISODE_ID_PATTERN
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.engine.engine import Engine
from everos_reflect.index.search import MAX_TOP_K
from everos_reflect.model import NAME_PATTERN, Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings


@pytest.fixture
def runtime(root: Path) -> Iterator[Runtime]:
    rt = Runtime(root, Settings(), embedder=HashEmbedder())
    rt.store.append(UserRef.of("u_ann"), Kind.EPISODE,
                    {"timestamp": "2026-10-12T09:00:00+00:00", "parent_type": "memcell"},
                    {"Subject": "Cats", "Content": "Ann adopted a cat."})
    yield rt
    rt.close()


@pytest.fixture
def app(runtime: Runtime) -> Any:
    return create_app(runtime, Engine(runtime))


@pytest.fixture
def openapi(app: Any) -> dict[str, Any]:
    return app.openapi()


def _body_schema(openapi: dict[str, Any], path: str) -> dict[str, Any]:
    ref = openapi["paths"][path]["post"]["requestBody"]["content"]["application/json"][
        "schema"]["$ref"]
    return openapi["components"]["schemas"][ref.rsplit("/", 1)[1]]


def _patterns(prop: dict[str, Any]) -> set[str]:
    options = prop.get("anyOf", [prop])
    return {o["pattern"] for o in options if "pattern" in o}


def test_id_fields_carry_their_pattern(openapi: dict[str, Any]) -> None:
    episode = _body_schema(openapi, "/api/v1/memory/episodes")["properties"]
    for name in ("user_id", "app_id", "project_id", "session_id"):
        assert _patterns(episode[name]) == {NAME_PATTERN}, name
    undo = _body_schema(openapi, "/api/v1/ome/undo")["properties"]
    assert _patterns(undo["entry_id"]) == {EPISODE_ID_PATTERN}


def test_subject_publishes_its_bound(openapi: dict[str, Any]) -> None:
    subject = _body_schema(openapi, "/api/v1/memory/episodes")["properties"]["subject"]
    assert subject["maxLength"] == 500
    assert "at most 500 characters" in subject["description"]


def test_text_patterns_refuse_what_the_write_refuses_as_empty(openapi: dict[str, Any]) -> None:
    # The schema allowed a BOM-only task error that the write then refused as empty, so
    # schemathesis now and then sent a "valid" request answered 422 (a flaky CI).
    import re

    from everos_reflect.model import blank, hidden_format_problem

    tasks = _body_schema(openapi, "/api/v1/tasks")["properties"]
    episode = _body_schema(openapi, "/api/v1/memory/episodes")["properties"]
    patterns = [tasks["goal"]["pattern"], tasks["errors"]["items"]["pattern"],
                episode["subject"]["pattern"], episode["content"]["pattern"]]
    for text in ["\ufeff", "\u200b \u200d", "\u00ad", "\U000e0001\U000e0020", " \u2060 ",
                 "a", "\ufeffa", "x\u200b", "\U0001d173b", "a\u202eb", "\u200fa\u200d"]:
        # refused as empty, or for an invisible formatting character, as the write refuses
        refused = blank(text) or hidden_format_problem(text) is not None
        for pattern in patterns:
            assert (re.search(pattern, text) is None) == refused, (text, pattern)


def test_every_operation_documents_its_error_answers(openapi: dict[str, Any]) -> None:
    for path, item in openapi["paths"].items():
        for method, operation in item.items():
            assert {"400", "404", "413", "422"} <= set(operation["responses"]), (method, path)
            error = operation["responses"]["422"]["content"]["application/json"]["schema"]
            assert error == {"$ref": "#/components/schemas/ErrorBody"}


def test_top_k_maximum_is_the_one_the_cli_allows(openapi: dict[str, Any]) -> None:
    top_k = _body_schema(openapi, "/api/v1/memory/search")["properties"]["top_k"]
    assert top_k["maximum"] == MAX_TOP_K == 100


def test_a_wrong_method_answers_405_with_allow(app: Any) -> None:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await client.delete("/api/v1/memory/search")

    resp = asyncio.run(go())
    assert resp.status_code == 405
    assert resp.headers["allow"] == "POST"
    assert resp.json()["error"]["code"] == "method_not_allowed"


def test_schemathesis_finds_no_conformance_failure_and_no_5xx(app: Any) -> None:
    """Every operation, valid and invalid inputs, every default check (status codes, content
    types, response schemas and headers, negative data rejected, no server error)."""
    api = schemathesis.openapi.from_asgi("/openapi.json", app)
    failures: list[str] = []
    operations = [result.ok() for result in api.get_all_operations()]
    assert len(operations) >= 8
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(max_examples=20, deadline=None, database=None,
                      suppress_health_check=list(HealthCheck))
            def check(case: Any) -> None:
                case.call_and_validate()

            try:
                check()
            except Unsatisfiable:
                continue  # no input to make invalid (an operation without parameters)
            except Exception as exc:  # collect them all, then report every one
                failures.append(f"{operation.label} ({mode.value}): {exc}")
    assert failures == [], "\n\n".join(failures)


def test_the_cli_refuses_a_top_k_the_api_refuses(root: Path) -> None:
    from click.testing import CliRunner

    from everos_reflect.cli.main import cli

    result = CliRunner().invoke(cli, ["search", "cats", "--root", str(root), "--top-k",
                                      str(MAX_TOP_K + 1)])
    assert result.exit_code == 2
    assert f"must be a whole number from 1 to {MAX_TOP_K}, got '{MAX_TOP_K + 1}'" in result.stderr


def test_the_schema_refuses_the_timestamps_the_writer_refuses(openapi: dict[str, Any]) -> None:
    """schemathesis sent ``0001-01-01T00:00:01+00:01`` (a valid date-time, year 0 in UTC) as
    valid data, and the API refused it: the schema now says so."""
    import re

    episode = _body_schema(openapi, "/api/v1/memory/episodes")["properties"]["timestamp"]
    pattern = episode["pattern"]  # beside anyOf [string, null]: it applies to a string only
    for value, said in [("0001-01-01T00:00:01+00:01", False), ("9999-12-31T23:59:59-00:01", False),
                        ("0001-01-01T00:00:01Z", True), ("9999-12-31T23:59:59+05:00", True),
                        ("2026-10-12T09:00:00-07:00", True)]:
        assert (re.search(pattern, value) is not None) == said, value
