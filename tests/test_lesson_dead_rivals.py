"""A hand-written lesson's ``contested_with`` naming what is no live lesson of its task type
(a task id, a lesson deleted by hand, one retired or of another task type) names no rival:
nothing rewrites a person's lesson, so it was briefed and listed as contested for good, and
``lint`` said nothing. It is read as active, those ids are not listed, and ``lint`` names them."""

from __future__ import annotations

import json

from click.testing import CliRunner

from everos_reflect.briefing.build import build_briefing
from everos_reflect.cli.main import cli
from everos_reflect.index.search import search
from everos_reflect.index.sync import Indexer
from everos_reflect.lint import lint_report
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.insight_views import explain
from tests.test_hand_written_lesson_rivals import REF, lesson


def test_a_rival_that_is_no_live_lesson_is_no_rival_and_lint_names_it(rt: Runtime) -> None:
    rival = lesson(rt, "Retry at once.")  # contested, naming no list: as written
    retired = lesson(rt, "Never retry.", status="retired")
    other = lesson(rt, "Cache the build.", task_type="build", status="active")
    task = lesson(rt, "Check the logs first.", contested_with=["tk_20261012_0001"])
    gone = lesson(rt, "Pin the image tag.", contested_with=["ls_20261001_0009"])
    mixed = lesson(rt, "Wait before a retry.",
                   contested_with=[retired, other, rival, "tk_20261012_0001",
                                   "ls_20261001_0009"])

    out = CliRunner().invoke(cli, ["lessons", "--task-type", "deploy", "--user", "u_ops",
                                   "--json", "--root", str(rt.root)])
    listed = {x["id"]: (x["status"], x["contested_with"])
              for x in json.loads(out.output)["lessons"]}
    assert listed[task] == listed[gone] == ("active", [])
    assert listed[mixed] == ("contested", [rival])

    brief = build_briefing(rt, REF, "deploy", task_type="deploy", max_tokens=2000)
    marked = {i.id for i in brief.items if "contested" in (i.note or "")}
    assert task not in marked and gone not in marked and mixed in marked

    messages = [p["message"] for p in lint_report(rt.root)["problems"]]
    tail = "a contest is decided against live lessons of its task type alone)"
    assert f"entry {task}: contested_with names tk_20261012_0001, which is no live lesson " \
        f"of task type 'deploy': no rival (the lesson is read as active: no live rival is " \
        f"left; {tail}" in messages
    assert f"entry {gone}: contested_with names ls_20261001_0009, which is no live lesson " \
        f"of task type 'deploy': no rival (the lesson is read as active: no live rival is " \
        f"left; {tail}" in messages
    assert f"entry {mixed}: contested_with names {retired}, {other}, tk_20261012_0001 and 1 " \
        f"more, which are " \
        f"no live lesson of task type 'deploy': no rival (not read as one; {tail}" in messages
    assert not any(m.startswith(f"entry {rival}:") for m in messages)


def test_search_serves_a_lesson_whose_rivals_are_no_live_lessons_as_active(rt: Runtime) -> None:
    rival = lesson(rt, "Retry at once.")
    retired = lesson(rt, "Never retry.", status="retired")
    task = lesson(rt, "Check the logs first.", contested_with=["tk_20261012_0001"])
    gone = lesson(rt, "Pin the image tag.", contested_with=["ls_20261001_0009"])
    dead = lesson(rt, "Wait before a retry.", contested_with=[retired])
    mixed = lesson(rt, "Roll back first.", contested_with=[retired, rival])
    Indexer(rt).scan()

    found = {h.id: h.status for h in search(rt, "lesson", kinds=["lesson"], top_k=10)}
    assert (found[task], found[gone], found[dead]) == ("active", "active", "active")
    assert (found[mixed], found[rival]) == ("contested", "contested")
    out = CliRunner().invoke(cli, ["lessons", "--task-type", "deploy", "--user", "u_ops",
                                   "--json", "--root", str(rt.root)])
    listed = {x["id"]: x["status"] for x in json.loads(out.output)["lessons"]}
    assert {i: found[i] for i in listed} == listed  # search and `lessons` agree


def test_explain_serves_a_lesson_contested_by_no_live_rival_as_active(rt: Runtime) -> None:
    rival = lesson(rt, "Retry at once.")
    task = lesson(rt, "Check the logs first.", contested_with=["tk_20261012_0001"])
    empty = lesson(rt, "Pin the image tag.", contested_with=[])
    mixed = lesson(rt, "Roll back first.", contested_with=["ls_20261001_0009", rival])

    explained = {i: explain(rt, REF, i)["status"] for i in (rival, task, empty, mixed)}

    assert explained == {rival: "contested", task: "active", empty: "active",
                         mixed: "contested"}
