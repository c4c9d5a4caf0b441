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
from everos_reflect.strategies import journal
from everos_reflect.strategies.consistency import live_beside_sources
from tests.reflect_fixtures import ANDREW, make_runtime, run_reflection, seed_pets


class Crash(BaseException):
    pass


def test_live_beside_sources_names_only_the_live_ones() -> None:
    found = live_beside_sources({"ep_1": ["ep_a", "ep_b"], "ep_2": ["ep_c"]}, {"ep_b", "ep_1"})
    assert [(f.narrative, f.live_sources) for f in found] == [("ep_1", ("ep_b",))]


def _crashed_after_facts(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    seed_pets(rt)

    def crash_at(step: str) -> None:
        if step == journal.FACTS:
            raise Crash(step)

    monkeypatch.setattr(journal, "checkpoint", crash_at)
    with pytest.raises(Crash):
        run_reflection(rt)
    monkeypatch.setattr(journal, "checkpoint", lambda step: None)
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
    assert any("is live beside its live source(s)" in m for m in messages), messages
    assert any("await recovery" in m for m in messages), messages

    status = runner.invoke(cli, ["status", "--root", str(tmp_path), "--json"])
    assert status.exit_code == 0, status.output
    merges = json.loads(status.stdout)["merges"]
    assert merges["interrupted"] == 1
    [item] = merges["live_beside_sources"]
    assert item["user_id"] == ANDREW.user_id and len(item["live_sources"]) == 3
    text = runner.invoke(cli, ["status", "--root", str(tmp_path)]).stdout
    assert "1 interrupted merge(s) await recovery" in text
    assert "is live beside its live source(s)" in text


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


def test_after_a_complete_merge_lint_finds_nothing_about_merges(tmp_path: Path) -> None:
    rt = make_runtime(tmp_path, ExtractiveLLM())
    seed_pets(rt)
    assert run_reflection(rt)["merged"] == 1
    rt.close()

    lint = CliRunner().invoke(cli, ["lint", "--root", str(tmp_path), "--json"])

    messages = [p["message"] for p in json.loads(lint.stdout)["problems"]]
    assert not [m for m in messages if "live beside" in m or "recovery" in m], messages
