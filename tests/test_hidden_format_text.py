"""Invisible formatting characters -- the bidi embeddings, overrides and isolates that display
text in another order than it is stored ("Trojan Source", U+202A-U+202E, U+2066-U+2069), and
the characters that show nothing (zero-width space, BOM, tag characters) -- are refused in new
text: what a person sends (``add``, the API, a task, a resolution's note) gets an error naming
the character and where it is; an LLM reply item holding one is refused alone and said in the
``derivation_report`` row, the reply's other items written. The joiners (emoji, Persian) and the
right-to-left marks are ordinary writing and kept. Through the CLI, the in-process API and, for
the LLM, the real client against the loopback fake server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.index.audit import list_derivations
from everos_reflect.model import Kind
from everos_reflect.runtime import Runtime
from tests.api_client import ApiClient
from tests.test_aside_settings import ADA, convictions, edges, episodes, insights, run, tasks
from tests.test_aside_settings import rt as rt  # the fake server's runtime

pytest_plugins = ["tests.fake_openai"]

RLO = "\u202e"
HIDDEN = [("\u202e", "U+202E (RIGHT-TO-LEFT OVERRIDE)"),
          ("\u2066", "U+2066 (LEFT-TO-RIGHT ISOLATE)"),
          ("\u200b", "U+200B (ZERO WIDTH SPACE)"),
          ("\ufeff", "U+FEFF (ZERO WIDTH NO-BREAK SPACE)"),
          ("\U000e0041", "U+E0041 (TAG LATIN CAPITAL LETTER A)")]


def logs_hold(root: Path, char: str) -> bool:
    return any(char in p.read_text("utf-8") for p in root.rglob("*.md"))


@pytest.mark.parametrize(("char", "named"), HIDDEN, ids=[n for _, n in HIDDEN])
def test_add_refuses_an_invisible_formatting_character_naming_it_and_where(
        root: Path, char: str, named: str) -> None:
    result = CliRunner().invoke(cli, ["add", "--root", str(root), "--user", "ada",
                                      "--subject", "Pay", "--content", f"pay 10{char}0 EUR"])
    assert result.exit_code != 0
    assert f"content holds {named} at character 7" in result.output, result.output
    assert not list(root.rglob("episode-*.md"))


def test_add_keeps_joiners_and_right_to_left_marks(root: Path) -> None:
    text = ("family \U0001f468\u200d\U0001f469\u200d\U0001f467, "
            "\u0645\u06cc\u200c\u0634\u0648\u062f \u200f(rtl)")
    result = CliRunner().invoke(cli, ["add", "--root", str(root), "--user", "ada",
                                      "--subject", "Mixed", "--content", text])
    assert result.exit_code == 0, result.output
    assert logs_hold(root, text)


def test_the_api_refuses_one_in_an_episode_a_task_and_a_resolution_note(rt: Runtime) -> None:
    call = ApiClient(rt)
    resp = call("POST", "/api/v1/memory/episodes", json={
        "user_id": "ada", "subject": f"evil{RLO}txt.exe", "content": "x"})
    assert resp.status_code == 422
    assert "U+202E (RIGHT-TO-LEFT OVERRIDE) at character 5" in resp.text
    resp = call("POST", "/api/v1/tasks", json={
        "user_id": "ada", "task_type": "deploy", "goal": "Deploy\u2067 it", "steps": ["go"],
        "outcome": "success"})
    assert resp.status_code == 422
    assert "U+2067 (RIGHT-TO-LEFT ISOLATE) at character 7" in resp.text
    [rel, _] = edges(rt)
    resp = call("POST", f"/api/v1/memory/relations/{rel}/resolve",
                json={"user_id": "ada", "note": f"fine{RLO}"})
    assert resp.status_code in (400, 422), resp.text
    assert "U+202E (RIGHT-TO-LEFT OVERRIDE) at character 5" in resp.text
    assert rt.store.get(ADA, rel).meta.get("status") == "active"
    assert not logs_hold(rt.root, RLO) and not logs_hold(rt.root, "\u2067")


def test_the_cli_refuses_one_in_a_task_and_a_resolution_note(rt: Runtime) -> None:
    root = str(rt.root)
    [rel, _] = edges(rt)
    result = CliRunner().invoke(cli, ["resolve", rel, "--root", root, "--user", "ada",
                                      "--note", f"ok{RLO}"])
    assert result.exit_code != 0
    assert "U+202E (RIGHT-TO-LEFT OVERRIDE) at character 3" in result.output, result.output
    result = CliRunner().invoke(cli, ["task", "add", "--root", root, "--user", "ada",
                                      "--type", "deploy", "--goal", f"Deploy{RLO}",
                                      "--step", "go", "--outcome", "success"])
    assert result.exit_code != 0
    assert "U+202E (RIGHT-TO-LEFT OVERRIDE) at character 7" in result.output, result.output
    assert not logs_hold(rt.root, RLO)


# -- LLM replies: the item holding one is refused alone, the others written ---------------------

BAD = f"Reviews are skipped{RLO} before launches."


def refused_row(rt: Runtime, strategy: str) -> dict[str, Any]:
    [row] = [r for r in list_derivations(rt.db(), strategy=strategy)
             if "U+202E" in str(r["error"] or "")]
    return row


def test_an_insight_holding_one_is_refused_alone(rt: Runtime, fake_openai: Any) -> None:
    episodes(rt)
    fake_openai.script({"questions": ["What slips?"]},
                       {"insights": [{"insight": BAD, "evidence": [1, 2]},
                                     {"insight": "Launch dates beat reviews.",
                                      "evidence": [1, 3]}]})
    counts = run(rt, "reflect_insights", threshold=10.0, min_episodes=2, questions=1)
    assert counts.get("refused") == 1 and "failed" not in counts, counts
    row = refused_row(rt, "reflect_insights")
    assert row["status"] == "ok"
    assert ("insight refused: its text holds U+202E (RIGHT-TO-LEFT OVERRIDE) at character 20"
            in row["error"])
    assert [e.content for e in rt.store.entries(ADA, Kind.INSIGHT)] == [
        "Launch dates beat reviews."]


def test_a_conviction_holding_one_is_refused_alone(rt: Runtime, fake_openai: Any) -> None:
    insights(rt)
    fake_openai.script({"convictions": [
        {"key": "principles", "text": BAD, "evidence": [1, 2]},
        {"key": "risks", "text": "Launch pressure skips review.", "evidence": [1, 2]}]})
    counts = run(rt, "update_worldview")
    assert counts.get("refused") == 1 and "failed" not in counts, counts
    assert "key 'principles': its text holds U+202E" in refused_row(rt, "update_worldview")["error"]
    assert [e.meta["key"] for e in rt.store.entries(ADA, Kind.CONVICTION)] == ["risks"]


def test_an_edge_holding_one_is_refused(rt: Runtime, fake_openai: Any) -> None:
    convictions(rt)
    fake_openai.script({"contradictions": [{"between": [1, 2], "text": BAD}]})
    counts = run(rt, "detect_contradictions")
    assert counts.get("refused") == 1 and "failed" not in counts, counts
    assert "edge refused: its text holds U+202E" in refused_row(
        rt, "detect_contradictions")["error"]
    assert not rt.store.entries(ADA, Kind.RELATION)


def test_a_reconciliation_holding_one_is_refused(rt: Runtime, fake_openai: Any) -> None:
    edges(rt)
    before = len(rt.store.entries(ADA, Kind.INSIGHT))
    fake_openai.script({"insight": BAD, "evidence": [1, 2]})
    counts = run(rt, "reconcile")
    assert counts.get("refused") == 1 and "failed" not in counts, counts
    assert "reconciliation refused: its text holds U+202E" in refused_row(rt, "reconcile")["error"]
    assert len(rt.store.entries(ADA, Kind.INSIGHT)) == before


def test_a_lesson_holding_one_is_refused_alone(rt: Runtime, fake_openai: Any) -> None:
    tasks(rt)
    fake_openai.script({"lessons": [BAD, "Retry the registry pull."], "avoid": []})
    counts = run(rt, "learn_lessons")
    assert counts.get("refused") == 1 and "failed" not in counts, counts
    assert "lesson refused: its text holds U+202E" in refused_row(rt, "learn_lessons")["error"]
    assert [e.content for e in rt.store.entries(ADA, Kind.LESSON)] == ["Retry the registry pull."]


def test_a_revision_holding_one_is_refused(root: Path, fake_openai: Any) -> None:
    from tests.test_provenance import DEV, edit_file
    from tests.test_revision_rules import revalidation_runtime

    rt, eps, first, _second = revalidation_runtime(root, fake_openai)
    try:
        edit_file(rt.store.path_for_id(DEV, eps[1].id), "on day 16", "on day 17")
        from everos_reflect.index.sync import Indexer

        Indexer(rt).scan()
        fake_openai.script({"verdict": "revise", "insight": BAD, "evidence": [1, 2]})
        counts = run(rt, "revalidate_insights")
        assert counts.get("refused") == 1, counts
        assert "a 'revise' verdict: its text holds U+202E" in refused_row(
            rt, "revalidate_insights")["error"]
        assert rt.store.get(DEV, first.id).meta["status"] == "stale"
        assert not logs_hold(root, RLO)
    finally:
        rt.close()


def test_a_merge_may_restate_a_source_holding_one_but_not_add_one(
        rt: Runtime, fake_openai: Any) -> None:
    from everos_reflect.llm.base import MergeMember, MergeRequest
    from everos_reflect.llm.task_catalog import MERGE, merge_request
    from everos_reflect.llm.tasks import InvalidReply, parse_reply

    when = "2026-10-01T09:00:00+00:00"
    from datetime import datetime

    members = [MergeMember("ep_20261001_0001", datetime.fromisoformat(when), "Pay",
                           f"paid 10{RLO}0"),
               MergeMember("ep_20261001_0002", datetime.fromisoformat(when), "Pay", "again")]
    req = merge_request(MergeRequest("init", members))
    title, content = parse_reply(MERGE, {"title": "Pay", "content": f"paid 10{RLO}0, again"},
                                 req)
    assert RLO in content
    with pytest.raises(InvalidReply, match=r"'content' holds U\+200B \(ZERO WIDTH SPACE\) at "
                                           r"character 5"):
        parse_reply(MERGE, {"title": "Pay", "content": "paid\u200b twice"}, req)
    assert title == "Pay"
