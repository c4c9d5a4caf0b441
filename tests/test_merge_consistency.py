"""``lint`` and ``status`` report what a crash (or a hand edit) can leave of a merge: a live
narrative beside its live sources, interrupted merges awaiting recovery, and an archive link to
a missing entry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.model import Entry
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import journal
from everos_reflect.strategies.consistency import live_beside_sources
from tests.reflect_fixtures import ANDREW, add_episode, make_runtime, run_reflection, seed_pets


class Crash(BaseException):
    pass


def test_live_beside_sources_names_only_the_live_ones() -> None:
    found = live_beside_sources({"ep_1": ["ep_a", "ep_b"], "ep_2": ["ep_c"]}, {"ep_b", "ep_1"})
    assert [(f.narrative, f.live_sources) for f in found] == [("ep_1", ("ep_b",))]


def _crash_at_facts(rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> list[Entry]:
    """A run on the pets Episodes (returned) killed at its facts step, the merge half
    written; checkpoints are no-ops again afterwards."""
    sources = seed_pets(rt)

    def crash_at(step: str) -> None:
        if step == journal.FACTS:
            raise Crash(step)

    monkeypatch.setattr(journal, "checkpoint", crash_at)
    with pytest.raises(Crash):
        run_reflection(rt)
    monkeypatch.setattr(journal, "checkpoint", lambda step: None)
    return sources


def _crashed_after_facts(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    _crash_at_facts(rt, monkeypatch)
    Indexer(rt).scan()  # the index now shows the half-written merge too
    rt.close()


def test_lint_and_status_report_an_unrecovered_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _crashed_after_facts(tmp_path, monkeypatch)
    runner = CliRunner()

    lint = runner.invoke(cli, ["lint", "--root", str(tmp_path), "--json"])
    assert lint.exit_code == 1
    messages = [p["message"] for p in json.loads(lint.stdout)["problems"]]
    assert any("is live beside its live sources" in m for m in messages), messages
    assert any("await recovery" in m for m in messages), messages

    status = runner.invoke(cli, ["status", "--root", str(tmp_path), "--json"])
    assert status.exit_code == 0, status.output
    merges = json.loads(status.stdout)["merges"]
    assert merges["interrupted"] == 1
    [item] = merges["live_beside_sources"]
    assert item["user_id"] == ANDREW.user_id and len(item["live_sources"]) == 3
    text = runner.invoke(cli, ["status", "--root", str(tmp_path)]).stdout
    assert "1 interrupted merge awaits recovery" in text
    assert "is live beside its live sources" in text


def test_lint_reports_an_archive_link_to_a_missing_entry(tmp_path: Path) -> None:
    rt = make_runtime(tmp_path, ExtractiveLLM())
    sources = seed_pets(rt)
    rt.store.deprecate(ANDREW, {sources[0].id: "ep_20260101_0009"})
    rt.close()

    lint = CliRunner().invoke(cli, ["lint", "--root", str(tmp_path)])

    assert lint.exit_code == 1
    assert f"{sources[0].id} points at unknown id ep_20260101_0009" in lint.output


def test_status_reports_an_archive_link_to_a_missing_entry(tmp_path: Path) -> None:
    rt = make_runtime(tmp_path, ExtractiveLLM())
    sources = seed_pets(rt)
    rt.store.deprecate(ANDREW, {sources[0].id: "ep_20260101_0009",
                                sources[1].id: "undone", sources[2].id: sources[2].id})
    Indexer(rt).scan()
    rt.close()
    runner = CliRunner()

    status = runner.invoke(cli, ["status", "--root", str(tmp_path), "--json"])

    assert status.exit_code == 0, status.output
    [item] = json.loads(status.stdout)["merges"]["archived_toward_missing"]
    assert (item["entry"], item["archived_toward"]) == (sources[0].id, "ep_20260101_0009")
    text = runner.invoke(cli, ["status", "--root", str(tmp_path)]).stdout
    assert f"{sources[0].id} points at unknown id ep_20260101_0009" in text


def _lint_and_status_problems(root: Path) -> tuple[set[str], set[str], dict[str, object]]:
    """``file:line: message`` of each problem ``lint`` finds and each ``status`` lists."""
    runner = CliRunner()
    lint = runner.invoke(cli, ["lint", "--root", str(root), "--json"])
    assert lint.exit_code == 1, lint.output
    linted = {f"{p['file']}:{p['line']}: {p['message']}"
              for p in json.loads(lint.stdout)["problems"]}
    status = runner.invoke(cli, ["status", "--root", str(root), "--json"])
    assert status.exit_code == 0, status.output
    doc = json.loads(status.stdout)
    listed = {f"{item['file']}:{problem}" for item in doc["files_with_problems"]
              for problem in item["problems"]}
    return linted, listed, doc


def test_status_from_the_index_lists_the_problems_lint_finds_across_logs(tmp_path: Path) -> None:
    # Each needs the other logs of the user to be seen; status counted from the index and
    # said "no files with problems" of a root lint failed on.
    rt = make_runtime(tmp_path, ExtractiveLLM())
    first, second, third = seed_pets(rt)
    rt.store.deprecate(ANDREW, {first.id: "ep_20260101_0009", second.id: third.id})
    episodes = rt.store.path_for_id(ANDREW, third.id)
    episodes.write_text(episodes.read_text().replace(
        "date: '2026-09-07'\n", f"date: '2026-09-07'\ndeprecated_entries:\n"
        f"  {third.id}: {second.id}\n"))
    facts = rt.store.root / rt.store.rel(episodes).replace(
        "episodes/episode-", ".atomic_facts/atomic_fact-")
    facts.parent.mkdir(parents=True)
    facts.write_text(
        "---\ntype: atomic_fact_daily\nschema_version: 1\nuser_id: u_andrew\n"
        "date: '2026-09-07'\n---\n<!-- entry:af_20260907_0001 -->\n---\n"
        "owner_id: u_andrew\ntimestamp: 2026-09-07T10:00:00-07:00\nparent_type: episode\n"
        "parent_id: ep_20260907_0077\n---\n## Fact\nAndrew has two dogs.\n"
        "<!-- /entry:af_20260907_0001 -->\n")
    Indexer(rt).scan()
    rt.close()

    linted, listed, doc = _lint_and_status_problems(tmp_path)

    assert doc["counts_from"] == "index"
    assert len(linted) == 4, linted
    assert listed == linted
    assert any("ep_20260101_0009" in p for p in listed)
    assert any("is archived in a cycle" in p for p in listed)
    assert any("parent episode ep_20260907_0077 not found" in p for p in listed)
    text = CliRunner().invoke(cli, ["status", "--root", str(tmp_path)]).stdout
    assert "no files with problems" not in text
    assert "line 7: atomic fact af_20260907_0001: parent episode ep_20260907_0077" in text


def test_the_index_checks_scan_the_entries_once_and_look_each_other_up_by_key(
        tmp_path: Path) -> None:
    # A join the planner ordered itself searched all of a user's entries per archived entry:
    # status took 71 s on 600,000 entries instead of 0.2 s. Plans do not depend on the table's size
    # here (the index is never ANALYZEd), so a small root shows the plan a big one gets.
    from everos_reflect.index import db as dbmod
    from everos_reflect.strategies.consistency import index_cross_file_problems

    rt = make_runtime(tmp_path, ExtractiveLLM())
    seed_pets(rt)
    assert run_reflection(rt)["merged"] == 1
    rt.close()
    conn = dbmod.connect(tmp_path, readonly=True)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    index_cross_file_problems(conn)
    conn.set_trace_callback(None)
    assert len(statements) == 4
    for sql in statements:
        plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}")]
        assert sum(step.startswith("SCAN") for step in plan) == 1, (sql, plan)
        # every other entry is looked up by its whole key, not among all of its user's
        assert all(step.endswith("user_id=? AND id=?)") for step in plan
                   if step.startswith("SEARCH")), (sql, plan)
    conn.close()


def test_a_merge_withdrawn_by_recovery_is_no_problem_and_a_hand_made_self_link_is(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A merge abandoned before its point of no return withdraws its narrative by archiving it
    # toward itself; lint called that "archived toward itself" and exited 1 for good.
    rt = make_runtime(tmp_path, ExtractiveLLM())
    sources = _crash_at_facts(rt, monkeypatch)
    log = rt.store.path_for_id(ANDREW, sources[0].id)
    log.write_text(log.read_text().replace("no pets:", "no pets at all:"))  # stale now
    assert run_reflection(rt)["recovered_abandoned"] == 1
    Indexer(rt).scan()
    lint = CliRunner().invoke(cli, ["lint", "--root", str(tmp_path), "--json"])
    assert lint.exit_code == 0, lint.output

    # the same mark by hand on an ordinary Episode hides it with nothing in its place
    other = add_episode(rt, ANDREW, "2026-10-01T10:00:00+00:00", "Rain", "It rained in Denver.")
    rt.store.deprecate(ANDREW, {other.id: other.id})
    Indexer(rt).scan()
    rt.close()
    linted, listed, _doc = _lint_and_status_problems(tmp_path)
    assert linted == listed == {
        f"{rt.store.rel(rt.store.path_for_id(ANDREW, other.id))}:7: deprecated_entries: "
        f"{other.id} is archived toward itself"}


def _mark_for_no_entry(tmp_path: Path) -> str:
    """A root, indexed, whose first log archives ``ep_20260101_0009``: no entry of that log
    (a typo; the entry meant stays live). Returns what lint says of it."""
    rt = make_runtime(tmp_path, ExtractiveLLM())
    first, second, _ = seed_pets(rt)
    log = rt.store.path_for_id(ANDREW, first.id)
    text = log.read_text()
    end = text.index("\n", text.index("\ndate: ") + 1) + 1
    log.write_text(f"{text[:end]}deprecated_entries:\n  ep_20260101_0009: {second.id}\n"
                   f"{text[end:]}")
    Indexer(rt).scan()
    rel = rt.store.rel(log)
    rt.close()
    return f"{rel}:7: deprecated_entries: ep_20260101_0009 is not an entry of this file"


def test_status_from_the_index_names_an_archive_mark_for_no_entry_of_its_log(
        tmp_path: Path) -> None:
    # The index keeps no mark whose key is no entry of the log, so status, counting from it,
    # said "no files with problems" of a typo that archived nothing.
    expected = _mark_for_no_entry(tmp_path)

    linted, listed, doc = _lint_and_status_problems(tmp_path)

    assert doc["counts_from"] == "index"
    assert linted == listed == {expected}


def test_an_index_from_before_records_the_mark_after_its_next_scan(tmp_path: Path) -> None:
    import sqlite3

    from everos_reflect.index import db as dbmod

    expected = _mark_for_no_entry(tmp_path)
    conn = sqlite3.connect(dbmod.db_path(tmp_path))  # as an index built before left it
    conn.execute("UPDATE files SET problems = '[]'")
    conn.execute("DELETE FROM schema_migrations WHERE name = "
                 "'0018_archive_marks_naming_no_entry'")
    conn.commit()
    conn.close()
    rt = make_runtime(tmp_path, ExtractiveLLM())
    Indexer(rt).scan()  # migrates first: every log is read again
    rt.close()

    _linted, listed, _doc = _lint_and_status_problems(tmp_path)

    assert listed == {expected}


def test_after_a_complete_merge_lint_finds_nothing_about_merges(tmp_path: Path) -> None:
    rt = make_runtime(tmp_path, ExtractiveLLM())
    seed_pets(rt)
    assert run_reflection(rt)["merged"] == 1
    rt.close()

    lint = CliRunner().invoke(cli, ["lint", "--root", str(tmp_path), "--json"])

    messages = [p["message"] for p in json.loads(lint.stdout)["problems"]]
    assert not [m for m in messages if "live beside" in m or "recovery" in m], messages
