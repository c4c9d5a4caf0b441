"""Insights at the edges (SPEC §10): CLI ``insights``/``explain``, the HTTP routes, and search
over several kinds with stale insights left out unless asked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from everos_reflect.cli.main import cli
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.index.search import search
from everos_reflect.index.sync import Indexer
from everos_reflect.runtime import Runtime
from tests.api_client import call_once as call
from tests.test_provenance import DEV, edit_file, setup


def run(root: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, [*args, "--root", str(root)])




def test_explain_walks_the_citation_tree_down_to_dated_episodes(root: Path) -> None:
    rt, eps, first, second = setup(root)
    rt.close()
    result = run(root, "explain", second.id, "--user", DEV.user_id, "--json")
    assert result.exit_code == 0, result.output
    tree = json.loads(result.stdout)
    assert tree["id"] == second.id and tree["kind"] == "insight"
    (child_insight, child_episode) = tree["evidence"]
    assert child_insight["id"] == first.id
    assert [(n["id"], n["date"]) for n in child_insight["evidence"]] == [
        (eps[0].id, "2026-09-02"), (eps[1].id, "2026-09-16"), (eps[2].id, "2026-09-30")]
    assert child_episode["id"] == eps[0].id and child_episode["evidence"] == []
    text = run(root, "explain", second.id, "--user", DEV.user_id)
    assert text.exit_code == 0 and f"    {eps[2].id}  2026-09-30" in text.output
    missing = run(root, "explain", "in_20261020_0099", "--user", DEV.user_id)
    assert missing.exit_code != 0 and "no entry in_20261020_0099" in missing.stderr


def test_insights_lists_active_ones_and_stale_ones_on_request(root: Path) -> None:
    rt, eps, first, second = setup(root)
    edit_file(rt.store.path_for_id(DEV, eps[1].id), "on day 16", "on day 15")
    Indexer(rt).scan()
    rt.close()
    active = json.loads(run(root, "insights", "--user", DEV.user_id, "--json").stdout)
    assert active == {"insights": [], "total": 0}
    every = json.loads(run(root, "insights", "--user", DEV.user_id, "--include-stale",
                           "--json").stdout)
    rows = {r["id"]: r for r in every["insights"]}
    assert {r["user_id"] for r in every["insights"]} == {DEV.user_id}
    assert rows[first.id]["status"] == "stale"
    assert rows[first.id]["stale_reason"] == f"evidence {eps[1].id} was edited"
    assert rows[second.id]["depth"] == 2


def test_insights_are_listed_newest_first_by_instant_whatever_their_offsets(
        root: Path) -> None:
    """09:00+05:00 (04:00 UTC, written by hand) is older than 05:00 UTC, though its text
    sorts after it."""
    from everos_reflect.model import Kind, UserRef
    from everos_reflect.strategies.insight_views import list_insights

    rt = Runtime(root, embedder=HashEmbedder(32))
    try:
        newer, older = rt.store.append_many(UserRef.of("ada"), Kind.INSIGHT, [
            ({"timestamp": "2026-10-12T05:00:00+00:00", "evidence": []}, {"Insight": "New."}),
            ({"timestamp": "2026-10-12T09:00:00+05:00", "evidence": []}, {"Insight": "Old."}),
        ])
        rows = list_insights(rt, UserRef.of("ada"))
    finally:
        rt.close()
    assert [r["id"] for r in rows] == [newer.id, older.id]


def test_api_insights_and_explain(root: Path) -> None:
    rt, eps, first, second = setup(root)
    rt.close()
    listed = call(root, "GET", "/api/v1/memory/insights", params={"user_id": DEV.user_id})
    assert listed.status_code == 200
    assert {r["id"] for r in listed.json()["data"]["insights"]} == {first.id, second.id}
    tree = call(root, "GET", f"/api/v1/memory/explain/{first.id}",
                params={"user_id": DEV.user_id})
    assert tree.status_code == 200
    assert [n["id"] for n in tree.json()["data"]["evidence"]] == [e.id for e in eps]
    bad = call(root, "GET", "/api/v1/memory/explain/nonsense", params={"user_id": DEV.user_id})
    # malformed is the caller's input error (422, naming the id), not an unknown record (404)
    assert bad.status_code == 422, bad.text
    assert "entry_id" in bad.text
    # a well-formed id with an impossible day names nothing: 404 by design (lookup_entry_id)
    bad_date = call(root, "GET", "/api/v1/memory/explain/in_20261399_0001",
                    params={"user_id": DEV.user_id})
    assert bad_date.status_code == 404, bad_date.text
    unknown = call(root, "GET", "/api/v1/memory/explain/in_20200101_0042",
                   params={"user_id": DEV.user_id})
    assert unknown.status_code == 404, unknown.text


def test_mcp_explain_answers_as_the_api_does(root: Path) -> None:
    # MCP's explain of a well-formed id with an impossible day (2026-02-30) answered 422
    # (invalid_id) where the API answers 404: it names no record, as an unknown id does.
    import pytest
    from mcp.shared.exceptions import MCPError

    from everos_reflect.api import mcp_server

    rt, _, first, _ = setup(root)
    try:
        [spec] = [t for t in mcp_server.tools() if t.name == "explain"]
        tree = mcp_server.call(rt, spec, {"entry_id": first.id, "user_id": DEV.user_id})
        assert tree["id"] == first.id
        for entry_id in ("in_20260230_0001", "in_20200101_0042"):
            with pytest.raises(MCPError) as caught:
                mcp_server.call(rt, spec, {"entry_id": entry_id, "user_id": DEV.user_id})
            assert caught.value.data == {"code": "unknown_entry", "status": 404}, entry_id
            api = call(root, "GET", f"/api/v1/memory/explain/{entry_id}",
                       params={"user_id": DEV.user_id})
            assert api.status_code == 404, api.text
        with pytest.raises(MCPError) as caught:  # malformed: the caller's error, as at the API
            mcp_server.call(rt, spec, {"entry_id": "nonsense", "user_id": DEV.user_id})
        assert caught.value.message.startswith("entry_id: invalid entry id 'nonsense'")
        assert caught.value.data == {"code": "invalid_id", "status": 422}
    finally:
        rt.close()


def test_search_over_kinds_tags_each_hit_and_leaves_stale_insights_out(root: Path) -> None:
    rt, eps, first, second = setup(root)
    hits = search(rt, "auth reverts", top_k=10, user_id=DEV.user_id,
                  kinds=["episode", "insight"], mode="keyword")
    assert {h.kind for h in hits} == {"episode", "insight"}
    assert {h.id for h in hits if h.kind == "insight"} == {first.id, second.id}
    edit_file(rt.store.path_for_id(DEV, eps[0].id), "on day 2", "on day 1")
    Indexer(rt).scan()
    hits = search(rt, "auth reverts", top_k=10, user_id=DEV.user_id,
                  kinds=["episode", "insight"], mode="keyword")
    assert [h for h in hits if h.kind == "insight"] == []
    stale = search(rt, "auth reverts", top_k=10, user_id=DEV.user_id, kinds=["insight"],
                   mode="keyword", include_stale=True)
    assert {(h.id, h.status) for h in stale} == {(first.id, "stale"), (second.id, "stale")}
    rt.close()
    api = call(root, "POST", "/api/v1/memory/search",
               json={"query": "auth", "user_id": DEV.user_id, "kinds": ["nope"]})
    # an unknown kind is a field the schema refuses (its choices are published): 422
    assert api.status_code == 422 and "kinds.0" in api.text and "'nope'" in api.text


def test_explain_of_records_citing_one_another_is_bounded(root: Path) -> None:
    # Twelve hand-written insights that each cite the other eleven: the tree expanded every
    # path without repeats up to ten levels deep, ~11!·e nodes, and explain (CLI, API, MCP)
    # held the process's memory for minutes. Nine already made 110,000 nodes (18 MB).
    from datetime import date

    from everos_reflect.model import Kind
    from everos_reflect.strategies.insight_views import MAX_TREE_NODES, explain

    rt = Runtime(root, embedder=HashEmbedder(64))
    try:
        ids = [f"in_20261012_{n:04d}" for n in range(1, 13)]
        written = rt.store.append_many(DEV, Kind.INSIGHT, [
            ({"timestamp": "2026-10-12T09:00:00+00:00", "evidence": [i for i in ids if i != me],
              "depth": 1, "status": "active"}, {"Insight": f"Insight {me}."}) for me in ids],
            day=date(2026, 10, 12))
        assert [e.id for e in written] == ids
        tree = explain(rt, DEV, ids[0])

        def nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
            return [node, *(n for child in node["evidence"] for n in nodes(child))]

        every = nodes(tree)
        assert len(every) <= MAX_TREE_NODES
        assert [n["id"] for n in tree["evidence"]] == ids[1:]  # the first level in full
        assert any(n.get("truncated") for n in every)
    finally:
        rt.close()
    text = run(root, "explain", ids[0], "--user", DEV.user_id)
    assert text.exit_code == 0 and "not shown" in text.output


def test_explain_marks_the_evidence_cut_at_its_depth_limit(root: Path) -> None:
    # The tree stops at MAX_TREE_DEPTH levels, and the records of the last level were shown
    # citing nothing (JSON "evidence": [], no mark, no line saying more was left out). Each
    # update merge cites the narrative before it, so a cluster merged weekly for a season is
    # a chain this long; twelve insights citing one another down a chain stand in for it.
    from datetime import date

    from everos_reflect.model import Kind
    from everos_reflect.strategies.insight_views import MAX_TREE_DEPTH, explain

    rt, eps, _, _ = setup(root)
    try:
        ids = [f"in_20261012_{n:04d}" for n in range(1, MAX_TREE_DEPTH + 3)]
        rt.store.append_many(DEV, Kind.INSIGHT, [
            ({"timestamp": "2026-10-12T09:00:00+00:00",
              "evidence": [ids[n + 1] if n + 1 < len(ids) else eps[0].id, eps[1].id],
              "depth": 1, "status": "active"}, {"Insight": f"Step {n}."})
            for n in range(len(ids))], day=date(2026, 10, 12))
        tree = explain(rt, DEV, ids[0])
    finally:
        rt.close()
    chain = [tree]
    while chain[-1]["evidence"] and chain[-1]["evidence"][0]["kind"] == "insight":
        chain.append(chain[-1]["evidence"][0])
    assert [n["id"] for n in chain] == ids[:MAX_TREE_DEPTH + 1]
    assert chain[-1]["evidence"] == [] and chain[-1]["truncated"] is True
    assert not any(n.get("truncated") for n in chain[:-1])
    assert not any(n.get("truncated") for n in chain[-2]["evidence"][1:])  # an Episode: whole
    text = run(root, "explain", ids[0], "--user", DEV.user_id)
    assert text.exit_code == 0
    assert ("  " * (MAX_TREE_DEPTH + 1) + "… more evidence not shown (the tree is cut at 10 "
            "levels, 5,000 records or 2,000,000 characters)") in text.output


def test_explain_of_long_records_citing_one_another_is_bounded_in_size(root: Path) -> None:
    # The node cap bounded the count, not the size: twelve hand-written insights of 200 KB
    # that cite one another (a 2.4 MB log) explained as 893 MB of JSON, 2 GB of memory; these
    # twelve of 40 KB made 180 MB. Now 2,000,000 characters of text at most, 8,000 a node.
    from datetime import date

    from everos_reflect.model import Kind
    from everos_reflect.strategies.insight_views import explain

    rt = Runtime(root, embedder=HashEmbedder(64))
    try:
        ids = [f"in_20261012_{n:04d}" for n in range(1, 13)]
        rt.store.append_many(DEV, Kind.INSIGHT, [
            ({"timestamp": "2026-10-12T09:00:00+00:00", "evidence": [i for i in ids if i != me],
              "depth": 1, "status": "active"}, {"Insight": f"{me} " + "word " * 8_000})
            for me in ids], day=date(2026, 10, 12))
        tree = explain(rt, DEV, ids[0])
    finally:
        rt.close()

    def nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
        return [node, *(n for child in node["evidence"] for n in nodes(child))]

    every = nodes(tree)
    assert sum(len(n["text"]) for n in every) <= 2_000_000
    assert len(json.dumps(tree)) < 4_000_000
    assert [n["id"] for n in tree["evidence"]] == ids[1:]  # the first level in full
    assert any(n.get("truncated") for n in every)
    assert tree["text"].startswith(f"{ids[0]} word ")
    assert tree["text"].endswith("… (clipped from 40,016 characters)")
    assert len(tree["text"]) < 8_100


def test_explain_reads_each_log_once_per_level_not_once_per_cited_entry(
        root: Path, monkeypatch: Any) -> None:
    # Each cited id was read with a parse of its whole log: 2,000 Episodes of one day cited by
    # one insight (a hand-written evidence list) re-read that 745 KB log 2,000 times, 216 s.
    from collections import Counter
    from datetime import date

    from everos_reflect.model import Kind
    from everos_reflect.strategies.insight_views import explain

    rt = Runtime(root, embedder=HashEmbedder(64))
    try:
        episodes = rt.store.append_many(DEV, Kind.EPISODE, [
            ({"timestamp": "2026-08-01T09:00:00+00:00", "parent_type": "memcell",
              "parent_id": "mc_1"}, {"Subject": f"Standup {n}", "Content": f"Standup {n}."})
            for n in range(300)], day=date(2026, 8, 1))
        insight = rt.store.append(DEV, Kind.INSIGHT, {
            "timestamp": "2026-09-01T09:00:00+00:00", "evidence": [e.id for e in episodes],
            "depth": 1, "status": "active"}, {"Insight": "Standups every day."})
        reads: Counter[Path] = Counter()
        read = rt.store.read

        def counted(path: Path) -> Any:
            reads[Path(path)] += 1
            return read(path)

        monkeypatch.setattr(rt.store, "read", counted)
        tree = explain(rt, DEV, insight.id)
        day_log = rt.store.path_for_id(DEV, episodes[0].id)
    finally:
        rt.close()
    assert [n["id"] for n in tree["evidence"]] == [e.id for e in episodes]
    assert tree["evidence"][299]["text"] == "Standup 299."
    assert reads[day_log] == 1


def test_metadata_hand_edited_into_odd_yaml_types_is_served_not_a_500(root: Path) -> None:
    # YAML a person may write: a !!binary value (bytes) answered 500 from the insights and
    # worldview routes (JSON cannot encode them), and a list as a conviction's key failed
    # `worldview --history` (CLI traceback, API 500) where the keys were collected in a dict.
    from everos_reflect.model import Kind

    rt, _eps, first, _second = setup(root)
    conviction = rt.store.append(DEV, Kind.CONVICTION, {
        "timestamp": "2026-10-21T09:00:00+00:00", "key": "risks", "evidence": [first.id],
        "depth": 2, "status": "active", "derivation": "dw_test"},
        {"Conviction": "Auth changes are risky."})
    relation = rt.store.append(DEV, Kind.RELATION, {
        "timestamp": "2026-10-21T09:00:00+00:00", "relation_type": "self_contradiction",
        "between": [conviction.id, conviction.id], "status": "resolved", "depth": 3,
        "resolution": "by hand", "derivation": "dw_test"}, {"Relation": "A clash."})
    edit_file(rt.store.path_for_id(DEV, first.id), "question: q?", "question: !!binary /w==")
    edit_file(rt.store.path_for_id(DEV, conviction.id), "key: risks", "key: [risks, more]")
    edit_file(rt.store.path_for_id(DEV, relation.id), "resolution: by hand",
              "resolution: !!binary /w==")
    rt.close()
    for url, extra in (("insights", {}), ("insights", {"include_stale": "true"}),
                       ("worldview", {}), ("worldview", {"history": "true"}),
                       ("relations", {})):
        answer = call(root, "GET", f"/api/v1/memory/{url}",
                      params={"user_id": DEV.user_id, **extra})
        assert answer.status_code == 200, (url, extra, answer.text)
    listed = call(root, "GET", "/api/v1/memory/insights", params={"user_id": DEV.user_id})
    (row,) = [r for r in listed.json()["data"]["insights"] if r["id"] == first.id]
    assert row["question"] is None  # no text: read as none, as lint says (CLI too)
    history = run(root, "worldview", "--user", DEV.user_id, "--history", "--json")
    assert history.exit_code == 0, history.output


def test_api_reads_of_another_app_and_project_reach_that_tenant(root: Path) -> None:
    """``app_id`` and ``project_id`` shared one FastAPI ``Query`` object, so both were read
    from ``?app_id=``: ``app_id=acme`` opened ``acme/acme`` and ``project_id`` was refused as
    an unknown parameter, on every insights, explain, worldview and relations read."""
    from everos_reflect.model import Kind, UserRef

    rt = Runtime(root, embedder=HashEmbedder(64))
    written = {}
    for project in ("crm", "acme", "default_project"):
        ref = UserRef("acme", project, DEV.user_id)
        written[project] = rt.store.append(ref, Kind.INSIGHT, {
            "timestamp": "2026-10-20T09:00:00+00:00", "evidence": [], "depth": 1,
            "importance": 5, "question": "q?", "status": "active",
            "insight_type": "reflection"}, {"Insight": f"An insight of acme/{project}."})
    rt.close()
    for params, project in (({"app_id": "acme", "project_id": "crm"}, "crm"),
                            ({"app_id": "acme"}, "default_project")):
        params = {"user_id": DEV.user_id, **params}
        listed = call(root, "GET", "/api/v1/memory/insights", params=params)
        assert listed.status_code == 200, listed.text
        assert [r["text"] for r in listed.json()["data"]["insights"]] == [
            f"An insight of acme/{project}."]
        tree = call(root, "GET", f"/api/v1/memory/explain/{written[project].id}", params=params)
        assert tree.status_code == 200, tree.text
        assert tree.json()["data"]["text"] == f"An insight of acme/{project}."
        for route in ("worldview", "relations"):
            resp = call(root, "GET", f"/api/v1/memory/{route}", params=params)
            assert resp.status_code == 200, resp.text


def test_an_insight_citing_thousands_lists_its_first_evidence_and_counts_them_all(
        root: Path) -> None:
    # every id of a hand-written insight's evidence was answered (CLI --json, API, MCP):
    # 3,000 ids in one row, where a lesson lists its first 20 and counts them all
    from everos_reflect.api import mcp_server
    from everos_reflect.model import Kind, UserRef

    cited = [f"ep_20261012_{n:04d}" for n in range(1, 3001)]
    rt = Runtime(root, embedder=HashEmbedder(16))
    try:
        rt.store.append(UserRef.of("ada"), Kind.INSIGHT, {
            "timestamp": "2026-10-12T09:00:00+00:00", "evidence": cited, "depth": 1,
            "status": "active"}, {"Insight": "Deploys break on Fridays."})
        [spec] = [t for t in mcp_server.tools() if t.name == "insights"]
        (mcp,) = mcp_server.call(rt, spec, {"user_id": "ada"})["insights"]
    finally:
        rt.close()
    assert mcp["evidence"] == cited[:20] and mcp["evidence_count"] == 3_000
    api = call(root, "GET", "/api/v1/memory/insights", params={"user_id": "ada"})
    assert api.status_code == 200, api.text
    (row,) = api.json()["data"]["insights"]
    assert row == mcp
    (cli_row,) = json.loads(run(root, "insights", "--user", "ada", "--json").stdout)["insights"]
    assert (cli_row["evidence"], cli_row["evidence_count"]) == (cited[:20], 3_000)
    text = run(root, "insights", "--user", "ada")
    assert text.exit_code == 0, text.output
    assert f"  evidence: {', '.join(cited[:20])} +2980 more" in text.output


def test_insights_give_a_hand_written_insight_on_one_line_and_a_repeated_id_once(
        root: Path) -> None:
    # a line of the text printed as a line of its own (one like a row of the listing read
    # as one), where `lessons` folds a lesson onto its line; an id written twice in
    # `evidence` was listed and counted twice, where a lesson and explain count it once
    from everos_reflect.model import Kind, UserRef

    rt = Runtime(root, embedder=HashEmbedder(16))
    try:
        insight = rt.store.append(UserRef.of("ada"), Kind.INSIGHT, {
            "timestamp": "2026-10-13T09:00:00+00:00", "depth": 1, "status": "active",
            "evidence": ["ep_20261012_0001", "ep_20261012_0002", "ep_20261012_0001"]},
            {"Insight": "Line one.\nin_20261013_0099  ada  depth 1  2026-10-13\nLine three."})
    finally:
        rt.close()
    text = run(root, "insights", "--user", "ada")
    assert text.exit_code == 0, text.output
    assert text.output.splitlines()[:3] == [
        f"{insight.id}  ada  depth 1  2026-10-13",
        "  Line one. in_20261013_0099 ada depth 1 2026-10-13 Line three.",
        "  evidence: ep_20261012_0001, ep_20261012_0002"]
    (row,) = call(root, "GET", "/api/v1/memory/insights",
                  params={"user_id": "ada"}).json()["data"]["insights"]
    assert (row["evidence"], row["evidence_count"]) == (
        ["ep_20261012_0001", "ep_20261012_0002"], 2)
