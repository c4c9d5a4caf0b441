"""Metadata a person wrote with the wrong YAML type, read safely and named by ``lint`` with
its file, line and field: a narrative's ``sources: {a: b}`` (read as no sources, and lint
said nothing); a derived record's ``status: [x]`` (shown by ``explain`` and lint as Python's
``['x']``); an insight's ``depth: deep``, ``importance: [3]``, ``provider: {a: 1}`` (served
by ``insights`` as written)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.lint import lint_report
from everos_reflect.llm.extractive import ExtractiveLLM
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.insight_views import explain, list_insights
from tests.reflect_fixtures import ANDREW, make_runtime, reports, run_reflection, seed_pets

#: logs edited by the test itself, no other writer (conftest.py)
pytestmark = pytest.mark.usefixtures("settle_at_once")

DEV = UserRef.of("u_dev")


def _problems(root: Path) -> list[tuple[str, int, str]]:
    return [(p["file"], p["line"], p["message"]) for p in lint_report(root)["problems"]]


def _line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text("utf-8").splitlines(), 1)
                if line.startswith(text))


def _merged_narrative(root: Path) -> tuple[str, Path]:
    """Andrew's pets merged by the offline provider: the narrative's id and its log, the
    runtime closed (the test then edits the log by hand)."""
    rt = make_runtime(root, ExtractiveLLM())
    seed_pets(rt)
    run_reflection(rt)
    [row] = reports(rt)
    narrative = row["merged_entry_id"]
    path = rt.store.path_for_id(ANDREW, narrative)
    rt.close()
    return narrative, path


def test_a_narratives_sources_written_as_a_mapping_is_named(root: Path) -> None:
    narrative, path = _merged_narrative(root)
    path.write_text(re.sub(r"sources: \[.*\]", "sources: {a: b}", path.read_text("utf-8")),
                    "utf-8")

    rel = path.relative_to(root).as_posix()
    assert (rel, _line_of(path, "sources:"),
            f"entry {narrative}: sources is a YAML mapping, not a list of ids (write [id, ...])"
            ) in _problems(root)


def _insight(root: Path, **meta: object) -> tuple[Runtime, str, Path]:
    rt = Runtime(root, embedder=HashEmbedder(16))
    ep = rt.store.append(DEV, Kind.EPISODE, {
        "timestamp": "2026-10-12T10:00:00+00:00", "parent_type": "memcell", "session_id": "s"},
        {"Subject": "Deploy", "Content": "The deploy failed on Friday."})
    insight = rt.store.append(DEV, Kind.INSIGHT, {
        "timestamp": "2026-10-20T09:00:00+00:00", "evidence": [ep.id], **meta},
        {"Insight": "Deploys fail on Fridays."})
    return rt, insight.id, rt.store.path_for_id(DEV, insight.id)


def test_a_status_written_as_a_list_is_shown_as_yaml_and_json_write_it_not_python(
        root: Path) -> None:
    rt, insight, path = _insight(root, status=["x"], depth=1)
    try:
        assert explain(rt, DEV, insight)["status"] == '["x"]'  # it was "['x']"
        assert list_insights(rt, DEV, include_stale=True)[0]["status"] == '["x"]'
        assert list_insights(rt, DEV) == []  # none of the statuses: not served as active
    finally:
        rt.close()
    rel = path.relative_to(root).as_posix()
    assert (rel, _line_of(path, "status:"),
            f'entry {insight}: status ["x"] is a YAML list, not one of active, stale, retired '
            "(write one of them)") in _problems(root)


def test_insights_serve_depth_importance_and_provider_as_read_not_as_written(
        root: Path) -> None:
    rt, insight, path = _insight(root, status="active", depth="deep", importance=[3],
                                 provider={"a": 1}, insight_type=["pattern"])
    try:
        [listed] = list_insights(rt, DEV)
    finally:
        rt.close()
    assert {k: listed[k] for k in ("depth", "importance", "provider", "insight_type")} == {
        "depth": 1, "importance": None, "provider": None, "insight_type": None}
    rel = path.relative_to(root).as_posix()
    problems = _problems(root)
    assert (rel, _line_of(path, "provider:"), f"entry {insight}: provider is a YAML mapping, "
            "not one value: it is ignored (shown as none)") in problems
    assert {(line, message.split(":")[1].split()[0]) for _, line, message in problems} >= {
        (_line_of(path, "depth:"), "depth"), (_line_of(path, "importance:"), "importance")}


def test_well_typed_insight_fields_are_served_as_written(root: Path) -> None:
    rt, _insight_id, _path = _insight(root, status="active", depth=2, importance=7,
                                      provider="openai", insight_type="reflection")
    try:
        [listed] = list_insights(rt, DEV)
    finally:
        rt.close()
    assert {k: listed[k] for k in ("depth", "importance", "provider", "insight_type")} == {
        "depth": 2, "importance": 7, "provider": "openai", "insight_type": "reflection"}
    assert _problems(root) == []


def test_worldview_and_relations_serve_ids_types_and_times_as_read(root: Path) -> None:
    from everos_reflect.strategies.belief_views import relations, worldview

    rt = Runtime(root, embedder=HashEmbedder(16))
    stamp = "2026-10-20T09:00:00+00:00"
    conviction = rt.store.append(DEV, Kind.CONVICTION, {
        "timestamp": stamp, "key": "identity", "status": "active", "depth": 1,
        "supersedes": {"x": 1}}, {"Conviction": "I deploy with care."})
    relation = rt.store.append(DEV, Kind.RELATION, {
        "timestamp": stamp, "status": "resolved", "depth": 1, "relation_type": ["x"],
        "between": [conviction.id, conviction.id], "resolved_at": [1]},
        {"Relation": "They clash."})
    try:
        [served] = worldview(rt, DEV)
        [edge] = relations(rt, DEV)
    finally:
        rt.close()
    assert served["supersedes"] is None  # it was {"x": 1}
    assert (edge["relation_type"], edge["resolved_at"]) == (None, None)  # ["x"], [1]
    problems = _problems(root)
    conviction_log = rt.store.path_for_id(DEV, conviction.id)
    relation_log = rt.store.path_for_id(DEV, relation.id)
    assert (conviction_log.relative_to(root).as_posix(), _line_of(conviction_log, "supersedes:"),
            f"entry {conviction.id}: supersedes is a YAML mapping, not one value: it is "
            "ignored (shown as none)") in problems
    rel = relation_log.relative_to(root).as_posix()
    assert (rel, _line_of(relation_log, "resolved_at:"), f"entry {relation.id}: resolved_at is "
            "a YAML list, not a time: it is ignored (shown as none)") in problems
    assert (rel, _line_of(relation_log, "relation_type:"), f'entry {relation.id}: relation_type '
            '["x"] is a YAML list, not self_contradiction (no tier reads this relation)'
            ) in problems


def test_lesson_and_task_choices_written_as_lists_are_shown_as_yaml_writes_them(
        root: Path) -> None:
    rt = Runtime(root, embedder=HashEmbedder(16))
    stamp = "2026-10-20T09:00:00+00:00"
    lesson = rt.store.append(DEV, Kind.LESSON, {
        "timestamp": stamp, "task_type": "deploy", "lesson_type": ["do"], "confirmations": [2],
        "evidence": ["tk_20261020_0001"], "depth": 1}, {"Lesson": "Deploy on Mondays."})
    task = rt.store.append(DEV, Kind.TASK, {
        "timestamp": stamp, "task_type": "deploy", "outcome": {"ok": True}},
        {"Goal": "Deploy the app.", "Steps": "1. Deploy."})
    rt.close()
    messages = {m for _, _, m in _problems(root)}
    assert {f'entry {lesson.id}: lesson_type ["do"] is a YAML list, not do or avoid (read as '
            "do)",
            f"entry {lesson.id}: confirmations [2] is a YAML list, not a whole number of 0 or "
            "more",
            f'entry {task.id}: outcome {{"ok": true}} is a YAML mapping, not one of success, '
            "failure, partial (read as unknown: neither a success nor a failure to learn from)"
            } <= messages


@pytest.mark.parametrize(("written", "problem"), [
    ("[1, 2]", "is a YAML list, not the record a merge writes (content: hash, sentences: "
               "[ids, ...])"),
    ("'x'", "is a YAML string, not the record a merge writes (content: hash, sentences: "
            "[ids, ...])"),
    ("{content: [1], sentences: []}", "content is a YAML list, not a hash"),
    ("{sentences: [ep_20260802_0001]}", "has no content hash"),
    ("{content: abc, sentences: [{a: 1}, 5]}",
     "sentences is not a list of lines of source ids, one per sentence"),
    ("{content: abc, sentences: [ep_1]}", "sentences hold 'ep_1', which is no entry id"),
])
def test_a_narratives_provenance_record_of_the_wrong_shape_is_named(
        root: Path, written: str, problem: str) -> None:
    # read as no record (every sentence credited to all sources), and lint said nothing
    narrative, path = _merged_narrative(root)
    path.write_text(re.sub(r"provenance: .*", f"provenance: {written}",
                           path.read_text("utf-8")), "utf-8")

    assert _problems(root) == [(
        path.relative_to(root).as_posix(), _line_of(path, "provenance:"),
        f"entry {narrative}: provenance {problem} (read as no record: every sentence is "
        "credited to all sources)")]


def test_a_narratives_provenance_of_an_edited_content_is_no_problem(root: Path) -> None:
    _, path = _merged_narrative(root)
    path.write_text(path.read_text("utf-8").replace("Andrew now has two dogs",
                                                    "Andrew has two dogs now"), "utf-8")
    assert _problems(root) == []  # a hand edit of the Content is first-class
