"""A lesson's ``contested_with`` garbled by a hand edit (a number, a list of lists, a very long
string) names no live lesson: the lesson is read as active, the briefing does not mark it
contested, ``lessons`` (CLI, API, MCP) lists no rival for it, and nothing breaks."""

from __future__ import annotations

import json
from datetime import date

from click.testing import CliRunner

from everos_reflect.api import mcp_server
from everos_reflect.briefing.build import build_briefing
from everos_reflect.cli.main import cli
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime

REF = UserRef.of("u_ops")
BASE = {"timestamp": "2026-10-20T09:00:00+00:00", "task_type": "deploy", "lesson_type": "do",
        "evidence": ["tk_20261012_0001"], "depth": 1, "status": "contested"}
GARBLED: list[object] = [12, [12], [["ls_20261020_0001"]], "ls_" + "9" * 5000,
                         [{"ls_20261020_0001": 1}]]


def test_a_garbled_rival_is_no_rival_in_the_briefing_and_the_lessons_answer(
        rt: Runtime) -> None:
    live = rt.store.append(REF, Kind.LESSON, {**BASE, "status": "active"},
                           {"Lesson": "Retry at once."}, day=date(2026, 10, 20)).id
    ids = [rt.store.append(REF, Kind.LESSON, {**BASE, "contested_with": value},
                           {"Lesson": f"Lesson {n}."}, day=date(2026, 10, 20)).id
           for n, value in enumerate(GARBLED)]

    brief = build_briefing(rt, REF, "deploy", task_type="deploy", max_tokens=4000)
    notes = {i.id: i.note for i in brief.items}
    assert set(ids) <= set(notes) and live in notes
    assert not any("contested" in (notes[i] or "") for i in ids), notes

    out = CliRunner().invoke(cli, ["lessons", "--task-type", "deploy", "--user", "u_ops",
                                   "--json", "--root", str(rt.root)])
    assert out.exit_code == 0, out.output
    listed = {x["id"]: x for x in json.loads(out.output)["lessons"]}
    for i in ids:
        assert (listed[i]["status"], listed[i]["contested_with"],
                listed[i]["contested_count"]) == ("active", [], 0), i
    text = CliRunner().invoke(cli, ["lessons", "--task-type", "deploy", "--user", "u_ops",
                                    "--root", str(rt.root)])
    assert text.exit_code == 0 and "[contested]" not in text.output and "9999" not in text.output

    [spec] = [t for t in mcp_server.tools() if t.name == "lessons"]
    got = mcp_server.call(rt, spec, {"task_type": "deploy", "user_id": "u_ops"})
    assert {x["id"]: x["contested_with"] for x in got["lessons"]} == {
        i: [] for i in [live, *ids]}
