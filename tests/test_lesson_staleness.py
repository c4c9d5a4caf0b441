"""Lessons follow the provenance contract of insights (SPEC §10): a lesson keeps the hash of
each task it was learned from (``evidence_hash``); a task edited by hand since (its outcome,
a step, an error) makes the lesson ``stale`` with a reason in its metadata and the audit, out
of the briefing, until it is learned again from the task as it reads now."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from everos_reflect.briefing.build import build_briefing
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.engine.registry import RunContext, validate_strategy_settings
from everos_reflect.index.audit import list_derivations
from everos_reflect.index.sync import Indexer
from everos_reflect.llm.base import ScriptedLLM
from everos_reflect.model import Kind, UserRef
from everos_reflect.procedural.lessons import read_lesson
from everos_reflect.procedural.tasks import new_task, task_hash
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import provenance
from everos_reflect.strategies.lessons import NAME, LearnLessons
from everos_reflect.strategies.provenance import check

REF = UserRef.of("u_ops")
CHECK_LOGS = "Check the logs before retrying a failed deploy."


def add_task(rt: Runtime, day: int, outcome: str, steps: list[str]) -> str:
    t = new_task(REF, task_type="deploy", goal="Deploy the web service", steps=steps,
                 outcome=outcome, timestamp=f"2026-10-{day:02d}T10:00:00+00:00")
    return rt.store.append(REF, Kind.TASK, t.meta, t.sections, day=t.day).id


_runs = iter(range(10_000))


def learn(rt: Runtime, llm: ScriptedLLM, *lessons: str) -> None:
    llm.queue_task("lessons", {"lessons": list(lessons), "avoid": []})
    values = validate_strategy_settings(NAME, {}, "ome.toml")
    LearnLessons().run(RunContext(rt, values, run_id=f"run_st_{next(_runs)}", trigger="test"))


def lesson(rt: Runtime, lesson_id: str) -> Any:
    return rt.store.get(REF, lesson_id)


def only_lesson(rt: Runtime) -> str:
    [entry] = rt.store.entries(REF, Kind.LESSON)
    return entry.id


def edit(rt: Runtime, entry_id: str, old: str, new: str) -> None:
    path = rt.store.path_for_id(REF, entry_id)
    text = path.read_text()
    assert text.count(old) == 1, text
    path.write_text(text.replace(old, new))


def briefed(rt: Runtime) -> list[str]:
    got = build_briefing(rt, REF, "deploy the web service", task_type="deploy",
                         max_tokens=2000)
    return [item.id for item in got.items]


def learned_one(rt: Runtime, llm: ScriptedLLM) -> tuple[str, str]:
    task = add_task(rt, 1, "success", ["check logs", "deploy"])
    learn(rt, llm, CHECK_LOGS)
    lesson_id = only_lesson(rt)
    Indexer(rt).scan()
    return task, lesson_id


def test_a_lesson_keeps_the_hash_of_each_task_it_was_learned_from(
    scripted: tuple[Runtime, ScriptedLLM]
) -> None:
    rt, llm = scripted
    task, lesson_id = learned_one(rt, llm)
    assert lesson(rt, lesson_id).meta["evidence_hash"] == {
        task: task_hash(rt.store.get(REF, task))}
    assert lesson_id in briefed(rt)


@pytest.mark.parametrize(("old", "new"), [
    ("outcome: success", "outcome: failure"),  # the metadata a lesson is learned from
    ("2. deploy", "2. deploy on a Friday"),  # a step: the goal (its text_hash) is unchanged
])
def test_a_task_edited_by_hand_makes_its_lesson_stale_and_out_of_the_briefing(
    scripted: tuple[Runtime, ScriptedLLM], old: str, new: str
) -> None:
    rt, llm = scripted
    task, lesson_id = learned_one(rt, llm)
    edit(rt, task, old, new)
    Indexer(rt).scan()

    meta = lesson(rt, lesson_id).meta
    assert (meta["status"], meta["stale_reason"]) == ("stale", f"evidence {task} was edited")
    assert lesson_id not in briefed(rt)
    [row] = list_derivations(rt.db(), strategy="provenance")
    assert (row["status"], row["outputs"], row["inputs"], row["error"]) == (
        "stale", [lesson_id], [task], f"evidence {task} was edited")


def test_an_edit_that_changes_nothing_a_lesson_learns_from_leaves_it_active(
    scripted: tuple[Runtime, ScriptedLLM]
) -> None:
    rt, llm = scripted
    task, lesson_id = learned_one(rt, llm)
    edit(rt, task, "2. deploy", "2.   deploy  ")  # spacing only
    Indexer(rt).scan()
    assert lesson(rt, lesson_id).meta["status"] == "active"
    assert lesson_id in briefed(rt)


def test_a_stale_lesson_is_learned_again_from_the_task_as_it_reads_now(
    scripted: tuple[Runtime, ScriptedLLM]
) -> None:
    """The run itself checks first: without the indexer's check (not run yet), the edited
    task restated the lesson, was consumed, and the lesson stayed current."""
    rt, llm = scripted
    task, lesson_id = learned_one(rt, llm)
    edit(rt, task, "outcome: success", "outcome: failure")
    learn(rt, llm, "Check the logs, then roll back instead of retrying a failed deploy.")

    _, request = llm.task_requests[-1]
    assert [r.id for r in request.records] == [task]
    assert "outcome: failure" in request.records[0].text
    assert lesson(rt, lesson_id).meta["status"] == "stale"
    live = [read_lesson(e) for e in rt.store.entries(REF, Kind.LESSON)
            if read_lesson(e).live]
    assert [(x.text, x.evidence) for x in live] == [
        ("Check the logs, then roll back instead of retrying a failed deploy.", (task,))]
    assert lesson(rt, live[0].id).meta["evidence_hash"] == {
        task: task_hash(rt.store.get(REF, task))}


def test_an_edit_undone_gives_the_lesson_back(scripted: tuple[Runtime, ScriptedLLM]) -> None:
    rt, llm = scripted
    task, lesson_id = learned_one(rt, llm)
    edit(rt, task, "outcome: success", "outcome: failure")
    Indexer(rt).scan()
    assert lesson(rt, lesson_id).meta["status"] == "stale"
    edit(rt, task, "outcome: failure", "outcome: success")
    Indexer(rt).scan()
    assert lesson(rt, lesson_id).meta["status"] == "active"
    assert lesson_id in briefed(rt)


def test_a_contested_lesson_goes_stale_and_comes_back_contested(
    scripted: tuple[Runtime, ScriptedLLM]
) -> None:
    """A contested lesson is served as a live one: an edited task took it out of nothing."""
    rt, llm = scripted
    task, lesson_id = learned_one(rt, llm)
    rt.store.update_meta(REF, lesson_id, {"status": "contested",
                                          "contested_with": ["ls_20261001_0009"]})
    Indexer(rt).scan()
    edit(rt, task, "outcome: success", "outcome: failure")
    Indexer(rt).scan()
    assert lesson(rt, lesson_id).meta["status"] == "stale"
    assert lesson_id not in briefed(rt)
    edit(rt, task, "outcome: failure", "outcome: success")
    Indexer(rt).scan()
    assert lesson(rt, lesson_id).meta["status"] == "contested"


def test_a_lesson_written_before_hashes_is_kept_and_hashed_not_made_stale(
    scripted: tuple[Runtime, ScriptedLLM]
) -> None:
    """A lesson with no ``evidence_hash`` (written before lessons kept one) is not taken as
    edited: it stays active, gets the hash of its tasks as they read now at the next check,
    and an edit from then on makes it stale."""
    rt, llm = scripted
    task, lesson_id = learned_one(rt, llm)
    path = rt.store.path_for_id(REF, lesson_id)
    text = path.read_text()
    start = text.index("evidence_hash:")
    end = text.index("\n", text.index(task, start)) + 1
    path.write_text(text[:start] + text[end:])
    assert "evidence_hash" not in lesson(rt, lesson_id).meta
    Indexer(rt).scan()

    assert lesson(rt, lesson_id).meta["status"] == "active"
    assert check(rt, REF).stale == {}
    assert lesson(rt, lesson_id).meta["evidence_hash"] == {
        task: task_hash(rt.store.get(REF, task))}
    edit(rt, task, "outcome: success", "outcome: partial")
    Indexer(rt).scan()
    assert lesson(rt, lesson_id).meta["stale_reason"] == f"evidence {task} was edited"


def test_a_task_deleted_by_hand_makes_its_lesson_stale(
    scripted: tuple[Runtime, ScriptedLLM]
) -> None:
    rt, llm = scripted
    task, lesson_id = learned_one(rt, llm)
    path = rt.store.path_for_id(REF, task)
    text = path.read_text()
    start = text.index(f"<!-- entry:{task} -->")
    end = text.index(f"<!-- /entry:{task} -->") + len(f"<!-- /entry:{task} -->\n")
    path.write_text(text[:start] + text[end:])
    Indexer(rt).scan()
    assert lesson(rt, lesson_id).meta["stale_reason"] == f"evidence {task} was deleted"
    assert lesson_id not in briefed(rt)


def test_two_checks_at_once_mark_a_lesson_stale_with_one_audit_row(
    scripted: tuple[Runtime, ScriptedLLM], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A daemon's indexer and a ``learn_lessons`` run (or two processes) check one owner at
    once: the second check must read the first one's mark, not mark it again. The first
    check is held just before it marks until the second has reached the same point, or for
    2 s if it cannot get there (the fix: it waits for the first)."""
    rt, llm = scripted
    task, lesson_id = learned_one(rt, llm)
    edit(rt, task, "outcome: success", "outcome: failure")
    real_settle = provenance.settle
    first_in, second_in = threading.Event(), threading.Event()

    def held_settle(*args: Any, **kwargs: Any) -> Any:
        if not first_in.is_set():
            first_in.set()
            second_in.wait(timeout=2)
        else:
            second_in.set()
        return real_settle(*args, **kwargs)

    monkeypatch.setattr(provenance, "settle", held_settle)
    other = Runtime(rt.root, embedder=HashEmbedder(64), llm=ScriptedLLM())
    try:
        first = threading.Thread(target=check, args=(rt, REF))
        first.start()
        assert first_in.wait(timeout=30)
        second = threading.Thread(target=check, args=(other, REF))
        second.start()
        first.join(timeout=60)
        second.join(timeout=60)
    finally:
        other.close()

    assert lesson(rt, lesson_id).meta["status"] == "stale"
    rows = list_derivations(rt.db(), strategy="provenance")
    assert [(r["status"], r["outputs"]) for r in rows] == [("stale", [lesson_id])]
