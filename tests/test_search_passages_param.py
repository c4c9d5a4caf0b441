"""``passages_per_entry`` over every edge that searches (HTTP API, MCP tool, CLI): a caller that
wants one hit per entry asks for 1 and gets no repeated ids; the default is unchanged (up to
three passages of one entry as items of their own); bad values are refused, naming the field.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result
from mcp.shared.exceptions import MCPError

from everos_reflect.api import mcp_server
from everos_reflect.cli import index_cmds
from everos_reflect.cli.common import counted, existing_root
from everos_reflect.embedding import HashEmbedder
from everos_reflect.index.search import PASSAGES_PER_ENTRY, search
from everos_reflect.index.sync import Indexer
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from tests.api_client import ApiClient

ANDREW = UserRef.of("u_andrew")
QUERY = "Andrew sailing boat weekends"
NARRATIVE = ("2026-08-10: Andrew moved to Portland. Andrew took up sailing on weekends.\n\n"
             "2026-09-10: Andrew repainted the kitchen blue.\n\n"
             "2026-10-10: Andrew bought a sailing boat called Tern. Andrew named it after a bird.")
FACTS = ["Andrew moved to Portland.", "Andrew took up sailing on weekends.",
         "Andrew repainted the kitchen blue.", "Andrew bought a sailing boat called Tern.",
         "Andrew named it after a bird."]
#: Refused on every edge: out of range, not an integer, a string, a boolean.
BAD_VALUES: list[Any] = [0, -1, PASSAGES_PER_ENTRY + 1, 1.5, "2", "two", True, None]


def _runtime(root: Path) -> Runtime:
    return Runtime(root, Settings(), embedder=HashEmbedder(64))


@pytest.fixture(scope="module")
def filled_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A merged narrative whose facts open several passages, and an unrelated Episode: built
    and indexed once for the module; each test gets a copy (``filled``)."""
    root = tmp_path_factory.mktemp("filled") / "root"
    (root / ".index").mkdir(parents=True)
    rt = _runtime(root)
    day = date(2026, 10, 11)
    meta = {"timestamp": "2026-10-11T09:00:00+00:00", "parent_type": "cluster",
            "parent_id": "cl_0123456789ab"}
    narrative = rt.store.append(ANDREW, Kind.EPISODE, meta,
                                {"Subject": "Andrew's year", "Content": NARRATIVE}, day=day)
    for fact in FACTS:
        rt.store.append(ANDREW, Kind.ATOMIC_FACT,
                        {"timestamp": meta["timestamp"], "parent_type": "episode",
                         "parent_id": narrative.id}, {"Fact": fact}, day=day)
    rt.store.append(ANDREW, Kind.EPISODE,
                    {"timestamp": "2026-10-01T09:00:00+00:00", "parent_type": "memcell",
                     "session_id": "s1"},
                    {"Subject": "Fence", "Content": "Andrew fixed the garden fence with his "
                                                    "sister."}, day=date(2026, 10, 1))
    Indexer(rt).scan()
    rt.close()
    return root


@pytest.fixture
def filled(root: Path, filled_template: Path) -> Path:
    """A copy of the module's filled root at ``root`` (a copy takes ~10 ms, a build ~0.15 s;
    the index holds root-relative paths, so the copy is as good as a build)."""
    shutil.rmtree(root)
    shutil.copytree(filled_template, root, symlinks=True)
    return root


@pytest.fixture
def rt(filled: Path) -> Iterator[Runtime]:
    runtime = _runtime(filled)
    yield runtime
    runtime.close()


def _repeats(hits: list[dict[str, Any]]) -> int:
    """How many items repeat an id already listed."""
    return sum(n - 1 for n in Counter(h["id"] for h in hits).values())


# --- HTTP ------------------------------------------------------------------------------------

def _http(rt: Runtime, **body: Any) -> Any:
    return ApiClient(rt)("POST", "/api/v1/memory/search",
                         json={"query": QUERY, "mode": "hybrid", "top_k": 10, **body})


def test_http_default_serves_several_passages_and_one_gives_one_item_per_entry(
        rt: Runtime) -> None:
    default = _http(rt).json()["data"]["episodes"]
    assert _repeats(default) >= 1  # today's behaviour: a further passage shares its entry's id
    assert _http(rt, passages_per_entry=PASSAGES_PER_ENTRY).json()["data"]["episodes"] \
        == default
    one = _http(rt, passages_per_entry=1).json()["data"]["episodes"]
    assert _repeats(one) == 0 and {h["passage"] for h in one} == {0}
    assert [h["id"] for h in one] == list(dict.fromkeys(h["id"] for h in default))
    # each entry's own item is the same one either way
    firsts = [h for h in default if h["passage"] == 0]
    assert [(h["id"], h["snippet"], h["score"]) for h in one] \
        == [(h["id"], h["snippet"], h["score"]) for h in firsts]
    two = _http(rt, passages_per_entry=2).json()["data"]["episodes"]
    assert max(Counter(h["id"] for h in two).values()) == 2
    assert _http(rt, passages_per_entry=1.0).json()["data"]["episodes"] == one  # JSON integer


@pytest.mark.parametrize("bad", BAD_VALUES)
def test_http_refuses_a_bad_passages_per_entry_with_a_422_naming_it(
        rt: Runtime, bad: Any) -> None:
    resp = _http(rt, passages_per_entry=bad)
    assert resp.status_code == 422, resp.text
    error = resp.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["message"].startswith("passages_per_entry: ")


def test_the_openapi_schema_publishes_the_bounds(rt: Runtime) -> None:
    schema = ApiClient(rt)("GET", "/openapi.json").json()
    field = schema["components"]["schemas"]["SearchRequest"]["properties"]["passages_per_entry"]
    assert (field["type"], field["minimum"], field["maximum"], field["default"]) == (
        "integer", 1, PASSAGES_PER_ENTRY, PASSAGES_PER_ENTRY)
    assert "passages_per_entry" not in schema["components"]["schemas"]["SearchRequest"].get(
        "required", [])


# --- MCP (the tool the stdio server runs; tests/test_mcp.py drives it over stdio) --------------

def _tool(rt: Runtime, **arguments: Any) -> dict[str, Any]:
    [search] = [t for t in mcp_server.tools() if t.name == "search"]
    return mcp_server.call(rt, search, {"query": QUERY, "mode": "hybrid", "top_k": 10,
                                        **arguments})


def test_mcp_search_takes_passages_per_entry_as_the_http_api_does(rt: Runtime) -> None:
    default = _tool(rt)["episodes"]
    one = _tool(rt, passages_per_entry=1)["episodes"]
    assert default == _http(rt).json()["data"]["episodes"]
    assert one == _http(rt, passages_per_entry=1).json()["data"]["episodes"]
    assert _repeats(default) >= 1 and _repeats(one) == 0
    [search] = [t for t in mcp_server.tools() if t.name == "search"]
    field = search.schema()["properties"]["passages_per_entry"]
    assert (field["minimum"], field["maximum"]) == (1, PASSAGES_PER_ENTRY)


@pytest.mark.parametrize("bad", BAD_VALUES)
def test_mcp_refuses_a_bad_passages_per_entry_naming_it(rt: Runtime, bad: Any) -> None:
    with pytest.raises(MCPError) as caught:
        _tool(rt, passages_per_entry=bad)
    assert caught.value.code == -32602  # invalid params
    assert caught.value.message.startswith("passages_per_entry: ")
    assert caught.value.message == _http(rt, passages_per_entry=bad).json()["error"]["message"]


# --- CLI -------------------------------------------------------------------------------------

@click.group()
def cli() -> None:
    """Only the search command."""


cli.add_command(index_cmds.search_cmd)


@pytest.fixture(autouse=True)
def hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command opens its root through `open_runtime`: give it the embedder of the index."""
    monkeypatch.setattr(index_cmds, "open_runtime", lambda root: _runtime(existing_root(root)))


def _cli(filled: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["search", QUERY, "--root", str(filled), "--mode", "hybrid",
                                    "--top-k", "10", *args])


def test_cli_passages_per_entry_one_lists_each_entry_once(filled: Path, rt: Runtime) -> None:
    default = _cli(filled, "--json")
    one = _cli(filled, "--json", "--passages-per-entry", "1")
    assert default.exit_code == 0 and one.exit_code == 0, (default.output, one.output)
    default_hits = json.loads(default.stdout)["episodes"]
    one_hits = json.loads(one.stdout)["episodes"]
    assert _repeats(default_hits) >= 1 and _repeats(one_hits) == 0
    assert one_hits == _http(rt, passages_per_entry=1).json()["data"]["episodes"]
    # the table lists what --json lists
    table = _cli(filled, "--passages-per-entry", "1")
    assert table.exit_code == 0 and f"{counted(len(one_hits), 'result')} in" in table.stdout
    assert f"{counted(len(default_hits), 'result')} in" in _cli(filled).stdout


@pytest.mark.parametrize("bad", ["0", "-1", str(PASSAGES_PER_ENTRY + 1), "1.5", "two", ""])
def test_cli_refuses_a_bad_passages_per_entry_naming_the_option(filled: Path, bad: str) -> None:
    result = _cli(filled, "--passages-per-entry", bad)
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Invalid value for '--passages-per-entry'" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("bad", [0, -1, PASSAGES_PER_ENTRY + 1, 9, 1000, True, 1.5, "2", None])
def test_the_library_search_refuses_a_bad_passages_per_entry_naming_it(
    rt: Runtime, bad: Any
) -> None:
    # The HTTP, MCP and CLI edges cap it at 1..3; search() itself took 1000 (and a bool).
    # in the API's words (test_library_argument_words)
    with pytest.raises(ValueError, match=r"^passages_per_entry: must be "):
        search(rt, "dog", passages_per_entry=bad)


def test_the_library_search_takes_every_allowed_passages_per_entry(rt: Runtime) -> None:
    for allowed in range(1, PASSAGES_PER_ENTRY + 1):
        hits = search(rt, "dog", top_k=10, passages_per_entry=allowed)
        assert hits and max(Counter(h.id for h in hits).values()) <= allowed
