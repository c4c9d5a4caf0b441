"""A run's lessons go to their log in one write, however they refer to one another."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from everos_reflect.engine.registry import RunContext, validate_strategy_settings
from everos_reflect.llm.base import ScriptedLLM
from everos_reflect.markdown import store as store_module
from everos_reflect.model import Kind, UserRef
from everos_reflect.procedural.lessons import read_lesson
from everos_reflect.procedural.tasks import new_task
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.lessons import NAME, LearnLessons

REF = UserRef.of("u_ops")


class ArcEmbedder:
    """Known texts lie on an arc, each close to the one before it (a chain: the nearest
    earlier text is always the previous one); every other text is orthogonal to them."""

    name = "arc-test"
    dim = 4

    def __init__(self, texts: list[str]) -> None:
        self.place = {t: n for n, t in enumerate(texts)}

    def embed(self, texts: list[str]) -> np.ndarray:
        rows = []
        for text in texts:
            n = self.place.get(text)
            if n is None:
                rows.append([0.0, 0.0, 1.0, 0.0])
            else:
                angle = n * 0.05  # neighbours at cosine 0.999, all within 0.6 of each other
                rows.append([math.cos(angle), math.sin(angle), 0.0, 0.0])
        return np.asarray(rows, dtype=np.float32)


def chain(n: int) -> list[str]:
    """Lessons of alternating polarity: each contradicts the one before it."""
    return [f"Retry step {k} of a failed deploy at once." if k % 2 == 0
            else f"Do not retry step {k} of a failed deploy at once." for k in range(n)]


def run_lessons(rt: Runtime) -> dict[str, int]:
    values = validate_strategy_settings(NAME, {}, "ome.toml")
    ctx = RunContext(rt, values, run_id="run_chain", trigger="test")
    return LearnLessons().run(ctx)


@pytest.mark.parametrize("n", [2, 10])
def test_a_reply_whose_lessons_contradict_each_other_in_a_chain_is_one_write(
    root: Path, monkeypatch: pytest.MonkeyPatch, n: int
) -> None:
    """Each lesson contesting the one before it waited for that one's id: one append per
    lesson of the chain, then one metadata rewrite per earlier side, each a copy of the whole
    log (n² bytes for n lessons)."""
    texts = chain(n)
    llm = ScriptedLLM()
    rt = Runtime(root, embedder=ArcEmbedder(texts), llm=llm)
    try:
        t = new_task(REF, task_type="deploy", goal="Deploy the web service",
                     steps=["retry", "deploy"], outcome="failure", errors=["timeout"],
                     timestamp="2026-10-01T10:00:00+00:00")
        rt.store.append(REF, Kind.TASK, t.meta, t.sections, day=t.day)
        llm.queue_task("lessons", {"lessons": texts, "avoid": []})
        writes: list[Path] = []
        real = store_module._atomic_write

        def counting(path: Path, data: bytes) -> None:
            writes.append(Path(path))
            real(path, data)

        monkeypatch.setattr(store_module, "_atomic_write", counting)
        counts = run_lessons(rt)
        lesson_writes = [p for p in writes if ".lessons" in p.parts]
        assert counts["written"] == n
        assert len(lesson_writes) == 1, lesson_writes

        found = {x.text: x for x in map(read_lesson, rt.store.entries(REF, Kind.LESSON))}
        ids = [found[t].id for t in texts]
        for k, text in enumerate(texts):
            lesson = found[text]
            assert lesson.status == "contested"
            neighbours = {ids[j] for j in (k - 1, k + 1) if 0 <= j < n}
            assert set(lesson.contested_with) == neighbours, (k, lesson.contested_with)
            assert not any(i.startswith("?") for i in lesson.contested_with)
    finally:
        rt.close()


def test_writes_counted_by_the_lesson_test_are_the_store_writes(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The counter above sees every write of a log (so one write means one)."""
    rt = Runtime(root, embedder=ArcEmbedder([]), llm=ScriptedLLM())
    try:
        writes: list[Any] = []
        real = store_module._atomic_write
        monkeypatch.setattr(store_module, "_atomic_write",
                            lambda p, d: (writes.append(p), real(p, d)))
        t = new_task(REF, task_type="deploy", goal="g", steps=["s"], outcome="success",
                     errors=[], timestamp="2026-10-01T10:00:00+00:00")
        rt.store.append(REF, Kind.TASK, t.meta, t.sections, day=t.day)
        rt.store.append(REF, Kind.TASK, t.meta, t.sections, day=t.day)
        assert len(writes) == 2
    finally:
        rt.close()


def test_two_new_lessons_contesting_one_lesson_are_both_named_by_it(root: Path) -> None:
    """The other side of each new contest was updated one by one from the lessons as read
    before the run: the second update wrote `contested_with` over the first, so the rival
    named only the last new lesson and the first contest could never be decided."""
    texts = ["Do not retry step 0 of a failed deploy at once.",
             "Retry step 1 of a failed deploy at once.",
             "Do not retry step 2 of a failed deploy at once."]
    llm = ScriptedLLM()
    rt = Runtime(root, embedder=ArcEmbedder(texts), llm=llm)
    try:
        for day, outcome in ((1, "success"), (2, "failure")):
            t = new_task(REF, task_type="deploy", goal="Deploy the web service",
                         steps=["retry", "deploy"], outcome=outcome, errors=[],
                         timestamp=f"2026-10-0{day}T10:00:00+00:00")
            rt.store.append(REF, Kind.TASK, t.meta, t.sections, day=t.day)
            llm.queue_task("lessons", {"lessons": [texts[1]] if day == 1
                                       else [texts[0], texts[2]], "avoid": []})
            run_lessons(rt)
        found = {x.text: x for x in map(read_lesson, rt.store.entries(REF, Kind.LESSON))}
        rival, first, second = found[texts[1]], found[texts[0]], found[texts[2]]
        assert first.contested_with == (rival.id,) and second.contested_with == (rival.id,)
        assert rival.status == "contested"
        assert set(rival.contested_with) == {first.id, second.id}
    finally:
        rt.close()
