"""A ``lessons`` reply that asks both to do and to avoid the same thing (the same sentence,
case and spacing aside) is refused on that text alone: it wrote two contested lessons of one
sentence, a ``do`` and an ``avoid``, each "confirmed" by every task shown, so no later task
could tell them apart, and the briefing served both. The reply's other lessons are kept."""

from __future__ import annotations

from pathlib import Path

from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.engine.registry import RunContext, validate_strategy_settings
from everos_reflect.index.audit import list_derivations
from everos_reflect.llm.base import ScriptedLLM
from everos_reflect.model import Kind, UserRef
from everos_reflect.procedural.lessons import read_lesson
from everos_reflect.procedural.tasks import new_task
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.lessons import NAME, LearnLessons

REF = UserRef.of("u_ops")


def test_a_text_both_to_do_and_to_avoid_is_refused_the_rest_kept(root: Path) -> None:
    llm = ScriptedLLM()
    rt = Runtime(root, embedder=HashEmbedder(64), llm=llm)
    try:
        for i in range(3):
            task = new_task(REF, task_type="deploy", goal=f"Deploy v{i}", steps=["build"],
                            outcome="failure", errors=["timeout"])
            rt.store.append(REF, Kind.TASK, task.meta, task.sections, day=task.day)
        llm.queue_task("lessons", {
            "lessons": ["Run the smoke tests before pushing.", "Pin the base image."],
            "avoid": ["run the smoke tests  before pushing", "Deploying on Fridays."]})
        values = validate_strategy_settings(NAME, {"enabled": True}, "ome.toml")
        counts = LearnLessons().run(RunContext(rt, values, "run_l", "manual", force=True))
        assert counts["written"] == 2 and counts["refused"] == 1
        lessons = {read_lesson(e).text: read_lesson(e) for e in rt.store.entries(REF, Kind.LESSON)}
        assert set(lessons) == {"Pin the base image.", "Deploying on Fridays."}
        assert {x.status for x in lessons.values()} == {"active"}
        (row,) = list_derivations(rt.db(), strategy=NAME)
        assert row["status"] == "ok"
        assert "asks both to do and to avoid 'Run the smoke tests before pushing.'" \
            in row["error"]
    finally:
        rt.close()
