"""The HTTP API in-process (httpx ASGI transport): every route, errors as 4xx JSON, token auth."""

from __future__ import annotations

import json
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.errors import UnknownEntry
from everos_reflect.index.db import utcnow_iso
from everos_reflect.index.sync import Indexer
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import ServerSettings, Settings
from tests.api_client import ApiClient
from tests.engine_fixtures import Quick, registered


@pytest.fixture(autouse=True)
def quick() -> Iterator[None]:
    with registered(Quick):
        yield


def make_runtime(root: Path, token: str | None = None) -> Runtime:
    settings = replace(Settings(), server=ServerSettings(token=token))
    return Runtime(root, settings, embedder=HashEmbedder())


@pytest.fixture
def runtime(root: Path) -> Iterator[Runtime]:
    rt = make_runtime(root)
    yield rt
    rt.close()


Client = ApiClient


@pytest.fixture
def call(runtime: Runtime) -> Client:
    return Client(runtime)


def error_of(resp: httpx.Response) -> dict[str, str]:
    body = resp.json()
    assert set(body) == {"error"}, body
    return body["error"]


def test_health_and_openapi(call: Client) -> None:
    assert call("GET", "/api/v1/health").json()["status"] == "ok"
    paths = call("GET", "/openapi.json").json()["paths"]
    assert {"/api/v1/ome/trigger", "/api/v1/memory/search", "/api/v1/memory/episodes",
            "/api/v1/ome/strategies", "/api/v1/ome/runs", "/api/v1/ome/reports",
            "/api/v1/ome/undo", "/api/v1/health"} <= set(paths)


def test_health_answers_a_head_probe(call: Client) -> None:
    """``curl -I`` / a load balancer's HEAD check got 405 Method Not Allowed."""
    resp = call("HEAD", "/api/v1/health")
    assert resp.status_code == 200
    assert resp.headers["content-type"] == "application/json"
    assert call("HEAD", "/api/v1/ome/runs").status_code == 405  # only the probe route


def test_trigger_disabled_then_forced(call: Client) -> None:
    resp = call("POST", "/api/v1/ome/trigger", json={"name": Quick.name})
    assert resp.status_code == 200
    assert resp.json()["status"] == "disabled"
    resp = call("POST", "/api/v1/ome/trigger", json={"name": Quick.name, "force": True})
    body = resp.json()
    assert (body["status"], body["name"], body["counts"]) == ("ok", Quick.name, {"touched": 1})
    assert body["run_id"].startswith("run_")


def test_trigger_unknown_strategy_is_404(call: Client) -> None:
    resp = call("POST", "/api/v1/ome/trigger", json={"name": "reflect_nothing"})
    assert resp.status_code == 404
    err = error_of(resp)
    assert err["code"] == "unknown_strategy"
    assert "reflect_nothing" in err["message"]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({}, "name"),
        ({"name": Quick.name, "timeout": "soon"}, "timeout"),
        ({"name": Quick.name, "timeout": -1}, "timeout"),
        ({"name": Quick.name, "forse": True}, "forse"),
        ([1, 2], "body"),
    ],
)
def test_bad_trigger_bodies_are_422_naming_the_field(
    call: Client, body: Any, fragment: str
) -> None:
    resp = call("POST", "/api/v1/ome/trigger", json=body)
    assert resp.status_code == 422
    err = error_of(resp)
    assert err["code"] == "invalid_request"
    assert fragment in err["message"]


def test_malformed_json_is_422(call: Client) -> None:
    resp = call("POST", "/api/v1/ome/trigger", content=b"{name:",
                headers={"content-type": "application/json"})
    assert resp.status_code == 422
    assert error_of(resp)["code"] == "invalid_request"


def test_add_episode_then_search_finds_it(call: Client, runtime: Runtime) -> None:
    resp = call("POST", "/api/v1/memory/episodes", json={
        "user_id": "u_andrew", "subject": "Adopted a dog",
        "content": "Andrew adopted a dog named Toby.",
        "timestamp": "2026-09-10T10:00:00+00:00", "session_id": "s1", "importance": 6,
    })
    assert resp.status_code == 201
    new_id = resp.json()["data"]["id"]
    assert new_id.startswith("ep_20260910_")
    entry = runtime.store.get(UserRef.of("u_andrew"), new_id)
    assert (entry.subject, entry.session_id, entry.meta["importance"]) == (
        "Adopted a dog", "s1", 6)
    assert "indexed" not in resp.json()["data"]

    # no scan, no watcher: the write indexed its log, so an agent's next call finds it
    resp = call("POST", "/api/v1/memory/search",
                json={"query": "dog named Toby", "user_id": "u_andrew"})
    assert resp.status_code == 200
    episodes = resp.json()["data"]["episodes"]
    assert episodes[0]["id"] == new_id
    assert episodes[0]["episode"] == "Andrew adopted a dog named Toby."
    assert episodes[0]["session_id"] == "s1"
    assert {"subject", "timestamp", "parent_type", "score"} <= set(episodes[0])
    assert episodes[0]["snippet"] == "Andrew adopted a dog named Toby."
    assert episodes[0]["snippet_date"] == episodes[0]["timestamp"][:10]


def test_a_recorded_task_is_searchable_at_once(call: Client) -> None:
    resp = call("POST", "/api/v1/tasks", json={
        "user_id": "u_andrew", "task_type": "deploy", "goal": "Ship the billing service",
        "steps": ["build", "push"], "outcome": "success"})
    assert resp.status_code == 201, resp.text
    new_id = resp.json()["data"]["id"]
    resp = call("POST", "/api/v1/memory/search", json={
        "query": "Ship the billing service", "user_id": "u_andrew", "kinds": ["task"]})
    assert [hit["id"] for hit in resp.json()["data"]["episodes"]] == [new_id]


@pytest.mark.parametrize("edge", ["http", "mcp"])
def test_a_write_that_could_not_be_indexed_is_answered_done(root: Path, edge: str) -> None:
    # The embedding server down: the Episode is appended; an error answer made an agent
    # write it again, once per retry. Both edges answer through one op.
    from everos_reflect.api.mcp_server import call as mcp_call
    from everos_reflect.api.mcp_server import tools
    from everos_reflect.errors import ProviderUnavailable

    class Down(HashEmbedder):
        def embed(self, texts: Any) -> Any:
            raise ProviderUnavailable("embedding server: HTTP 503")

    body = {"user_id": "u1", "subject": "s", "content": "c", "importance": 5}
    rt = Runtime(root, Settings(), embedder=Down())
    try:
        if edge == "http":
            resp = Client(rt)("POST", "/api/v1/memory/episodes", json=body)
            assert resp.status_code == 201
            data = resp.json()["data"]
        else:
            [add] = [t for t in tools() if t.name == "add_episode"]
            data = mcp_call(rt, add, body)
        episodes = rt.store.entries(UserRef.of("u1"), Kind.EPISODE)
    finally:
        rt.close()
    assert [e.id for e in episodes] == [data["id"]]
    assert data["indexed"] is False and "HTTP 503" in data["index_error"]


def test_a_write_waits_for_a_busy_indexer_only_so_long(
        call: Client, runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    # A scan or rebuild holding the indexer for minutes must not hold the agent's write with
    # it: past the wait the write is answered done, not indexed yet, and indexed later.
    from filelock import FileLock

    from everos_reflect.api import ops

    monkeypatch.setattr(ops, "INDEX_WAIT_SECONDS", 0.2)
    body = {"user_id": "u_andrew", "subject": "Busy", "content": "Written while a scan ran."}
    with FileLock(str(runtime.index_dir / "locks" / "indexer.lock")):
        resp = call("POST", "/api/v1/memory/episodes", json=body)
    assert resp.status_code == 201, resp.text
    data = resp.json()["data"]
    assert data["indexed"] is False and "the index is busy" in data["index_error"]
    Indexer(runtime).scan()
    resp = call("POST", "/api/v1/memory/search",
                json={"query": "Written while a scan ran", "user_id": "u_andrew"})
    assert resp.json()["data"]["episodes"][0]["id"] == data["id"]


@pytest.mark.parametrize(
    ("body", "code", "fragment"),
    [
        ({"user_id": "../etc", "subject": "s", "content": "c"}, "invalid_id", "user_id"),
        ({"user_id": "u1", "app_id": "a/b", "subject": "s", "content": "c"}, "invalid_id",
         "app_id"),
        ({"user_id": "u1", "subject": "s", "content": "c", "timestamp": "yesterday"},
         "invalid_request", "timestamp"),
        # Valid ISO 8601 whose UTC day is year 0 / year 10000: was an OverflowError, a 500.
        ({"user_id": "u1", "subject": "s", "content": "c",
          "timestamp": "0001-01-01T00:00:00+14:00"}, "invalid_request", "years 1-9999"),
        ({"user_id": "u1", "subject": "s", "content": "c",
          "timestamp": "9999-12-31T23:59:59-05:00"}, "invalid_request", "years 1-9999"),
        # SPEC §3: a timestamp is ISO 8601 with an offset. A date alone was written as
        # midnight UTC, an ISO week date ("2026-W41-1") as its Monday, a naive time as UTC.
        ({"user_id": "u1", "subject": "s", "content": "c", "timestamp": "2026-10-12"},
         "invalid_request", "timestamp: '2026-10-12' is not ISO 8601 with a date, a time and an"),
        ({"user_id": "u1", "subject": "s", "content": "c", "timestamp": "2026-W41-1"},
         "invalid_request", "timestamp: '2026-W41-1' is not ISO 8601 with a date, a time and an"),
        ({"user_id": "u1", "subject": "s", "content": "c", "timestamp": "20261012T093000Z"},
         "invalid_request", "timestamp: '20261012T093000Z' is not ISO 8601 with a date"),
        ({"user_id": "u1", "subject": "s", "content": "c", "timestamp": "2026-10-12T09:30:00"},
         "invalid_request", "timestamp: '2026-10-12T09:30:00' has no UTC offset"),
        ({"user_id": "u1", "subject": "s", "content": "c", "importance": 11},
         "invalid_request", "importance"),
        ({"user_id": "u1", "subject": "two\nlines", "content": "c"}, "invalid_request",
         "subject"),
        ({"user_id": "u1", "subject": "two\rlines", "content": "c"}, "invalid_request",
         "must be one line"),
        ({"user_id": "u1", "subject": "two\u2029lines", "content": "c"}, "invalid_request",
         "must be one line"),
        ({"user_id": "u1", "subject": "s"}, "invalid_request", "content"),
        # A NUL was written into the daily log, which became a "binary file" to grep and git.
        ({"user_id": "u1", "subject": "s", "content": "To\x00by"}, "invalid_request",
         "content: holds the control character U+0000"),
        ({"user_id": "u1", "subject": "Pets \x1b]0;x\x07", "content": "c"}, "invalid_request",
         "subject: holds the control character U+001B"),
        ({"user_id": "u1", "subject": "s", "content": "a\x7f"}, "invalid_request",
         "content: holds the control character U+007F"),
        # C1: NEL is a line break to YAML and str.splitlines; CSI drives 8-bit terminals.
        ({"user_id": "u1", "subject": "s", "content": "one\x85<!-- /entry:x -->"},
         "invalid_request", "content: holds the control character U+0085"),
        ({"user_id": "u1", "subject": "Pets \x9b2J", "content": "c"}, "invalid_request",
         "subject: holds the control character U+009B"),
        ({"user_id": "u1", "subject": "s", "content": "a\x80"}, "invalid_request",
         "content: holds the control character U+0080"),
        ({"user_id": "u1", "subject": "s", "content": "a\x9f"}, "invalid_request",
         "content: holds the control character U+009F"),
    ],
)
def test_bad_episodes_are_rejected_and_nothing_is_written(
    call: Client, root: Path, body: dict, code: str, fragment: str
) -> None:
    resp = call("POST", "/api/v1/memory/episodes", json=body)
    assert resp.status_code == 422
    err = error_of(resp)
    assert err["code"] == code
    assert fragment in err["message"]
    assert not list(root.rglob("episode-*.md"))


TASK = {"user_id": "u1", "task_type": "deploy", "goal": "Deploy web v2",
        "steps": ["check logs", "deploy"], "outcome": "failure"}


@pytest.mark.parametrize("stamp", ["2026-10-12T09:30:00+02:00", "2026-10-12T07:30:00Z",
                                   "2026-10-12T07:30Z", "2026-10-12T07:30:00.250+00:00"])
def test_a_timestamp_with_an_offset_is_accepted(call: Client, root: Path, stamp: str) -> None:
    resp = call("POST", "/api/v1/memory/episodes",
                json={"user_id": "u1", "subject": "s", "content": "c", "timestamp": stamp})
    assert resp.status_code == 201, resp.text
    (log,) = root.rglob("episode-2026-10-12.md")
    assert "timestamp: 2026-10-12T" in log.read_text()


@pytest.mark.parametrize("stamp", ["2026-10-12", "2026-W41-1", "2026-10-12T09:30"])
def test_a_task_timestamp_without_date_time_and_offset_is_422(call: Client, root: Path,
                                                              stamp: str) -> None:
    resp = call("POST", "/api/v1/tasks", json={**TASK, "timestamp": stamp})
    assert resp.status_code == 422, resp.text
    assert error_of(resp)["message"].startswith(f"timestamp: {stamp!r}")
    assert not [p for p in root.rglob("*.md") if "users" in p.parts]


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"goal": "Deploy\x00"}, "goal: holds the control character U+0000"),
        ({"steps": ["ok", "roll\x1bback"]}, "steps.1: holds the control character U+001B"),
        ({"errors": ["disk\x1cfull"]}, "errors.0: holds the control character U+001C"),
        ({"outcome_note": "half\x00done"}, "outcome_note: holds the control character U+0000"),
        ({"steps": ["ok", "next\x85step"]}, "steps.1: holds the control character U+0085"),
    ],
)
def test_task_records_with_control_characters_are_422_and_nothing_is_written(
    call: Client, root: Path, change: dict[str, Any], fragment: str
) -> None:
    resp = call("POST", "/api/v1/tasks", json={**TASK, **change})
    assert resp.status_code == 422, resp.text
    assert error_of(resp) == {"code": "invalid_request", "message": fragment}
    assert not [p for p in root.rglob("*.md") if "users" in p.parts]


def test_tab_and_line_breaks_are_still_accepted_and_written(call: Client, root: Path) -> None:
    body = {"user_id": "u1", "subject": "s\tt", "content": "line one\r\n\tline two"}
    assert call("POST", "/api/v1/memory/episodes", json=body).status_code == 201
    resp = call("POST", "/api/v1/tasks", json={**TASK, "outcome_note": "a\tb"})
    assert resp.status_code == 201, resp.text
    [log] = root.rglob("episode-*.md")
    assert "\tline two" in log.read_text()


@pytest.mark.parametrize("char", ["\x00", "\x85"])
def test_a_resolve_note_with_a_control_character_is_422(call: Client, char: str) -> None:
    resp = call("POST", "/api/v1/memory/relations/rel_20261012_0001/resolve",
                json={"user_id": "u1", "note": f"fixed{char}"})
    assert resp.status_code == 422, resp.text
    assert error_of(resp)["message"] == (
        f"note: holds the control character U+{ord(char):04X}")


def test_the_schema_publishes_the_control_character_rule(call: Client) -> None:
    import re

    spec = call("GET", "/openapi.json").json()["components"]["schemas"]
    props = {**spec["EpisodeRequest"]["properties"], **spec["TaskRecordRequest"]["properties"]}
    for name in ("subject", "content", "goal"):
        pattern = re.compile(props[name]["pattern"])
        assert pattern.search("Toby the dog\tand a cat"), name
        assert not pattern.search("To\x00by"), name
        assert not pattern.search("\x1b[2J"), name
        assert not pattern.search("one\x85two"), name
        assert not pattern.search("\x9b2J"), name
        assert pattern.search("caf\u00e9 \u00a0ok"), name  # U+00A0 and up are text
    assert re.search(props["content"]["pattern"], "line one\r\n\tline two")
    assert not re.search(props["steps"]["items"]["pattern"], "a\x00")
    assert not re.search(props["outcome_note"]["pattern"], "a\x00")
    assert not re.search(props["steps"]["items"]["pattern"], "a\x85")
    assert not re.search(props["outcome_note"]["pattern"], "a\x80")


def test_the_schema_of_a_resolve_note_refuses_what_the_server_refuses(call: Client) -> None:
    """A note of only invisible writing characters (soft hyphen, joiners) matched the
    published pattern, and the server answered 422 "note: must not be empty": a schema-valid
    request rejected (schemathesis found it with a random seed)."""
    import re

    spec = call("GET", "/openapi.json").json()["components"]["schemas"]
    pattern = spec["ResolveRequest"]["properties"]["note"]["pattern"]
    blank = "\u00ad\u200c\u200d"
    assert not re.search(pattern, blank)
    assert re.search(pattern, "fixed \u00ad\u200c\u200d")
    resp = call("POST", "/api/v1/memory/relations/rel_20261012_0001/resolve",
                json={"user_id": "u1", "note": blank})
    assert resp.status_code == 422, resp.text
    assert error_of(resp)["message"] == "note: must not be empty"


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"query": ""}, "query"),
        ({"query": "x", "top_k": 0}, "top_k"),
        ({"query": "x", "user_id": ".."}, "user_id"),
        ({"query": "x", "mode": "psychic"}, "psychic"),
        # an empty list searched no kind: 200 with no hit, as if nothing matched
        ({"query": "x", "kinds": []}, "kinds: must not be empty"),
        # unbounded but for the body limit over HTTP, and for nothing over MCP: a query of
        # 5 MB took 8 s of keyword and vector search (the embedder reads its first 256 tokens)
        ({"query": "deploy " * 2_000}, "query: must be at most 10,000 characters, got 14,000"),
    ],
)
def test_bad_searches_are_4xx(call: Client, body: dict, fragment: str) -> None:
    resp = call("POST", "/api/v1/memory/search", json=body)
    assert 400 <= resp.status_code < 500
    assert fragment in error_of(resp)["message"]


def test_strategies_and_runs(call: Client) -> None:
    run_id = call("POST", "/api/v1/ome/trigger",
                  json={"name": Quick.name, "force": True}).json()["run_id"]
    rows = call("GET", "/api/v1/ome/strategies").json()["data"]["strategies"]
    mine = next(r for r in rows if r["name"] == Quick.name)
    assert (mine["enabled"], mine["next_run"]) == (False, None)
    assert mine["last_run"]["id"] == run_id
    assert mine["last_run"]["status"] == "ok"
    runs = call("GET", "/api/v1/ome/runs?limit=5").json()["data"]["runs"]
    assert [r["id"] for r in runs] == [run_id]
    assert runs[0]["counts"] == {"touched": 1}
    resp = call("GET", "/api/v1/ome/runs?limit=0")
    assert resp.status_code == 422
    assert "limit" in error_of(resp)["message"]


def test_reports_newest_first(call: Client, runtime: Runtime) -> None:
    conn = runtime.db()
    for n, cluster in enumerate(["cl_old", "cl_new"]):
        conn.execute(
            "INSERT INTO reflection_report(id, app_id, project_id, owner_id, cluster_id, mode, "
            "source_count, source_members, merged_entry_id, status, created_at) "
            "VALUES (?, 'default_app', 'default_project', 'u1', ?, 'init', 2, ?, ?, 'ok', ?)",
            (f"rr_{n}", cluster, json.dumps(["ep_20261010_0001", "ep_20261010_0002"]),
             f"ep_20261012_000{n}", utcnow_iso()))
    conn.commit()
    reports = call("GET", "/api/v1/ome/reports?limit=1").json()["data"]["reports"]
    assert [r["cluster_id"] for r in reports] == ["cl_new"]
    assert reports[0]["source_members"] == ["ep_20261010_0001", "ep_20261010_0002"]


@dataclass
class _Undone:
    restored: list[str]


def test_undo_calls_the_undo_module(call: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple] = []

    def undo_merge(runtime: Runtime, ref: Any, entry_id: str, *, cascade: bool) -> _Undone:
        seen.append((str(ref), entry_id, cascade))
        if entry_id != "ep_20261012_0001":
            raise UnknownEntry(f"no entry {entry_id} for {ref}")
        return _Undone(["ep_20261010_0001"])

    fake = types.ModuleType("everos_reflect.strategies.undo")
    fake.undo_merge = undo_merge  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "everos_reflect.strategies.undo", fake)

    resp = call("POST", "/api/v1/ome/undo",
                json={"entry_id": "ep_20261012_0001", "user_id": "u1", "cascade": True})
    assert resp.json() == {"data": {"restored": ["ep_20261010_0001"]}}
    assert seen == [("default_app/default_project/u1", "ep_20261012_0001", True)]
    resp = call("POST", "/api/v1/ome/undo", json={"entry_id": "ep_20261012_0009",
                                                  "user_id": "u1"})
    assert resp.status_code == 404
    assert error_of(resp)["code"] == "unknown_entry"
    resp = call("POST", "/api/v1/ome/undo", json={"entry_id": "x", "user_id": "../u"})
    assert resp.status_code == 422


def test_unknown_route_is_json_404(call: Client) -> None:
    resp = call("GET", "/api/v1/nothing")
    assert resp.status_code == 404
    assert error_of(resp)["code"] == "not_found"


def test_token_is_required_when_configured(root: Path) -> None:
    rt = make_runtime(root, token="s3cret")
    call = Client(rt)
    assert call("GET", "/api/v1/health").status_code == 200
    resp = call("GET", "/api/v1/ome/runs")
    assert resp.status_code == 401
    assert resp.headers["www-authenticate"] == "Bearer"
    assert error_of(resp)["code"] == "unauthorized"
    wrong = call("GET", "/api/v1/ome/runs", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    ok = call("GET", "/api/v1/ome/runs", headers={"Authorization": "Bearer s3cret"})
    assert ok.status_code == 200
    resp = call("POST", "/api/v1/ome/trigger", json={"name": Quick.name, "force": True},
                headers={"Authorization": "Bearer s3cret"})
    assert resp.json()["status"] == "ok"
    rt.close()


@pytest.mark.parametrize(("method", "url", "body"), [
    ("GET", "/api/v1/memory/explain/ep_20261012_{seq}?user_id=u1", None),
    ("POST", "/api/v1/ome/undo", {"entry_id": "ep_20261012_{seq}", "user_id": "u1"}),
    ("POST", "/api/v1/memory/relations/rel_20261012_{seq}/resolve",
     {"user_id": "u1", "note": "n"}),
])
def test_an_id_with_thousands_of_digits_is_422_not_a_server_error(
        call: Client, method: str, url: str, body: dict[str, str] | None) -> None:
    # The patterns accepted any number of digits; int() then raised ValueError past 4,300
    # of them and the request ended in a 500.
    seq = "9" * 5000
    kwargs = {} if body is None else {"json": {k: v.format(seq=seq) for k, v in body.items()}}
    resp = call(method, url.format(seq=seq), **kwargs)
    assert resp.status_code == 422, resp.text
    assert error_of(resp)["code"] == "invalid_id"


@pytest.mark.parametrize("method,url", [
    ("GET", "/api/v1/ome/runs?limt=5"),
    ("GET", "/api/v1/ome/reports?limit=5&usr=u_x"),
    ("GET", "/api/v1/status?verbose=1"),
    ("GET", "/api/v1/memory/worldview?user_id=u_a&app=x"),
    ("GET", "/api/v1/memory/insights?user_id=u_a&include_stale=true&stale=1"),
    ("GET", "/api/v1/lessons?task_type=deploy&user=u_a"),
    ("POST", "/api/v1/memory/search?user_id=u_a"),
])
def test_unknown_query_parameter_is_refused_by_name(call: Client, method: str, url: str) -> None:
    """A misspelt query parameter is an error naming it, as a misspelt body field is: ignored,
    ``usr=`` would silently widen a read to every user's entries."""
    kwargs: dict[str, Any] = {"json": {"query": "x", "user_id": "u_a"}} if method == "POST" else {}
    resp = call(method, url, **kwargs)
    assert resp.status_code == 422, resp.text
    error = resp.json()["error"]
    assert error["code"] == "invalid_request"
    unknown = url.split("?")[1].split("&")[-1].split("=")[0]
    assert unknown in error["message"]


@pytest.mark.parametrize("url,name", [
    ("/api/v1/ome/runs?limit=5&limit=7", "limit"),
    ("/api/v1/memory/insights?user_id=u_a&user_id=u_b", "user_id"),
    ("/api/v1/lessons?task_type=deploy&user_id=u_a&task_type=build", "task_type"),
])
def test_a_query_parameter_given_twice_is_refused_by_name(call: Client, url: str,
                                                          name: str) -> None:
    """One value was read and the other dropped without a word (``user_id=u_a&user_id=u_b``
    answered for u_b alone), as an unknown parameter was before it was refused."""
    resp = call("GET", url)
    assert resp.status_code == 422, resp.text
    error = resp.json()["error"]
    assert error["code"] == "invalid_request"
    assert f"given more than once: {name};" in error["message"]


def test_declared_query_parameters_still_pass(call: Client) -> None:
    assert call("GET", "/api/v1/ome/runs?limit=5").status_code == 200
    assert call("GET", "/api/v1/lessons?task_type=deploy&user_id=u_a").status_code == 200
    assert call("GET", "/api/v1/health?probe=1").status_code == 200  # probes may add anything



BODY_ROUTES = [
    "/api/v1/memory/search", "/api/v1/memory/episodes", "/api/v1/ome/trigger", "/api/v1/tasks",
    "/api/v1/memory/briefing", "/api/v1/memory/relations/rel_20261012_0001/resolve",
]


@pytest.mark.parametrize("url", BODY_ROUTES)
@pytest.mark.parametrize("raw,named", [
    # FastAPI's json.loads kept the last of two keys: {"user_id": "alice", "user_id": "bob"}
    # wrote to bob with a 201
    (b'{"query": "x", "user_id": "u_a", "user_id": "u_b"}',
     "the key 'user_id' is given twice in one object"),
    (b'{"query": "x", "top_k": NaN}', "NaN is not a JSON number"),
    (b'{"query": "x", "top_k": -Infinity}', "-Infinity is not a JSON number"),
    # the rest were "There was an error parsing the body" (400) or "9: JSON decode error"
    (b'{"query": "\xff"}', "it is not UTF-8 (byte 0xff at offset 11)"),
    (b'{"query": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "arrays or objects nest too deeply"),
    (b'{"query": "x", "top_k": ' + b"9" * 5000 + b"}", "a number has more than 4,300 digits"),
    (b'{"query":', "Expecting value at line 1, column 10"),
])
def test_a_body_that_is_not_strict_json_is_a_422_naming_the_problem(
        call: Client, url: str, raw: bytes, named: str) -> None:
    resp = call("POST", url, content=raw, headers={"content-type": "application/json"})
    assert resp.status_code == 422, resp.text
    assert error_of(resp) == {"code": "invalid_request",
                              "message": f"request body is not valid JSON: {named}"}


@pytest.mark.parametrize(("content_type", "shown"), [
    ("application/x-www-form-urlencoded", "'application/x-www-form-urlencoded'"),  # curl -d
    ("text/plain", "'text/plain'"),
    ("x" * 5000, f"'{'x' * 60}…' (5,000 characters)"),
])
def test_a_body_sent_as_another_content_type_is_a_415_naming_it(
        call: Client, content_type: str, shown: str) -> None:
    # FastAPI passed the body on as bytes: "body: Input should be a valid dictionary or
    # object to extract fields from", for a body that is one
    resp = call("POST", "/api/v1/memory/search", content=b'{"query": "x"}',
                headers={"content-type": content_type})
    assert resp.status_code == 415, resp.text
    assert error_of(resp) == {"code": "unsupported_media_type", "message": (
        "the request body must be JSON, sent with Content-Type: application/json; "
        f"got {shown}")}
    resp = call("POST", "/api/v1/memory/search", content=b'{"query": "x"}',
                headers={"content-type": "application/problem+json"})
    assert resp.status_code == 200, resp.text


@pytest.mark.parametrize("headers", [{}, {"content-type": ""}])
def test_a_body_sent_with_no_content_type_is_a_415_saying_so(
        call: Client, headers: dict[str, str]) -> None:
    # requests.post(url, data=json.dumps(...)) sends none: the answer was "body: Input should
    # be a valid dictionary or object to extract fields from", for a body that is one
    resp = call("POST", "/api/v1/memory/search", content=b'{"query": "x"}', headers=headers)
    assert resp.status_code == 415, resp.text
    assert error_of(resp) == {"code": "unsupported_media_type", "message": (
        "the request body must be JSON, sent with Content-Type: application/json; "
        "got no Content-Type")}


def test_strict_json_still_takes_what_the_standard_allows(call: Client, runtime: Runtime) -> None:
    raw = json.dumps({"user_id": "u_a", "subject": "caf\u00e9 \U0001f600",
                      "content": "nested keys may repeat: " + json.dumps({"a": {"a": 1}})},
                     ensure_ascii=False).encode()
    resp = call("POST", "/api/v1/memory/episodes", content=raw,
                headers={"content-type": "application/json; charset=utf-8"})
    assert resp.status_code == 201, resp.text
    Indexer(runtime).scan()
    resp = call("POST", "/api/v1/memory/search",
                content=b'{"query": "caf\\u00e9", "user_id": "u_a", "top_k": 1}',
                headers={"content-type": "application/json"})
    assert resp.status_code == 200, resp.text
    assert [hit["subject"] for hit in resp.json()["data"]["episodes"]] == ["caf\u00e9 \U0001f600"]


def test_apps_share_one_set_of_routes_and_each_serves_its_own_root(tmp_path: Path) -> None:
    # create_app built its ~19 routes anew on every call (40-90 ms each, paid by every test
    # that made an app). They are built once now and shared, so nothing of one root may live
    # in them: each request reads its root, engine and token from the app it came in on.
    from fastapi.routing import APIRoute

    (tmp_path / "a" / ".index").mkdir(parents=True)
    (tmp_path / "b" / ".index").mkdir(parents=True)
    first, second = make_runtime(tmp_path / "a", token="t-a"), make_runtime(tmp_path / "b")
    try:
        call_a, call_b = Client(first), Client(second)
        routes_a = [r for r in call_a.app.routes if isinstance(r, APIRoute)]
        routes_b = [r for r in call_b.app.routes if isinstance(r, APIRoute)]
        assert routes_a and list(map(id, routes_a)) == list(map(id, routes_b))
        auth = {"Authorization": "Bearer t-a"}
        added = call_a("POST", "/api/v1/memory/episodes", headers=auth,
                       json={"user_id": "u_a", "subject": "s", "content": "c"})
        assert added.status_code == 201, added.text
        assert call_a("GET", "/api/v1/lint").status_code == 401  # a's token, not b's
        assert call_a("GET", "/api/v1/lint", headers=auth).json()["data"]["files_checked"] == 1
        assert call_b("GET", "/api/v1/lint").json()["data"]["files_checked"] == 0
        schema_a = call_a("GET", "/openapi.json", headers=auth).json()
        assert schema_a == call_b("GET", "/openapi.json").json()
    finally:
        first.close()
        second.close()
