"""Numbers and lists a person may hand-edit into a lesson or insight are shown bounded on the
terminal and in the briefing: a 400-digit ``confirmations`` or ``depth`` printed all its
digits, and a record citing nothing printed an empty "evidence: " line where the belief
commands print ``-``."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.briefing.build import build_briefing
from everos_reflect.cli.main import cli
from everos_reflect.index.sync import Indexer
from everos_reflect.model import Kind, UserRef
from everos_reflect.problem_words import shown_number
from everos_reflect.runtime import Runtime

REF = UserRef.of("u_ops")
HUGE = int("9" * 400)


@pytest.mark.parametrize(("value", "shown"), [
    (3, "3"), (0, "0"), (-12, "-12"), (10**15 - 1, "999999999999999"),
    (10**15, "1.00e+15"), (HUGE, "9.99e+399"), (-int("123" * 100), "-1.23e+299"),
    (True, "True"), ("7", "7"), (None, "None"),
])
def test_a_number_is_shown_whole_up_to_fifteen_digits_then_as_an_exponent(
        value: object, shown: str) -> None:
    assert shown_number(value) == shown


def _seed(rt: Runtime) -> tuple[str, str]:
    lesson = rt.store.append(REF, Kind.LESSON, {
        "timestamp": "2026-10-20T09:00:00+00:00", "task_type": "deploy", "lesson_type": "do",
        "evidence": [], "confirmations": HUGE, "depth": 1, "status": "active"},
        {"Lesson": "Pin image tags."})
    insight = rt.store.append(REF, Kind.INSIGHT, {
        "timestamp": "2026-10-20T09:00:00+00:00", "evidence": [], "depth": HUGE,
        "status": "active"}, {"Insight": "Deploys fail on Mondays."})
    return lesson.id, insight.id


def test_lessons_and_insights_show_a_huge_count_bounded_and_no_evidence_as_a_dash(
        scripted: tuple[Runtime, object], root: Path) -> None:
    rt, _ = scripted
    lesson, insight = _seed(rt)

    result = CliRunner().invoke(cli, ["lessons", "--task-type", "deploy", "--user", "u_ops"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [f"{lesson} do    x9.99e+399  Pin image tags.",
                                          "    evidence: -"]

    result = CliRunner().invoke(cli, ["insights", "--user", "u_ops"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"{insight}  u_ops  depth 9.99e+399  2026-10-20"
    assert lines[2] == "  evidence: -"

    # the JSON answers carry the value as written: it is data, not a line
    result = CliRunner().invoke(cli, ["lessons", "--task-type", "deploy", "--user", "u_ops",
                                      "--json"])
    assert '"confirmations": ' + "9" * 400 in result.output


def test_the_briefing_notes_a_huge_confirmation_count_bounded(
        scripted: tuple[Runtime, object]) -> None:
    rt, _ = scripted
    lesson, _ = _seed(rt)
    Indexer(rt).scan()
    b = build_briefing(rt, REF, "deploy", task_type="deploy", max_tokens=500)
    assert f"- [{lesson} · lesson · 2026-10-20] Pin image tags. (do, confirmed 9.99e+399x)" \
        in b.text.splitlines()
    assert "9" * 20 not in b.text


def test_insights_gives_a_hand_written_question_reason_and_evidence_one_bounded_line(
        scripted: tuple[Runtime, object]) -> None:
    # a question of 300 lines printed as 300 lines, a 5,000-character stale_reason whole, and
    # all 500 ids of a hand-written evidence list on one line
    rt, _ = scripted
    insight = rt.store.append(REF, Kind.INSIGHT, {
        "timestamp": "2026-10-20T09:00:00+00:00",
        "evidence": [f"ep_20261012_{n:04d}" for n in range(1, 501)],
        "depth": 1, "status": "stale", "stale_reason": "r" * 5000,
        "question": "Why?\nBecause. " * 300}, {"Insight": "Deploys fail on Mondays."})

    result = CliRunner().invoke(cli, ["insights", "--user", "u_ops", "--include-stale"])

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert len(lines) == 4
    assert lines[0] == (f"{insight.id}  u_ops  depth 1  2026-10-20  [stale: {'r' * 300}… "
                        "(5,000 characters)]")
    assert lines[2] == f"  question: {('Why? Because. ' * 22)[:300]}… (4,199 characters)"
    assert lines[3] == "  evidence: " + ", ".join(
        f"ep_20261012_{n:04d}" for n in range(1, 21)) + " +480 more"  # as `lessons` lists


def test_lessons_gives_a_lesson_one_line_and_a_task_cited_twice_counts_once(
        scripted: tuple[Runtime, object]) -> None:
    # a hand-written lesson of two lines broke the one line a lesson; a task cited twice was
    # listed twice, and counted twice when confirmations is not written
    rt, _ = scripted
    lesson = rt.store.append(REF, Kind.LESSON, {
        "timestamp": "2026-10-20T09:00:00+00:00", "task_type": "deploy", "lesson_type": "do",
        "evidence": ["tk_20261012_0001", "tk_20261012_0002", "tk_20261012_0001"],
        "depth": 1, "status": "active"}, {"Lesson": "Pin image tags\nbefore\tdeploying."})

    result = CliRunner().invoke(cli, ["lessons", "--task-type", "deploy", "--user", "u_ops"])

    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"{lesson.id} do    x2  Pin image tags before deploying.",
        "    evidence: tk_20261012_0001, tk_20261012_0002"]


def test_relations_shows_a_relation_joining_nothing_as_a_dash(
        scripted: tuple[Runtime, object]) -> None:
    # `between: []` by hand printed "[active]  " and nothing after it
    rt, _ = scripted
    rel = rt.store.append(REF, Kind.RELATION, {
        "timestamp": "2026-10-20T09:00:00+00:00", "relation_type": "self_contradiction",
        "between": [], "evidence": [], "depth": 2, "status": "active"}, {"Relation": "x vs y"})

    result = CliRunner().invoke(cli, ["relations", "--user", "u_ops"])

    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [f"u_ops  {rel.id}  [active]  -", "    x vs y"]


def test_worldview_gives_a_hand_written_key_one_bounded_line(
        scripted: tuple[Runtime, object]) -> None:
    # a key of 3,000 characters and line breaks was printed whole, over several lines
    rt, _ = scripted
    key = "identity\n" * 400
    conviction = rt.store.append(REF, Kind.CONVICTION, {
        "timestamp": "2026-10-20T09:00:00+00:00", "key": key, "depth": 2, "status": "active",
        "evidence": []}, {"Conviction": "Dana is careful."})

    result = CliRunner().invoke(cli, ["worldview", "--user", "u_ops"])

    assert result.exit_code == 0, result.output
    shown = ("identity " * 400).strip()
    assert result.output.splitlines() == [
        f"u_ops  {conviction.id}  {shown[:300]}… (3,599 characters): Dana is careful.",
        "    evidence: -  (2026-10-20T09:00:00+00:00)"]
