"""One poll of a belief tier reads the owner's changes cursor once. ``owner_work`` (what the
scheduler's data poll and the run call per owner) read it for the window, again for the
backlog past it, and the detector twice more (the changed ones past the window, the pairs
shown): up to four reads of every row per owner per poll. The rows read once are passed to
the hooks a tier overrides (``pending``, ``unconsumed``, ``backlog``), so ``reconcile``'s own
window (whole edges) is still the one taken."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.engine.engine import Engine
from everos_reflect.engine.registry import get_strategy
from everos_reflect.index import cursors
from everos_reflect.llm import ScriptedLLM
from everos_reflect.model import Kind, UserRef
from everos_reflect.procedural.tasks import new_task
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings

ADA = UserRef.of("ada")
TIERS = ("update_worldview", "detect_contradictions", "reconcile", "learn_lessons",
         "reflect_insights")


@pytest.fixture
def rt(root: Path) -> Iterator[Runtime]:
    (root / "ome.toml").write_text("".join(
        f"[strategies.{n}]\nenabled = true\ncooldown_seconds = 0\nmax_records = 3\n"
        for n in TIERS))
    runtime = Runtime(root, Settings(), embedder=HashEmbedder(32), llm=ScriptedLLM())
    yield runtime
    runtime.close()


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The strategy of every read of a changes cursor, in order."""
    seen: list[str] = []
    real = cursors.consumed

    def consumed(conn: Any, strategy: str, ref: UserRef) -> set[tuple[str, str]]:
        seen.append(strategy)
        return real(conn, strategy, ref)

    monkeypatch.setattr(cursors, "consumed", consumed)
    return seen


def convictions(rt: Runtime, ref: UserRef, n: int) -> list[str]:
    made = rt.store.append_many(ref, Kind.CONVICTION, [(
        {"timestamp": f"2026-10-{1 + i:02d}T09:00:00+00:00", "key": f"k{i}", "evidence": [],
         "depth": 2, "status": "active"}, {"Conviction": f"Conviction {i}."})
        for i in range(n)])
    return [e.id for e in made]


def poll(rt: Runtime, name: str, ref: UserRef = ADA) -> Any:
    settings = Engine(rt, recover=False).settings_for(name)
    return get_strategy(name).owner_work(rt, ref, settings)


def test_the_detector_reads_the_cursor_once_per_owner_and_poll(
        rt: Runtime, reads: list[str]) -> None:
    convictions(rt, ADA, 5)  # 5 changed, a window of 3: a backlog and changed ones later
    work = poll(rt, "detect_contradictions")
    assert work is not None and work.deferred_records == 2
    assert len(work.plan.shown) == 3 and work.plan.pending == frozenset()
    assert reads == ["detect_contradictions"]

    reads.clear()
    convictions(rt, UserRef.of("bob"), 2)
    assert get_strategy("detect_contradictions").observe(rt, None) == 2
    assert reads == ["detect_contradictions"] * 2  # one read per owner


def test_reconcile_takes_its_own_window_from_the_one_read(
        rt: Runtime, reads: list[str]) -> None:
    c = convictions(rt, ADA, 4)
    rt.store.append_many(ADA, Kind.RELATION, [(
        {"relation_type": "self_contradiction", "between": list(pair), "evidence": list(pair),
         "depth": 3, "status": "active"}, {"Relation": f"{pair[0]} against {pair[1]}"})
        for pair in ((c[0], c[1]), (c[2], c[3]))])
    work = poll(rt, "reconcile")
    # Reconcile.pending: the first edge with its 2 convictions fills max_records = 3
    assert work is not None and len(work.items) == 1 and work.deferred_records == 1
    assert reads == ["reconcile"]


def test_worldview_lessons_and_insights_read_the_cursor_once(
        rt: Runtime, reads: list[str]) -> None:
    rt.store.append_many(ADA, Kind.INSIGHT, [(
        {"evidence": ["ep_1", "ep_2"], "depth": 1, "status": "active"}, {"Insight": f"I{n}."})
        for n in range(5)])
    work = poll(rt, "update_worldview")
    assert work is not None and len(work.items) == 3 and work.deferred_records == 2
    for n in range(5):
        t = new_task(ADA, task_type="deploy", goal=f"Deploy {n}", steps=["check logs"],
                     outcome="failure", errors=["timeout"],
                     timestamp=f"2026-10-{10 + n:02d}T10:00:00+00:00")
        rt.store.append(ADA, Kind.TASK, t.meta, t.sections, day=t.day)
    work = poll(rt, "learn_lessons")
    assert work is not None and len(work.items) == 3 and work.deferred_records == 2
    poll(rt, "reflect_insights")
    assert reads == ["update_worldview", "learn_lessons", "reflect_insights"]
