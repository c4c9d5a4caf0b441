"""A lesson's ``contested_with`` as a person may write it: an empty list, or the lesson's own
id, names no rival. Such a lesson was briefed and listed as contested for good, and ``lint``
said nothing; it is read as active, and ``lint`` names both."""

from __future__ import annotations

import json
from datetime import date

from click.testing import CliRunner

from everos_reflect.briefing.build import build_briefing
from everos_reflect.cli.main import cli
from everos_reflect.index.search import search
from everos_reflect.index.sync import Indexer
from everos_reflect.lint import lint_report
from everos_reflect.model import Kind, UserRef
from everos_reflect.procedural.lessons import read_lesson
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.provenance import lifted_status

REF = UserRef.of("u_ops")
BASE = {"timestamp": "2026-10-20T09:00:00+00:00", "task_type": "deploy", "lesson_type": "do",
        "evidence": ["tk_20261012_0001"], "depth": 1, "status": "contested"}


def lesson(rt: Runtime, text: str, **meta: object) -> str:
    """A hand-written lesson of u_ops, contested unless ``meta`` says otherwise."""
    return rt.store.append(REF, Kind.LESSON, {**BASE, **meta}, {"Lesson": text},
                           day=date(2026, 10, 20)).id


def test_an_empty_or_self_rival_list_is_no_contest_and_lint_names_it(rt: Runtime) -> None:
    empty = lesson(rt, "Check the logs first.", contested_with=[])
    itself = lesson(rt, "Pin the image tag.")
    rt.store.update_meta(REF, itself, {"contested_with": [itself]})
    rival = lesson(rt, "Retry at once.")
    both = lesson(rt, "Wait before a retry.")
    rt.store.update_meta(REF, both, {"contested_with": [both, rival]})
    unnamed = lesson(rt, "Roll back first.")  # contested, no list: as written

    got = {i: read_lesson(rt.store.get(REF, i)) for i in (empty, itself, both, unnamed)}
    assert [(got[i].status, got[i].contested_with) for i in (empty, itself, both, unnamed)] == [
        ("active", ()), ("active", ()), ("contested", (rival,)), ("contested", ())]

    brief = build_briefing(rt, REF, "deploy", task_type="deploy", max_tokens=2000)
    marked = {i.id for i in brief.items if "contested" in (i.note or "")}
    assert empty not in marked and itself not in marked and both in marked
    out = CliRunner().invoke(cli, ["lessons", "--task-type", "deploy", "--user", "u_ops",
                                   "--json", "--root", str(rt.root)])
    listed = {x["id"]: x for x in json.loads(out.output)["lessons"]}
    assert listed[itself]["status"] == listed[empty]["status"] == "active"
    assert listed[both]["contested_with"] == [rival]
    Indexer(rt).scan()
    found = {h.id: h.status for h in search(rt, "lesson", kinds=["lesson"], top_k=10)}
    assert (found[empty], found[itself], found[both]) == ("active", "active", "contested")
    # a stale mark lifted gives a lesson back `contested` only while it names a rival
    assert [lifted_status(rt.store.get(REF, i)) for i in (empty, itself, both)] == [
        "active", "active", "contested"]

    messages = [p["message"] for p in lint_report(rt.root)["problems"]]
    assert f"entry {empty}: status is contested but contested_with names no rival (read as " \
        "active: name the rival lesson, or write status: active)" in messages
    assert f"entry {itself}: contested_with names the lesson itself ({itself}): a lesson is " \
        "no rival of its own (not read as one; with no other rival it is read as active)" \
        in messages
    assert f"entry {both}: contested_with names the lesson itself ({both}): a lesson is no " \
        "rival of its own (not read as one)" in messages
    assert not any(unnamed in m or rival in m.split(":")[0] for m in messages)
