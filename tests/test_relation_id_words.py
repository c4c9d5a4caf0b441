"""``resolve`` given a value with no id's form names a relation id as the example, as the API
does: it said "expected e.g. ep_20261012_0001", an Episode's id, of a command that takes
only a relation's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.runtime import Runtime
from tests.api_client import ApiClient


@pytest.fixture
def call(root: Path) -> Iterator[ApiClient]:
    runtime = Runtime(root, embedder=HashEmbedder(16))
    yield ApiClient(runtime)
    runtime.close()


@pytest.mark.parametrize("value", ["rel_1", "rel_2026101_0001", "x"])
def test_resolve_names_a_relation_id_as_the_api_does(
        root: Path, call: ApiClient, value: str) -> None:
    said = f"invalid relation id '{value}': expected e.g. rel_20261012_0001"
    result = CliRunner().invoke(cli, ["resolve", value, "--user", "u1", "--note", "n",
                                      "--root", str(root)])
    assert result.exit_code == 1, result.output
    assert result.stderr.strip() == f"error: {said}"
    resp = call("POST", f"/api/v1/memory/relations/{value}/resolve",
                json={"user_id": "u1", "note": "n"})
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["message"] == f"path.rel_id: {said}"
