"""reflect_episodes end to end on small roots: Select → Merge → Re-extract → Deprecate (SPEC §5).

HashEmbedder (similar = shared words) and ScriptedLLM / the extractive provider; every root
under tmp_path. The seed walkthrough (docs/reflection.md) runs through the real Engine.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.engine.engine import Engine
from everos_reflect.errors import ProviderUnavailable
from everos_reflect.index.db import db_path
from everos_reflect.index.search import search
from everos_reflect.llm import ExtractiveLLM, ScriptedLLM
from everos_reflect.llm.base import MergeRequest, MergeResult
from everos_reflect.model import Entry, Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import journal
from tests.reflect_fixtures import (
    ANDREW,
    add_episode,
    add_fact,
    all_entries,
    check_invariants,
    index_deprecations,
    make_runtime,
    reports,
    run_reflection,
    seed_pets,
)

SEED_TITLE = "Andrew's pet adoption journey"
SEED_NARRATIVE = (
    "Andrew initially had no pets: his Denver apartment does not allow a dog. He later adopted "
    "a dog named Toby, a three-year-old lab mix, and then adopted another dog named Buddy. "
    "Andrew now has two dogs, Toby and Buddy."
)
SEED_FACTS = [
    "Andrew had no pets because his Denver apartment does not allow a dog.",
    "Andrew adopted a dog named Toby, a three-year-old lab mix.",
    "Andrew adopted another dog named Buddy.",
    "Andrew now has two dogs, Toby and Buddy.",
]


def topic(rt: Runtime, ref: UserRef, month: int, word: str, n: int) -> list[Entry]:
    """``n`` episodes on one topic, a day apart, in ``month`` (months apart never cluster)."""
    return [add_episode(rt, ref, f"2026-{month:02d}-{day:02d}T10:00:00+00:00",
                        f"Andrew {word} update {day}",
                        f"Andrew talked about his {word} plans again. The {word} note {day}.")
            for day in range(1, n + 1)]


def narratives(rt: Runtime) -> list[Entry]:
    return [e for e in rt.store.entries(ANDREW, Kind.EPISODE) if e.parent_type == "cluster"]


def echo_merge(req: MergeRequest) -> MergeResult:
    """A faithful merge: the members' text, in order (so the coverage guard is satisfied)."""
    parts = ([req.existing.content] if req.existing else []) + [m.content for m in
                                                                req.chronological()]
    return MergeResult(req.chronological()[-1].subject, "\n\n".join(parts), provider="scripted",
                       model="echo")


# --------------------------------------------------------------------------- the seed


def test_seed_walkthrough_ends_as_one_narrative_that_search_finds(root: Path) -> None:
    llm = ScriptedLLM([(SEED_TITLE, SEED_NARRATIVE)], [SEED_FACTS])
    rt = make_runtime(root, llm)
    (root / "ome.toml").write_text("[strategies.reflect_episodes]\nenabled = true\n")
    sources = seed_pets(rt)
    ids = [e.id for e in sources]

    outcome = Engine(rt).trigger("reflect_episodes", timeout=60)

    assert outcome.status == "ok", outcome.error
    assert outcome.counts["merged"] == 1
    request = llm.merge_requests[0]
    assert request.mode == "init" and request.existing is None
    assert [m.id for m in request.members] == ids  # chronological
    [narrative] = narratives(rt)
    assert narrative.subject == SEED_TITLE and narrative.content == SEED_NARRATIVE
    assert narrative.session_id is None
    assert narrative.sources == ids
    assert narrative.meta["timestamp"] == sources[-1].timestamp  # the latest source's
    assert narrative.id.startswith("ep_") and narrative.parent_id.startswith("cl_")
    # Markdown: each source file's frontmatter maps the source to the narrative ...
    for source in sources:
        log = rt.store.read(rt.store.path_for_id(ANDREW, source.id))
        assert log.deprecated_entries == {source.id: narrative.id}
    # ... the facts are re-extracted under the narrative ...
    facts = rt.store.entries(ANDREW, Kind.ATOMIC_FACT)
    assert [f.content for f in facts] == SEED_FACTS
    assert {f.parent_id for f in facts} == {narrative.id}
    # ... and the index agrees.
    assert index_deprecations(rt) == {i: narrative.id for i in ids}
    top = search(rt, "how many pets does Andrew have", user_id="u_andrew")
    assert top[0].id == narrative.id and top[0].session_id is None
    assert {h.id for h in top}.isdisjoint(ids)
    # The audit answers the sqlite3 query of SPEC §6.
    with sqlite3.connect(db_path(root)) as conn:
        rows = conn.execute(
            "SELECT cluster_id, mode, source_count, merged_entry_id FROM reflection_report "
            "ORDER BY created_at DESC LIMIT 10;").fetchall()
    assert rows == [(narrative.parent_id, "init", 3, narrative.id)]
    [report] = reports(rt)
    assert report["status"] == "ok" and report["source_members"] == ids
    assert (report["provider"], report["model"]) == ("scripted", "scripted-v1")
    assert report["new_fact_count"] == 4 and report["run_id"] == outcome.run_id
    assert report["fact_coverage"] >= 0.8
    check_invariants(rt)


def test_a_second_run_with_nothing_new_changes_nothing(root: Path) -> None:
    rt = make_runtime(root, ScriptedLLM(fallback=ExtractiveLLM()))
    seed_pets(rt)
    run_reflection(rt)
    before = {p: p.read_bytes() for p in rt.store.iter_files()}

    counts = run_reflection(rt)

    assert counts.get("merged", 0) == 0
    assert {p: p.read_bytes() for p in rt.store.iter_files()} == before
    assert len(reports(rt)) == 1


def test_update_mode_folds_only_the_new_member_into_the_narrative(root: Path) -> None:
    llm = ScriptedLLM([(SEED_TITLE, SEED_NARRATIVE), echo_merge], [SEED_FACTS],
                      fallback=ExtractiveLLM())
    rt = make_runtime(root, llm)
    seed_pets(rt)
    run_reflection(rt)
    [first] = narratives(rt)
    later = add_episode(rt, ANDREW, "2026-09-20T09:00:00-07:00", "Andrew and his two dogs",
                        "Andrew now has two dogs, Toby and Buddy, and a dog walker named Sam.")

    counts = run_reflection(rt, run_id="run_two")

    assert counts["merged"] == 1
    request = llm.merge_requests[1]
    assert request.mode == "update"
    assert request.existing is not None and request.existing.id == first.id
    assert [m.id for m in request.members] == [later.id]
    second = next(e for e in narratives(rt) if e.id != first.id)
    assert second.sources == [first.id, later.id]
    entries = all_entries(rt)
    assert entries[first.id].deprecated_by == second.id
    assert entries[later.id].deprecated_by == second.id
    # the first narrative's facts go with it
    old_facts = [e for e in entries.values() if e.parent_id == first.id]
    assert len(old_facts) == 4 and {f.deprecated_by for f in old_facts} == {second.id}
    update = reports(rt)[-1]
    assert (update["mode"], update["source_count"], update["source_members"]) == (
        "update", 1, [later.id])
    assert update["deprecated_fact_count"] == 4
    check_invariants(rt)


# --------------------------------------------------------------------------- selection limits


def test_largest_cluster_first_and_at_most_max_clusters_per_user(root: Path) -> None:
    llm = ScriptedLLM(fallback=ExtractiveLLM())
    rt = make_runtime(root, llm, window_days=10)
    small = topic(rt, ANDREW, 1, "garden", 2)
    big = topic(rt, ANDREW, 4, "climbing", 4)
    middle = topic(rt, ANDREW, 7, "sourdough", 3)

    counts = run_reflection(rt, max_clusters_per_run=2)

    assert counts["merged"] == 2
    assert [r["source_members"] for r in reports(rt)] == [[e.id for e in big],
                                                         [e.id for e in middle]]
    assert all(e.deprecated_by is None for e in rt.store.entries(ANDREW, Kind.EPISODE)
               if e.id in {s.id for s in small})

    run_reflection(rt, max_clusters_per_run=2)

    assert reports(rt)[-1]["source_members"] == [e.id for e in small]
    check_invariants(rt)


def test_cap_per_merge_takes_the_oldest_and_defers_the_rest(root: Path) -> None:
    llm = ScriptedLLM(fallback=ExtractiveLLM())
    rt = make_runtime(root, llm)
    episodes = topic(rt, ANDREW, 3, "garden", 5)

    counts = run_reflection(rt, max_sources_per_merge=3)

    assert counts["merged"] == 1 and counts["deferred_sources"] == 2
    assert [m.id for m in llm.merge_requests[0].members] == [e.id for e in episodes[:3]]
    live = {e.id for e in rt.store.entries(ANDREW, Kind.EPISODE) if e.deprecated_by is None}
    assert {e.id for e in episodes[3:]} <= live

    run_reflection(rt, max_sources_per_merge=3)

    request = llm.merge_requests[1]
    assert request.mode == "update" and [m.id for m in request.members] == [
        e.id for e in episodes[3:]]
    assert not {e.id for e in episodes} & {
        e.id for e in rt.store.entries(ANDREW, Kind.EPISODE) if e.deprecated_by is None}
    check_invariants(rt)


def test_users_of_every_tenant_are_processed(root: Path) -> None:
    rt = make_runtime(root, ScriptedLLM(fallback=ExtractiveLLM()))
    sam = UserRef("acme_app", "support_bot", "u_sam")
    seed_pets(rt)
    seed_pets(rt, sam)

    counts = run_reflection(rt)

    assert counts["merged"] == 2
    assert {(r["app_id"], r["owner_id"]) for r in reports(rt)} == {
        ("default_app", "u_andrew"), ("acme_app", "u_sam")}


# --------------------------------------------------------------------------- failures


def test_provider_failure_skips_only_that_cluster_and_writes_nothing_for_it(root: Path) -> None:
    def merge(req: MergeRequest) -> MergeResult:
        if "garden" in req.members[0].content:
            raise ProviderUnavailable("LLM 'm' at fake: HTTP 500 after 3 retries")
        return ExtractiveLLM().merge(req)

    llm = ScriptedLLM([merge, merge], fallback=ExtractiveLLM())
    rt = make_runtime(root, llm, window_days=10)
    garden = topic(rt, ANDREW, 1, "garden", 3)
    climbing = topic(rt, ANDREW, 5, "climbing", 2)
    garden_files = {p: p.read_bytes() for e in garden for p in
                    [rt.store.path_for_id(ANDREW, e.id)]}

    counts = run_reflection(rt)

    assert counts["failed"] == 1 and counts["merged"] == 1
    assert {p: p.read_bytes() for p in garden_files} == garden_files
    failed = next(r for r in reports(rt) if r["status"] == "failed")
    assert failed["source_members"] == [e.id for e in garden]
    assert failed["merged_entry_id"] is None and "HTTP 500" in failed["error"]
    ok = next(r for r in reports(rt) if r["status"] == "ok")
    assert ok["source_members"] == [e.id for e in climbing]
    check_invariants(rt)


def test_an_empty_narrative_fails_the_cluster(root: Path) -> None:
    rt = make_runtime(root, ScriptedLLM([("Title", "   ")]))
    seed_pets(rt)

    counts = run_reflection(rt)

    assert counts["failed"] == 1 and not narratives(rt)
    assert "empty narrative" in reports(rt)[0]["error"]


def _edit_text(rt: Runtime, entry: Entry, old: str, new: str) -> None:
    path = rt.store.path_for_id(ANDREW, entry.id)
    path.write_text(path.read_text("utf-8").replace(old, new), "utf-8")


def test_source_edited_during_the_merge_is_not_archived_and_retried_next_run(
    root: Path,
) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    sources = seed_pets(rt)

    def edit_then_merge(req: MergeRequest) -> MergeResult:
        _edit_text(rt, sources[1], "three-year-old", "four-year-old")  # a hand edit meanwhile
        return ExtractiveLLM().merge(req)

    rt.__dict__["llm"] = ScriptedLLM([edit_then_merge], fallback=ExtractiveLLM())

    counts = run_reflection(rt)

    assert counts["stale"] == 1 and "merged" not in counts
    assert not narratives(rt)
    assert all(e.deprecated_by is None for e in all_entries(rt).values())
    [report] = reports(rt)
    assert report["status"] == "stale" and f"{sources[1].id} was edited" in report["error"]

    counts = run_reflection(rt)  # the next run merges the current text

    assert counts["merged"] == 1
    [narrative] = narratives(rt)
    assert "four-year-old" in narrative.content
    check_invariants(rt)


def test_source_archived_by_hand_after_select_is_not_rearchived(root: Path) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    sources = seed_pets(rt)

    def archive_then_merge(req: MergeRequest) -> MergeResult:
        rt.store.deprecate(ANDREW, {sources[0].id: sources[2].id})
        return ExtractiveLLM().merge(req)

    rt.__dict__["llm"] = ScriptedLLM([archive_then_merge], fallback=ExtractiveLLM())

    counts = run_reflection(rt)

    assert counts["stale"] == 1
    entries = all_entries(rt)
    assert entries[sources[0].id].deprecated_by == sources[2].id  # the hand edit stands
    assert entries[sources[1].id].deprecated_by is None
    assert "archived toward" in reports(rt)[0]["error"]


def test_edit_after_the_narrative_is_written_withdraws_it(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    sources = seed_pets(rt)

    def edit_at(step: str) -> None:
        if step == journal.FACTS:
            _edit_text(rt, sources[2], "two dogs", "two dogs and a cat")

    monkeypatch.setattr(journal, "checkpoint", edit_at)

    counts = run_reflection(rt)

    assert counts["stale"] == 1
    [narrative] = narratives(rt)
    entries = check_invariants(rt)
    assert entries[narrative.id].deprecated_by == narrative.id  # withdrawn
    assert all(entries[s.id].deprecated_by is None for s in sources)
    facts = [e for e in entries.values() if e.parent_id == narrative.id]
    assert facts and {f.deprecated_by for f in facts} == {narrative.id}
    hits = search(rt, "Andrew dogs Toby Buddy", user_id="u_andrew", top_k=10)
    assert narrative.id not in {h.id for h in hits}
    assert {s.id for s in sources} <= {h.id for h in hits}


def test_source_facts_are_archived_with_their_episode(root: Path) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    sources = seed_pets(rt)
    fact = add_fact(rt, ANDREW, sources[2], "Andrew adopted another dog named Buddy.")

    run_reflection(rt)

    [narrative] = narratives(rt)
    assert all_entries(rt)[fact.id].deprecated_by == narrative.id
    assert reports(rt)[0]["deprecated_fact_count"] == 1
    assert index_deprecations(rt)[fact.id] == narrative.id


def test_stop_request_ends_the_run_between_clusters(root: Path) -> None:
    from everos_reflect.engine.registry import RunContext, validate_strategy_settings
    from everos_reflect.strategies.reflect import ReflectEpisodes

    rt = make_runtime(root, ScriptedLLM(fallback=ExtractiveLLM()), window_days=10,
                      max_concurrency=1)
    topic(rt, ANDREW, 1, "garden", 3)
    topic(rt, ANDREW, 5, "climbing", 2)
    stop = {"now": False}

    def merge_and_stop(req: MergeRequest) -> MergeResult:
        stop["now"] = True
        return ExtractiveLLM().merge(req)

    rt.__dict__["llm"] = ScriptedLLM([merge_and_stop], fallback=ExtractiveLLM())
    values = validate_strategy_settings("reflect_episodes", {}, "ome.toml")
    counts = ReflectEpisodes().run(RunContext(rt, values, "run_stop", "manual",
                                              should_stop=lambda: stop["now"]))

    assert "merged" not in counts and not narratives(rt) and not reports(rt)


# --------------------------------------------------------------------------- reports command


def test_reports_command_lists_newest_first_as_json_and_table(root: Path) -> None:
    rt = make_runtime(root, ScriptedLLM(fallback=ExtractiveLLM()), window_days=10)
    topic(rt, ANDREW, 1, "garden", 3)
    topic(rt, ANDREW, 5, "climbing", 2)
    run_reflection(rt)
    rt.close()
    runner = CliRunner()

    result = runner.invoke(cli, ["reports", "--root", str(root), "--json", "--limit", "1"])

    assert result.exit_code == 0, result.output
    [row] = json.loads(result.output)["reports"]
    newest = reports(make_runtime(root, ExtractiveLLM()))[-1]
    assert row["id"] == newest["id"] and row["source_members"] == newest["source_members"]
    assert row["status"] == "ok" and row["provider"] == "extractive"

    table = runner.invoke(cli, ["reports", "--root", str(root)])

    assert table.exit_code == 0 and "extractive" in table.output
    assert table.output.count(" init ") == 2


def test_reports_command_on_a_root_without_reports_says_so(root: Path) -> None:
    result = CliRunner().invoke(cli, ["reports", "--root", str(root)])
    assert result.exit_code == 0 and "No Reflection reports yet" in result.output
    empty = CliRunner().invoke(cli, ["reports", "--root", str(root), "--json"])
    assert json.loads(empty.output) == {"reports": []}


def test_reports_after_the_audit_was_lost_does_not_say_nothing_was_merged(root: Path) -> None:
    """The audit lives in ``system.db`` only (SPEC §6): ``.index/`` removed and rebuilt, it is
    empty, while the logs still hold the narratives. ``reports`` said "nothing has been
    merged in this root", which the logs contradict."""
    rt = make_runtime(root, ScriptedLLM(fallback=ExtractiveLLM()), window_days=10)
    topic(rt, ANDREW, 1, "garden", 3)
    topic(rt, ANDREW, 5, "climbing", 2)
    run_reflection(rt)
    rt.close()
    for path in (root / ".index" / "sqlite").iterdir():
        path.unlink()
    assert CliRunner().invoke(cli, ["reindex", "--root", str(root)]).exit_code == 0
    result = CliRunner().invoke(cli, ["reports", "--root", str(root)])
    assert result.exit_code == 0, result.output
    assert "nothing has been merged" not in result.output
    assert "2 merged narratives" in result.output and "reindex" in result.output
    empty = CliRunner().invoke(cli, ["reports", "--root", str(root), "--json"])
    assert json.loads(empty.output) == {"reports": []}


def test_reports_command_on_a_missing_root_is_one_clear_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["reports", "--root", str(tmp_path / "nope")])
    assert result.exit_code == 1 and "no memory root" in result.output


# --------------------------------------------------------------------------- the example root


@pytest.mark.slow
def test_extractive_run_on_the_example_root_merges_and_a_rebuild_agrees(tmp_path: Path) -> None:
    """End to end with the shipped defaults: bundled MiniLM embedder, extractive provider."""
    import shutil

    from everos_reflect.index.sync import Indexer
    from everos_reflect.lint import scan_store

    root = tmp_path / "root"
    example = Path(__file__).resolve().parent.parent / "memory_root_example"
    shutil.copytree(example, root, ignore=shutil.ignore_patterns(".index"))
    rt = Runtime(root)
    users = list(rt.store.iter_users())
    original = {ref: set(all_entries(rt, ref)) for ref in users}

    counts = run_reflection(rt)

    assert counts["merged"] >= 5, counts
    check_invariants(rt)
    merged = [r for r in reports(rt) if r["status"] == "ok"]
    assert len(merged) == counts["merged"]
    assert {r["provider"] for r in merged} == {"extractive"}
    entries = {ref: all_entries(rt, ref) for ref in users}
    for ref in users:
        assert original[ref] <= set(entries[ref])
    for row in merged:
        mine = entries[UserRef(row["app_id"], row["project_id"], row["owner_id"])]
        narrative = mine[row["merged_entry_id"]]
        assert narrative.parent_type == "cluster" and narrative.session_id is None
        for source in narrative.sources:
            assert mine[source].deprecated_by == narrative.id
    assert scan_store(rt.store).problems == []  # lint stays clean
    before = {ref: index_deprecations(rt, ref) for ref in users}

    Indexer(rt).reindex()

    assert {ref: index_deprecations(rt, ref) for ref in users} == before
    for ref in users:
        assert before[ref] == {i: e.deprecated_by for i, e in entries[ref].items()
                               if e.deprecated_by}
