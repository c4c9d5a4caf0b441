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
    assert resp.json()["error"]["message"] == f"rel_id: {said}"


@pytest.mark.parametrize(("value", "note", "cli_said", "api_said"), [
    # an empty note on a relation that does not exist: the CLI said "no relation" alone, and
    # once one did, that the note was empty; the API's 422 named the note first
    ("rel_20261012_0001", "", "--note must not be empty", "note: must not be empty"),
    ("rel_20261012_0001", " \u200b ", "--note must not be empty", "note: must not be empty"),
    # both refused: each named, in one answer
    ("x", "", "invalid relation id 'x': expected e.g. rel_20261012_0001; --note must not be "
              "empty",
     "rel_id: invalid relation id 'x': expected e.g. rel_20261012_0001; note: must not "
     "be empty"),
])
def test_resolve_names_every_problem_of_the_request_before_looking_the_relation_up(
        root: Path, call: ApiClient, value: str, note: str, cli_said: str,
        api_said: str) -> None:
    result = CliRunner().invoke(cli, ["resolve", value, "--user", "u1", "--note", note,
                                      "--root", str(root)])
    assert result.exit_code == 1, result.output
    assert result.stderr == f"error: {cli_said}\n"
    resp = call("POST", f"/api/v1/memory/relations/{value}/resolve",
                json={"user_id": "u1", "note": note})
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["message"] == api_said


def test_resolve_with_a_note_names_the_unknown_relation(root: Path, call: ApiClient) -> None:
    result = CliRunner().invoke(cli, ["resolve", "rel_20261012_0001", "--user", "u1", "--note",
                                      "settled", "--root", str(root)])
    assert result.exit_code == 1, result.output
    assert result.stderr == ("error: no relation rel_20261012_0001 for user "
                             "default_app/default_project/u1\n")
    resp = call("POST", "/api/v1/memory/relations/rel_20261012_0001/resolve",
                json={"user_id": "u1", "note": "settled"})
    assert resp.status_code == 404, resp.text
    assert resp.json()["error"]["code"] == "unknown_entry"
    assert "rel_20261012_0001" in resp.json()["error"]["message"]
