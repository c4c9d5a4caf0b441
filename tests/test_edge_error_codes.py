"""The same bad id or value gets the same code and the same words from MCP, the HTTP API and
the CLI. MCP's ``explain`` answered an empty or 100-character ``entry_id`` ``invalid_request``
("entry_id: must not be empty", "must be at most 64 characters") where the API's path
parameter answered ``invalid_id`` ("invalid entry id ''…"); the API's ``undo`` said an empty
id "entry_id: must not be empty" and an insight's id "invalid episode id 'in_…': expected
e.g. ep_…", where the CLI's ``undo`` said "invalid entry id '': must not be empty" and "in_…
is not an episode id".

The HTTP API named where a parameter was (``path.entry_id: …``, ``query: invalid user_id
…``) where MCP, whose arguments are one object, said the same words without it: the words
are now the same, byte for byte."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from mcp.shared.exceptions import MCPError

from everos_reflect.api import mcp_server
from everos_reflect.cli.main import cli
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.runtime import Runtime
from tests.api_client import ApiClient

TOOLS = {t.name: t for t in mcp_server.tools()}
LONG_ID = "x" * 100
LONG_SHOWN = f"'{'x' * 60}…' (100 characters)"
TASK = {"user_id": "u1", "task_type": "deploy", "goal": "g", "steps": ["s"],
        "outcome": "success"}


@pytest.fixture
def edges(root: Path) -> Iterator[tuple[Runtime, ApiClient]]:
    runtime = Runtime(root, embedder=HashEmbedder(16))
    yield runtime, ApiClient(runtime)
    runtime.close()


#: (MCP tool, its arguments, the API's method and path, its body; the code, the words)
CASES: list[tuple[str, dict[str, Any], str, str, dict[str, Any] | None, str, str]] = [
    ("explain", {"entry_id": "", "user_id": "u1"},
     "GET", "/api/v1/memory/explain/?user_id=u1", None,
     "invalid_id", "entry_id: invalid entry id '': must not be empty"),
    ("explain", {"entry_id": LONG_ID, "user_id": "u1"},
     "GET", f"/api/v1/memory/explain/{LONG_ID}?user_id=u1", None,
     "invalid_id", f"entry_id: invalid entry id {LONG_SHOWN}: expected e.g. ep_20261012_0001"),
    ("explain", {"entry_id": "in_2026", "user_id": "u1"},
     "GET", "/api/v1/memory/explain/in_2026?user_id=u1", None,
     "invalid_id", "entry_id: invalid entry id 'in_2026': expected e.g. ep_20261012_0001"),
    ("explain", {"entry_id": "in_20261012_0001", "user_id": "u1"},
     "GET", "/api/v1/memory/explain/in_20261012_0001?user_id=u1", None,
     "unknown_entry", "no entry in_20261012_0001 for user default_app/default_project/u1"),
    ("explain", {"entry_id": "in_20261012_0001", "user_id": ""},
     "GET", "/api/v1/memory/explain/in_20261012_0001?user_id=", None,
     "invalid_id", "invalid user_id '': must not be empty"),
    ("lessons", {"task_type": "a b"}, "GET", "/api/v1/lessons?task_type=a%20b", None,
     "invalid_id", "invalid task_type 'a b': use 1-128 characters from A-Z a-z 0-9 _ . -, "
                   "starting with a letter or digit"),
    ("insights", {"user_id": ""}, "GET", "/api/v1/memory/insights?user_id=", None,
     "invalid_id", "invalid user_id '': must not be empty"),
    ("search", {"query": "x", "user_id": "a/b"}, "POST", "/api/v1/memory/search",
     {"query": "x", "user_id": "a/b"},
     "invalid_id", "invalid user_id 'a/b': use 1-128 characters from A-Z a-z 0-9 _ . -, "
                   "starting with a letter or digit"),
    ("search", {"query": "x", "mode": "fuzzy"}, "POST", "/api/v1/memory/search",
     {"query": "x", "mode": "fuzzy"},
     "invalid_request", "mode: must be one of: hybrid, vector, keyword; got 'fuzzy'"),
    ("briefing", {"query": "x", "user_id": "u1", "task_type": ""}, "POST",
     "/api/v1/memory/briefing", {"query": "x", "user_id": "u1", "task_type": ""},
     "invalid_id", "invalid task_type '': must not be empty"),
    ("record_task", {**TASK, "task_type": ""}, "POST", "/api/v1/tasks",
     {**TASK, "task_type": ""}, "invalid_id", "invalid task_type '': must not be empty"),
    ("record_task", {**TASK, "outcome": "meh"}, "POST", "/api/v1/tasks",
     {**TASK, "outcome": "meh"},
     "invalid_request", "outcome: must be one of: success, failure, partial; got 'meh'"),
]


@pytest.mark.parametrize(("tool", "arguments", "method", "url", "body", "code", "says"), CASES)
def test_mcp_and_the_api_give_a_bad_value_the_same_code_and_words(
        edges: tuple[Runtime, ApiClient], tool: str, arguments: dict[str, Any], method: str,
        url: str, body: dict[str, Any] | None, code: str, says: str) -> None:
    runtime, api = edges

    with pytest.raises(MCPError) as refused:
        mcp_server.call(runtime, TOOLS[tool], arguments)
    answer = api(method, url, json=body) if body is not None else api(method, url)

    assert (refused.value.error.data["code"], refused.value.error.message) == (code, says)
    error = answer.json()["error"]
    assert (error["code"], error["message"]) == (code, says)


#: (the entry id undo is given; the code and words of the API, the CLI's line)
UNDO_CASES = [
    ("", "invalid_id", "invalid entry id '': must not be empty"),
    ("../x", "invalid_id", "invalid entry id '../x': expected e.g. ep_20261012_0001"),
    ("in_20261012_0001", "invalid_id", "invalid episode id 'in_20261012_0001': a merged "
                                       "narrative is an episode, e.g. ep_20261012_0001"),
]


@pytest.mark.parametrize(("entry_id", "code", "says"), UNDO_CASES)
def test_the_api_and_the_cli_undo_say_a_bad_id_alike(
        edges: tuple[Runtime, ApiClient], root: Path, entry_id: str, code: str,
        says: str) -> None:
    _, api = edges

    answer = api("POST", "/api/v1/ome/undo", json={"entry_id": entry_id, "user_id": "u1"})
    typed = CliRunner().invoke(cli, ["undo", entry_id, "--user", "u1", "--root", str(root)])

    assert answer.json()["error"] == {"code": code, "message": f"entry_id: {says}"}
    assert typed.exit_code == 1, typed.output
    assert typed.stderr.splitlines() == [f"error: {says}"]


def test_the_api_and_the_cli_trigger_say_an_empty_strategy_name_alike(
        edges: tuple[Runtime, ApiClient], root: Path) -> None:
    # the API said "name: must not be empty" (invalid_request), naming no strategy
    _, api = edges

    answer = api("POST", "/api/v1/ome/trigger", json={"name": ""})
    typed = CliRunner().invoke(cli, ["trigger", "", "--root", str(root)])

    says = typed.stderr.removeprefix("error: ").rstrip("\n")
    assert says.startswith("invalid strategy name '': must not be empty (known: ")
    assert answer.json()["error"] == {"code": "invalid_id", "message": f"name: {says}"}


@pytest.mark.parametrize("entry_id", ["ep_20261012_0001", "in_20261012_0001"])
def test_the_api_and_the_cli_resolve_say_an_id_of_another_kind_alike(
        edges: tuple[Runtime, ApiClient], root: Path, entry_id: str) -> None:
    # the API said "invalid relation id 'ep_…': expected e.g. rel_…", the CLI named the kind
    _, api = edges

    answer = api("POST", f"/api/v1/memory/relations/{entry_id}/resolve",
                 json={"user_id": "u1", "note": "n"})
    typed = CliRunner().invoke(cli, ["resolve", entry_id, "--user", "u1", "--note", "n",
                                     "--root", str(root)])

    says = typed.stderr.removeprefix("error: ").rstrip("\n")
    assert says.startswith(f"{entry_id} is an ") and ", not a relation id: " in says
    assert answer.json()["error"] == {"code": "invalid_id", "message": f"rel_id: {says}"}
