"""One bad request, one answer: the CLI, the HTTP API and MCP name the same problem with the
same code (the API's ``error.code``, MCP's ``data.code``, the CLI's one line)."""

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
from everos_reflect.settings import Settings
from tests.api_client import ApiClient
from tests.store_fixtures import refuse_reads


@pytest.fixture
def runtime(root: Path) -> Iterator[Runtime]:
    rt = Runtime(root, Settings(), embedder=HashEmbedder())
    yield rt
    rt.close()


def _mcp_error(runtime: Runtime, tool: str, args: dict[str, Any]) -> MCPError:
    [spec] = [t for t in mcp_server.tools() if t.name == tool]
    with pytest.raises(MCPError) as caught:
        mcp_server.call(runtime, spec, args)
    return caught.value


@pytest.mark.parametrize(("tool", "args", "method", "url", "code"), [
    ("explain", {"entry_id": "nonsense", "user_id": "u_ann"},
     "GET", "/api/v1/memory/explain/nonsense?user_id=u_ann", "invalid_id"),
    ("insights", {"user_id": "../x"}, "GET", "/api/v1/memory/insights?user_id=../x",
     "invalid_id"),
    ("search", {"query": "q", "user_id": "a b"}, "POST", "/api/v1/memory/search", "invalid_id"),
    ("add_episode", {"user_id": "../x", "subject": "s", "content": "c"},
     "POST", "/api/v1/memory/episodes", "invalid_id"),
    ("search", {"query": "q", "top_k": 0}, "POST", "/api/v1/memory/search", "invalid_request"),
], ids=["explain-entry_id", "insights-user_id", "search-user_id", "add_episode-user_id",
        "search-top_k"])
def test_mcp_refuses_a_bad_field_with_the_code_and_status_the_api_gives(
        runtime: Runtime, tool: str, args: dict[str, Any], method: str, url: str,
        code: str) -> None:
    # MCP answered every request its schema refused as invalid_request, an id the API
    # answers invalid_id for too
    resp = ApiClient(runtime)(method, url, **({"json": args} if method == "POST" else {}))
    assert resp.status_code == 422 and resp.json()["error"]["code"] == code, resp.text
    error = _mcp_error(runtime, tool, args)
    assert error.data == {"code": code, "status": 422}
    # the same words (the API said where too: ``query.user_id``, ``path.entry_id``)
    assert resp.json()["error"]["message"] == error.message


@pytest.mark.parametrize(("cli_args", "method", "url", "body"), [
    (["explain", "in_20260230_0001", "--user", "u_ann"],
     "GET", "/api/v1/memory/explain/in_20260230_0001?user_id=u_ann", None),
    (["resolve", "rel_20260230_0001", "--note", "n", "--user", "u_ann"],
     "POST", "/api/v1/memory/relations/rel_20260230_0001/resolve",
     {"user_id": "u_ann", "note": "n"}),
    (["undo", "ep_20260230_0001", "--user", "u_ann"],
     "POST", "/api/v1/ome/undo", {"user_id": "u_ann", "entry_id": "ep_20260230_0001"}),
], ids=["explain", "resolve", "undo"])
def test_an_impossible_day_is_an_unknown_entry_at_the_cli_as_at_the_api(
        runtime: Runtime, root: Path, cli_args: list[str], method: str, url: str,
        body: dict[str, Any] | None) -> None:
    # 2026-02-30 names no entry: the API and MCP answer 404 unknown_entry; the CLI said
    # "invalid entry id …: bad date", as for an id that is not an id at all
    resp = ApiClient(runtime)(method, url, **({"json": body} if body else {}))
    assert resp.status_code == 404 and resp.json()["error"]["code"] == "unknown_entry"
    message = resp.json()["error"]["message"]
    assert message.startswith(f"no entry {cli_args[1]} for user default_app/default_project/"
                              "u_ann: ")
    result = CliRunner().invoke(cli, [*cli_args, "--root", str(root)])
    assert result.exit_code == 1 and result.output == f"error: {message}\n"
    if cli_args[0] == "explain":
        error = _mcp_error(runtime, "explain", {"entry_id": cli_args[1], "user_id": "u_ann"})
        assert (error.message, error.data) == (message, {"code": "unknown_entry",
                                                         "status": 404})


def test_a_malformed_entry_id_is_named_with_one_example_at_every_edge(
        runtime: Runtime, root: Path) -> None:
    # The API and MCP said "expected e.g. in_20261012_0001" of any id `explain` was given,
    # an `ep_` one included; the CLI said `ep_`. One message for the one mistake.
    result = CliRunner().invoke(cli, ["explain", "nonsense", "--user", "u_ann",
                                      "--root", str(root)])
    assert result.exit_code == 1
    cli_message = result.output.removeprefix("error: ").rstrip("\n")
    assert cli_message == "invalid entry id 'nonsense': expected e.g. ep_20261012_0001"
    resp = ApiClient(runtime)("GET", "/api/v1/memory/explain/nonsense?user_id=u_ann")
    assert resp.json()["error"]["message"].endswith(cli_message), resp.text
    assert _mcp_error(runtime, "explain", {"entry_id": "nonsense",
                                           "user_id": "u_ann"}).message.endswith(cli_message)


def _one_episode(runtime: Runtime) -> tuple[Any, Any, Path]:
    """u_ann's one Episode of 2026-10-12: (its owner, the entry, its log)."""
    from datetime import date

    from everos_reflect.model import Kind, UserRef

    ref = UserRef.of("u_ann")
    entry = runtime.store.append(ref, Kind.EPISODE, {
        "timestamp": "2026-10-12T09:00:00+00:00", "parent_type": "memcell",
        "parent_id": "mc_1"}, {"Subject": "s", "Content": "c"}, day=date(2026, 10, 12))
    return ref, entry, runtime.store.path_for_id(ref, entry.id)


def test_a_look_up_in_a_log_that_is_not_utf8_names_the_line_of_the_byte(
        runtime: Runtime) -> None:
    # "<log>:0: cannot look up …: byte 0xe9 at column 1": a column of no line
    _ref, entry, path = _one_episode(runtime)
    lines = path.read_bytes().count(b"\n")
    with path.open("ab") as fh:
        fh.write(b"\xe9 a note saved as Latin-1\n")
    result = CliRunner().invoke(cli, ["explain", entry.id, "--user", "u_ann", "--root",
                                      str(runtime.root)])
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: {runtime.store.rel(path)}:{lines + 1}: cannot look up {entry.id}: file is not "
        "valid UTF-8: byte 0xe9 at column 1 (invalid continuation byte; save it as UTF-8)\n")


def test_an_entry_in_a_log_that_cannot_be_read_is_not_called_missing_at_any_edge(
        runtime: Runtime, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The store marks a log it may not read "unread" and lint says "not read: Permission
    # denied"; a look-up of one of its ids said "no entry …" (404 unknown_entry), sending a
    # person after a deletion that never happened. Tests run as root, where ``chmod 000``
    # blocks no read: the store's open is refused instead.
    from datetime import date

    from everos_reflect.model import Kind, UserRef
    from everos_reflect.strategies.insight_views import explain, render_tree

    ref = UserRef.of("u_ann")
    meta = {"timestamp": "2026-10-12T09:00:00+00:00", "parent_type": "memcell",
            "parent_id": "mc_1"}
    locked = runtime.store.append(ref, Kind.EPISODE, meta, {"Subject": "s", "Content": "c"},
                                  day=date(2026, 10, 12))
    other = runtime.store.append(ref, Kind.EPISODE, meta, {"Subject": "t", "Content": "d"},
                                 day=date(2026, 10, 13))
    insight = runtime.store.append(ref, Kind.INSIGHT, {
        "timestamp": "2026-10-14T09:00:00+00:00", "evidence": [locked.id, other.id],
        "depth": 1, "status": "active"}, {"Insight": "Both."}, day=date(2026, 10, 14))
    path = runtime.store.path_for_id(ref, locked.id)
    refuse_reads(monkeypatch, path)
    message = (f"{runtime.store.rel(path)}: cannot look up {locked.id}: "
               "not read: Permission denied")
    resp = ApiClient(runtime)("GET", f"/api/v1/memory/explain/{locked.id}?user_id=u_ann")
    assert resp.status_code == 409, resp.text
    assert resp.json()["error"] == {"code": "unparseable_file", "message": message}
    error = _mcp_error(runtime, "explain", {"entry_id": locked.id, "user_id": "u_ann"})
    assert (error.message, error.data) == (message, {"code": "unparseable_file",
                                                     "status": 409})
    for command in ("explain", "provenance"):
        result = CliRunner().invoke(cli, [command, locked.id, "--user", "u_ann",
                                          "--root", str(root)])
        assert (result.exit_code, result.output) == (1, f"error: {message}\n")
    # cited by a record that can be read: a node that says so, not "(deleted)"
    tree = explain(runtime, ref, insight.id)
    assert tree["evidence"][0] == {"id": locked.id, "unreadable": True, "problem": message,
                                   "evidence": []}
    assert tree["evidence"][1]["text"] == "d"
    assert render_tree(tree)[1] == f"  {locked.id}  (its log cannot be read now: see lint)"


def test_an_entry_whose_block_a_hand_edit_broke_is_not_called_missing(
        runtime: Runtime) -> None:
    from everos_reflect.errors import MarkdownError

    ref, entry, path = _one_episode(runtime)
    path.write_text(path.read_text().replace("timestamp: ", "timestamp: [", 1))
    with pytest.raises(MarkdownError, match=f"cannot look up {entry.id}: its entry block"):
        runtime.store.get(ref, entry.id)


def test_a_file_the_write_cannot_reach_is_a_409_naming_it_at_the_api_and_mcp(
        runtime: Runtime, root: Path) -> None:
    # a file standing where the user's folder goes: NotADirectoryError escaped as a plain
    # 500 (a traceback in the server's log); MCP said "add_episode failed: [Errno 20] …"
    users = root / "default_app" / "default_project" / "users"
    users.mkdir(parents=True)
    (users / "u_ann").write_text("not a folder")
    body = {"user_id": "u_ann", "subject": "s", "content": "c",
            "timestamp": "2026-10-12T09:00:00+00:00"}
    # the file in the way is named (the CLI's words), not the log it keeps from being written
    message = ("default_app/default_project/users/u_ann is not a folder, and a folder is "
               "needed there: move it aside")
    resp = ApiClient(runtime)("POST", "/api/v1/memory/episodes", json=body)
    assert resp.status_code == 409, resp.text
    assert resp.json()["error"] == {"code": "file_error", "message": message}
    error = _mcp_error(runtime, "add_episode", body)
    assert (error.message, error.data) == (message, {"code": "file_error", "status": 409})
    assert (users / "u_ann").read_text() == "not a folder"


@pytest.mark.parametrize(("subject", "reason"), [
    # no bound: 100,000 characters were written into the log and embedded
    ("x" * 100_000, "at most 500 characters"),
    ("a" * 501, "at most 500 characters"),
    # pydantic's msg read "subject: Value error, must be one line" at the API and MCP
    ("two\nlines", "subject: must be one line"),
], ids=["100000", "501", "two-lines"])
def test_a_subject_too_long_or_of_two_lines_is_refused_at_every_edge(
        runtime: Runtime, root: Path, subject: str, reason: str) -> None:
    body = {"user_id": "u_ann", "subject": subject, "content": "c"}
    resp = ApiClient(runtime)("POST", "/api/v1/memory/episodes", json=body)
    assert resp.status_code == 422, resp.text
    message = resp.json()["error"]["message"]
    assert reason in message and "Value error" not in message and len(message) < 300, message
    error = _mcp_error(runtime, "add_episode", body)
    assert error.message == message and error.data == {"code": "invalid_request", "status": 422}
    result = CliRunner().invoke(cli, ["add", "--root", str(root), "--user", "u_ann",
                                      "--subject", subject, "--content", "c"])
    assert result.exit_code == 1 and len(result.stderr.splitlines()) == 1, result.stderr
    # the API's words, the option named as the CLI names it ("--subject is 501 characters;
    # the most is 500" where the API said "must be at most 500 characters, got 501")
    assert result.stderr == f"error: --{message.replace(': ', ' ', 1)}\n"
    assert not list(root.rglob("episode-*.md"))


def test_a_subject_of_500_characters_is_accepted_at_every_edge(
        runtime: Runtime, root: Path) -> None:
    body = {"user_id": "u_ann", "subject": "a" * 500, "content": "c"}
    assert ApiClient(runtime)("POST", "/api/v1/memory/episodes", json=body).status_code == 201
    [spec] = [t for t in mcp_server.tools() if t.name == "add_episode"]
    mcp_server.call(runtime, spec, body)
    result = CliRunner().invoke(cli, ["add", "--root", str(root), "--user", "u_ann",
                                      "--subject", "a" * 500, "--content", "c"])
    assert result.exit_code == 0, result.output
