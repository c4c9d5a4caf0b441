"""A model's reply item longer than 2,000 characters or holding a control character (an
insight, a conviction, an edge's text, a reconciliation, a lesson, a revision) is refused alone,
said in the ``derivation_report`` row, and the reply's other items are written -- as an item
holding an invisible formatting character is (``test_hidden_format_text``). It failed the whole
call: retried, the good items thrown away, and the owner's window failed on every run. Through
the real client against the loopback fake server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from everos_reflect.index.audit import list_derivations
from everos_reflect.model import Kind
from everos_reflect.runtime import Runtime
from tests.test_aside_settings import ADA, convictions, edges, episodes, insights, run, tasks
from tests.test_aside_settings import rt as rt  # the fake server's runtime

pytest_plugins = ["tests.fake_openai"]

LONG_TEXT = "Reviews are skipped before launches " + "x" * 1965  # 2,001 characters
#: (item text, what its refusal says): too long, a bell, a terminal escape, a NEL (C1)
BAD = [(LONG_TEXT, "its text is 2,001 characters; at most 2,000"),
       ("Reviews are skipped\x07 before launches", "its text holds the control character U+0007"),
       ("Reviews are \x1b[2Jskipped", "its text holds the control character U+001B"),
       ("Reviews are skipped\x85 before launches", "its text holds the control character U+0085")]
IDS = ["long", "bell", "escape", "nel"]


@pytest.fixture(params=BAD, ids=IDS)
def bad(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param


def refused_row(rt: Runtime, strategy: str, said: str) -> dict[str, Any]:
    [row] = [r for r in list_derivations(rt.db(), strategy=strategy)
             if said in str(r["error"] or "")]
    return row


def test_the_long_text_is_2001_characters() -> None:
    assert len(LONG_TEXT) == 2001


def test_a_bad_insight_is_refused_alone(rt: Runtime, fake_openai: Any,
        bad: tuple[str, str]) -> None:
    text, said = bad
    episodes(rt)
    fake_openai.script({"questions": ["What slips?"]},
                       {"insights": [{"insight": text, "evidence": [1, 2]},
                                     {"insight": "Launch dates beat reviews.",
                                      "evidence": [1, 3]}]})
    counts = run(rt, "reflect_insights", threshold=10.0, min_episodes=2, questions=1)
    assert counts.get("refused") == 1 and "failed" not in counts, counts
    row = refused_row(rt, "reflect_insights", said)
    assert row["status"] == "ok"
    assert f"insight refused: {said}" in row["error"]
    assert [e.content for e in rt.store.entries(ADA, Kind.INSIGHT)] == [
        "Launch dates beat reviews."]


def test_a_bad_conviction_is_refused_alone(rt: Runtime, fake_openai: Any,
        bad: tuple[str, str]) -> None:
    text, said = bad
    insights(rt)
    fake_openai.script({"convictions": [
        {"key": "principles", "text": text, "evidence": [1, 2]},
        {"key": "risks", "text": "Launch pressure skips review.", "evidence": [1, 2]}]})
    counts = run(rt, "update_worldview")
    assert counts.get("refused") == 1 and "failed" not in counts, counts
    assert f"key 'principles': {said}" in refused_row(rt, "update_worldview", said)["error"]
    assert [e.meta["key"] for e in rt.store.entries(ADA, Kind.CONVICTION)] == ["risks"]


def test_a_bad_edge_is_refused(rt: Runtime, fake_openai: Any,
        bad: tuple[str, str]) -> None:
    text, said = bad
    convictions(rt)
    fake_openai.script({"contradictions": [{"between": [1, 2], "text": text}]})
    counts = run(rt, "detect_contradictions")
    assert counts.get("refused") == 1 and "failed" not in counts, counts
    assert f"edge refused: {said}" in refused_row(rt, "detect_contradictions", said)["error"]
    assert not rt.store.entries(ADA, Kind.RELATION)


def test_a_bad_reconciliation_is_refused(rt: Runtime, fake_openai: Any,
        bad: tuple[str, str]) -> None:
    text, said = bad
    edges(rt)
    before = len(rt.store.entries(ADA, Kind.INSIGHT))
    fake_openai.script({"insight": text, "evidence": [1, 2]})
    counts = run(rt, "reconcile")
    assert counts.get("refused") == 1 and "failed" not in counts, counts
    assert f"reconciliation refused: {said}" in refused_row(rt, "reconcile", said)["error"]
    assert len(rt.store.entries(ADA, Kind.INSIGHT)) == before


def test_a_bad_lesson_is_refused_alone(rt: Runtime, fake_openai: Any,
        bad: tuple[str, str]) -> None:
    text, said = bad
    tasks(rt)
    fake_openai.script({"lessons": [text, "Retry the registry pull."], "avoid": [text]})
    counts = run(rt, "learn_lessons")
    assert counts.get("refused") == 2 and "failed" not in counts, counts
    assert f"lesson refused: {said}" in refused_row(rt, "learn_lessons", said)["error"]
    assert [e.content for e in rt.store.entries(ADA, Kind.LESSON)] == ["Retry the registry pull."]


def test_a_bad_revision_is_refused(root: Path, fake_openai: Any,
        bad: tuple[str, str]) -> None:
    text, said = bad
    from everos_reflect.index.sync import Indexer
    from tests.test_provenance import DEV, edit_file
    from tests.test_revision_rules import revalidation_runtime

    rt, eps, first, _second = revalidation_runtime(root, fake_openai)
    try:
        edit_file(rt.store.path_for_id(DEV, eps[1].id), "on day 16", "on day 17")
        Indexer(rt).scan()
        fake_openai.script({"verdict": "revise", "insight": text, "evidence": [1, 2]})
        counts = run(rt, "revalidate_insights")
        assert counts.get("refused") == 1 and "failed" not in counts, counts
        row = refused_row(rt, "revalidate_insights", said)
        assert f"a 'revise' verdict: {said}" in row["error"]
        assert rt.store.get(DEV, first.id).meta["status"] == "stale"
    finally:
        rt.close()


@pytest.mark.parametrize(("question", "said"), [
    ("What slips " + "x" * 490 + "?", "question refused: it is 502 characters; at most 500"),
    ("What\u200b slips?", "question refused: it holds U+200B (ZERO WIDTH SPACE) at character 5"),
    ("What\x1b[2J slips?", "question refused: it holds the control character U+001B"),
], ids=["long", "invisible", "escape"])
def test_a_question_that_cannot_be_asked_is_refused_alone(
        rt: Runtime, fake_openai: Any, question: str, said: str) -> None:
    # it failed the questions call, and the run, on every run
    episodes(rt)
    fake_openai.script({"questions": [question, "What wins?"]},
                       {"insights": [{"insight": "Launch dates beat reviews.",
                                      "evidence": [1, 3]}]})
    counts = run(rt, "reflect_insights", threshold=10.0, min_episodes=2, questions=2)
    assert counts.get("refused") == 1 and "failed" not in counts, counts
    [row] = [r for r in list_derivations(rt.db(), strategy="reflect_insights")
             if said in str(r["error"] or "")]
    assert row["status"] == "ok"
    [insight] = rt.store.entries(ADA, Kind.INSIGHT)
    assert insight.meta["question"] == "What wins?"
