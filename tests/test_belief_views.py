"""Reading the belief tiers (CLI ``worldview``/``relations``/``resolve`` and the HTTP routes)
over convictions and edges written straight into the Markdown."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result

from everos_reflect.cli import belief_cmds
from everos_reflect.cli.common import existing_root
from everos_reflect.cli.main import cli
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.model import MAX_LISTED_EVIDENCE, Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from tests.api_client import call_once

ADA = UserRef.of("ada")
TS = "2026-10-12T09:00:00+00:00"


@pytest.fixture(autouse=True)
def hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands open their root through `open_runtime`: give them the deterministic fake."""

    def fake_open(root: str | None) -> Runtime:
        return Runtime(existing_root(root), Settings(), embedder=HashEmbedder(32))

    monkeypatch.setattr(belief_cmds, "open_runtime", fake_open)


@pytest.fixture
def beliefs_root(root: Path) -> dict[str, str]:
    """Two versions of ``strategy``, one ``commitments``, one active edge, one resolved."""
    rt = Runtime(root, embedder=HashEmbedder(32))
    store = rt.store
    old, commit = store.append_many(ADA, Kind.CONVICTION, [
        ({"timestamp": TS, "key": "strategy", "evidence": ["in_20261012_0001"], "depth": 2,
          "status": "active"}, {"Conviction": "Enterprise first."}),
        ({"timestamp": TS, "key": "commitments", "evidence": ["in_20261012_0002"], "depth": 2,
          "status": "active"},
         {"Conviction": "Deliver the contracted SSO and audit-log roadmap by quarter end."}),
    ])
    (new,) = store.append_many(ADA, Kind.CONVICTION, [
        ({"timestamp": "2026-10-13T09:00:00+00:00", "key": "strategy",
          "evidence": ["in_20261012_0003"], "depth": 2, "status": "active",
          "supersedes": old.id},
         {"Conviction": "Redirect engineering to the self-serve SMB flywheel."}),
    ])
    store.deprecate(ADA, {old.id: new.id})
    edge, done = store.append_many(ADA, Kind.RELATION, [
        ({"timestamp": TS, "relation_type": "self_contradiction", "between": [new.id, commit.id],
          "evidence": [new.id, commit.id], "depth": 3, "status": "active"},
         {"Relation": "Stopping enterprise engineering breaks the enterprise commitments."}),
        ({"timestamp": TS, "relation_type": "self_contradiction", "between": [old.id, commit.id],
          "evidence": [old.id, commit.id], "depth": 3, "status": "resolved"},
         {"Relation": "An older tension."}),
    ])
    rt.close()
    return {"old": old.id, "new": new.id, "commit": commit.id, "edge": edge.id, "done": done.id}


def run(root: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, [*args, "--root", str(root)])


def test_worldview_shows_one_live_conviction_per_key(root: Path,
                                                     beliefs_root: dict[str, str]) -> None:
    result = run(root, "worldview", "--user", "ada", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["convictions"]
    assert [(r["key"], r["id"]) for r in rows] == [
        ("commitments", beliefs_root["commit"]), ("strategy", beliefs_root["new"])]
    assert rows[1]["supersedes"] == beliefs_root["old"] and rows[1]["kind"] == "conviction"


def test_worldview_history_lists_every_version_newest_first(
        root: Path, beliefs_root: dict[str, str]) -> None:
    rows = json.loads(run(root, "worldview", "--user", "ada", "--history", "--json").stdout)[
        "convictions"]
    strategy = [(r["id"], r["live"], r["deprecated_by"]) for r in rows if r["key"] == "strategy"]
    assert strategy == [(beliefs_root["new"], True, None),
                        (beliefs_root["old"], False, beliefs_root["new"])]
    text = run(root, "worldview", "--history").stdout
    assert f"archived by {beliefs_root['new']}" in text


def test_versions_are_ordered_by_instant_not_by_the_text_of_their_offsets(root: Path) -> None:
    """A version a person added with their own offset: 09:00+05:00 is 04:00 UTC, an hour
    before the daemon's 05:00 UTC version, though its text sorts after it."""
    from everos_reflect.strategies.belief_store import BeliefState, repair

    rt = Runtime(root, embedder=HashEmbedder(32))
    try:
        newer, older = rt.store.append_many(ADA, Kind.CONVICTION, [
            ({"timestamp": "2026-10-12T05:00:00+00:00", "key": "strategy",
              "evidence": ["in_20261012_0001"], "depth": 2, "status": "active"},
             {"Conviction": "Self-serve first."}),
            ({"timestamp": "2026-10-12T09:00:00+05:00", "key": "strategy",
              "evidence": ["in_20261012_0002"], "depth": 2, "status": "active"},
             {"Conviction": "Enterprise first."}),
        ])
        late, early = rt.store.append_many(ADA, Kind.RELATION, [
            ({"timestamp": "2026-10-12T05:00:00+00:00", "relation_type": "self_contradiction",
              "between": [newer.id, older.id], "status": "resolved"}, {"Relation": "Late."}),
            ({"timestamp": "2026-10-12T09:00:00+05:00", "relation_type": "self_contradiction",
              "between": [newer.id, older.id], "status": "resolved"}, {"Relation": "Early."}),
        ])
    finally:
        rt.close()
    rows = json.loads(run(root, "worldview", "--user", "ada", "--json").stdout)["convictions"]
    assert [r["id"] for r in rows] == [newer.id]
    history = json.loads(run(root, "worldview", "--user", "ada", "--history", "--json").stdout)
    assert [r["id"] for r in history["convictions"]] == [newer.id, older.id]
    rows = json.loads(run(root, "relations", "--user", "ada", "--json").stdout)["relations"]
    assert [r["id"] for r in rows] == [late.id, early.id]
    # the invariant's repair archives the older version into the newer one, not the reverse
    rt = Runtime(root, embedder=HashEmbedder(32))
    try:
        repair(rt, ADA, BeliefState.load(rt, ADA))
        assert rt.store.get(ADA, older.id).deprecated_by == newer.id
        assert rt.store.get(ADA, newer.id).deprecated_by is None
    finally:
        rt.close()


def test_relations_filter_by_status(root: Path, beliefs_root: dict[str, str]) -> None:
    rows = json.loads(run(root, "relations", "--status", "active", "--json").stdout)[
        "relations"]
    assert [r["id"] for r in rows] == [beliefs_root["edge"]]
    assert rows[0]["between"] == [beliefs_root["new"], beliefs_root["commit"]]
    assert len(json.loads(run(root, "relations", "--json").stdout)["relations"]) == 2
    bad = run(root, "relations", "--status", "bogus")
    assert bad.exit_code == 2 and ("must be one of: active, resolved, stale, retired; got "
                                   "'bogus'") in bad.stderr


def test_resolve_marks_the_edge_and_leaves_the_convictions(
        root: Path, beliefs_root: dict[str, str]) -> None:
    conv_file = (root / "default_app/default_project/users/ada/.worldview")
    before = {p.name: p.read_bytes() for p in conv_file.iterdir()}
    result = run(root, "resolve", beliefs_root["edge"], "--note", "Enterprise work ends in Q1.",
                 "--json")
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout)
    assert (row["status"], row["resolution"]) == ("resolved", "Enterprise work ends in Q1.")
    assert {p.name: p.read_bytes() for p in conv_file.iterdir()} == before
    again = run(root, "resolve", beliefs_root["edge"], "--note", "x")
    assert again.exit_code == 1 and "is resolved, not active" in again.stderr
    missing = run(root, "resolve", "rel_20261012_0099", "--note", "x")
    assert missing.exit_code == 1 and "no relation rel_20261012_0099" in missing.stderr
    not_edge = run(root, "resolve", beliefs_root["new"], "--note", "x", "--user", "ada")
    assert not_edge.exit_code == 1 and "not a relation id" in not_edge.stderr


def call(root: Path, method: str, url: str, **kwargs: Any) -> httpx.Response:
    return call_once(root, method, url, dim=32, **kwargs)


def test_api_worldview_relations_and_resolve(root: Path, beliefs_root: dict[str, str]) -> None:
    view = call(root, "GET", "/api/v1/memory/worldview", params={"user_id": "ada"}).json()
    assert [c["key"] for c in view["data"]["convictions"]] == ["commitments", "strategy"]
    rels = call(root, "GET", "/api/v1/memory/relations",
                params={"user_id": "ada", "status": "active"}).json()["data"]["relations"]
    assert [r["id"] for r in rels] == [beliefs_root["edge"]]
    url = f"/api/v1/memory/relations/{beliefs_root['edge']}/resolve"
    resp = call(root, "POST", url, json={"user_id": "ada", "note": "Dropped the pivot."})
    assert resp.status_code == 200 and resp.json()["data"]["status"] == "resolved"
    again = call(root, "POST", url, json={"user_id": "ada", "note": "again"})
    assert again.status_code == 409 and again.json()["error"]["code"] == "resolve_refused"
    empty = call(root, "POST", url, json={"user_id": "ada", "note": ""})
    assert empty.status_code == 422
    unknown = call(root, "POST", "/api/v1/memory/relations/rel_20261012_0077/resolve",
                   json={"user_id": "ada", "note": "x"})
    assert unknown.status_code == 404
    bad_user = call(root, "GET", "/api/v1/memory/worldview", params={"user_id": "../x"})
    assert bad_user.status_code == 422


@pytest.mark.parametrize("command", [["worldview"], ["relations"], ["insights"],
                                     ["resolve", "EDGE", "--note", "n"]])
@pytest.mark.parametrize(("option", "value", "what"), [
    ("--app", "../x", "app_id"), ("--app", "", "app_id"), ("--project", "my project",
                                                           "project_id")])
@pytest.mark.parametrize("user", [[], ["--user", "ada"]])
def test_an_app_or_project_filter_that_is_no_id_is_refused(
        root: Path, beliefs_root: dict[str, str], command: list[str], option: str, value: str,
        what: str, user: list[str]) -> None:
    # It was compared with every user's app, matched none, and the command said "no
    # convictions yet" / "No insights yet" with exit 0 as if the root held none (an empty
    # `--app` with `--user` silently meant default_app); `clusters` and `lessons` refuse it.
    logs = {p: p.read_bytes() for p in root.rglob("*.md")}
    args = [beliefs_root["edge"] if a == "EDGE" else a for a in command]
    result = run(root, *args, *user, option, value)
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(f"error: invalid {what} "), result.stderr
    assert {p: p.read_bytes() for p in root.rglob("*.md")} == logs


@pytest.mark.parametrize(("rel_id", "shown"), [
    # another kind's id (in_…) is named by its kind, as `resolve` names it
    # (test_edge_error_codes)
    ("rel_20261012_0001%00", "'rel_20261012_0001"), ("rel_2026101_0001", "'rel_2026101_0001'")])
def test_api_resolve_names_a_relation_ids_form(root: Path, beliefs_root: dict[str, str],
                                               rel_id: str, shown: str) -> None:
    # An insight id got "String should match pattern '^rel_[0-9]{8}_[0-9]{4,18}$'"; one with
    # a NUL was told to use "1-128 characters from A-Z a-z 0-9 _ . -", which it did.
    resp = call(root, "POST", f"/api/v1/memory/relations/{rel_id}/resolve",
                json={"user_id": "ada", "note": "n"})
    assert resp.status_code == 422
    error = resp.json()["error"]
    assert error["code"] == "invalid_id"
    assert error["message"].startswith(f"rel_id: invalid relation id {shown}"), error
    assert error["message"].endswith(": expected e.g. rel_20261012_0001")


@pytest.mark.parametrize(("entry_id", "kind"), [
    ("ep_20261012_0099", "an episode"), ("af_20261012_0099", "an atomic fact")])
def test_resolve_of_an_id_of_another_kind_names_its_kind_and_what_resolve_takes(
        root: Path, beliefs_root: dict[str, str], entry_id: str, kind: str) -> None:
    # An Episode id that named no entry was told "no relation ep_…", as if it were an edge
    # that did not exist.
    result = run(root, "resolve", entry_id, "--note", "x", "--user", "ada")
    assert result.exit_code == 1
    assert result.stderr.startswith(
        f"error: {entry_id} is {kind} id, not a relation id: "
        "resolve marks a self-contradiction edge resolved"), result.stderr
    assert "rel_ id" in result.stderr


@pytest.mark.parametrize(("note", "said"), [
    ("   ", "must not be empty"),
    ("\u200b \u2060", "must not be empty"),
    ("x " * 1499 + "x", "must be at most 2,000 characters, got 2,999"),
])
def test_a_resolution_note_the_core_refuses_is_a_bad_request_said_alike(
        root: Path, beliefs_root: dict[str, str], note: str, said: str) -> None:
    # a blank note was a 409 resolve_refused "a resolution needs a non-empty note" (the
    # conflict of an edge already resolved) where an empty one was a 422 "note: must not be
    # empty"; a long one "the note is 2999 characters; at most 2000" at the CLI
    url = f"/api/v1/memory/relations/{beliefs_root['edge']}/resolve"
    resp = call(root, "POST", url, json={"user_id": "ada", "note": note})
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"] == {"code": "invalid_request", "message": f"note: {said}"}
    cli_said = run(root, "resolve", beliefs_root["edge"], "--note", note)
    assert cli_said.exit_code == 1
    assert cli_said.stderr.strip() == f"error: --note {said}"
    again = call(root, "POST", url, json={"user_id": "ada", "note": "Dropped the pivot."})
    assert again.status_code == 200  # nothing was written by the refused ones


def test_worldview_and_relations_give_a_text_on_one_line_and_say_no_key(root: Path) -> None:
    # a line of a hand-written text was printed as a line of its own (one written like a
    # row of the listing read as one), and a conviction with no key showed as "None"
    rt = Runtime(root, embedder=HashEmbedder(32))
    try:
        keyed, keyless = rt.store.append_many(ADA, Kind.CONVICTION, [
            ({"timestamp": TS, "key": "strategy", "evidence": [], "depth": 2,
              "status": "active"}, {"Conviction": "Self-serve first.\nwv_20261012_0099  x: y"}),
            ({"timestamp": TS, "evidence": [], "depth": 2, "status": "active"},
             {"Conviction": "No key."}),
        ])
        (edge,) = rt.store.append_many(ADA, Kind.RELATION, [
            ({"timestamp": TS, "relation_type": "self_contradiction", "status": "resolved",
              "between": [keyed.id, keyless.id], "resolution": "Settled.\nrel_x  [active]"},
             {"Relation": "One.\nrel_20261012_0099  [active]  a x b"})])
    finally:
        rt.close()
    text = run(root, "worldview", "--user", "ada", "--history")
    assert text.exit_code == 0, text.output
    assert text.output.splitlines()[::2] == [
        f"ada  {keyless.id}  (no key): No key.",
        f"ada  {keyed.id}  strategy: Self-serve first. wv_20261012_0099 x: y"]
    relations = run(root, "relations", "--user", "ada")
    assert relations.output.splitlines() == [
        f"ada  {edge.id}  [resolved]  {keyed.id} x {keyless.id}",
        "    One. rel_20261012_0099 [active] a x b", "    resolution: Settled. rel_x [active]"]


def test_worldview_and_relations_list_the_first_evidence_ids_and_count_them_all(
        root: Path) -> None:
    # a hand-written conviction citing 3,000 records was one row of 3,000 ids in every
    # answer (CLI --json, API); an id written twice was listed and counted twice
    cited = [f"in_20261012_{n:04d}" for n in range(1, 3001)]
    rt = Runtime(root, embedder=HashEmbedder(32))
    try:
        (many,) = rt.store.append_many(ADA, Kind.CONVICTION, [
            ({"timestamp": TS, "key": "strategy", "evidence": [*cited, cited[0]], "depth": 2,
              "status": "active"}, {"Conviction": "Self-serve first."})])
        (edge,) = rt.store.append_many(ADA, Kind.RELATION, [
            ({"timestamp": TS, "relation_type": "self_contradiction", "status": "active",
              "between": [many.id, many.id], "evidence": [many.id, many.id]},
             {"Relation": "One."})])
    finally:
        rt.close()
    first = cited[:MAX_LISTED_EVIDENCE]
    for rows in (json.loads(run(root, "worldview", "--user", "ada", "--json").stdout)
                 ["convictions"],
                 call(root, "GET", "/api/v1/memory/worldview",
                      params={"user_id": "ada"}).json()["data"]["convictions"]):
        assert [(r["id"], r["evidence"], r["evidence_count"]) for r in rows] == [
            (many.id, first, 3000)]
    text = run(root, "worldview", "--user", "ada")
    assert f"    evidence: {', '.join(first)} +2980 more  (" in text.output
    for rels in (json.loads(run(root, "relations", "--user", "ada", "--json").stdout)
                 ["relations"],
                 call(root, "GET", "/api/v1/memory/relations",
                      params={"user_id": "ada"}).json()["data"]["relations"]):
        assert [(r["id"], r["evidence"], r["evidence_count"]) for r in rels] == [
            (edge.id, [many.id], 1)]
