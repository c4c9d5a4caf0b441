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


def test_a_narratives_sources_written_as_a_mapping_is_named(root: Path) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    seed_pets(rt)
    run_reflection(rt)
    [row] = reports(rt)
    narrative = row["merged_entry_id"]
    path = rt.store.path_for_id(ANDREW, narrative)
    rt.close()
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
