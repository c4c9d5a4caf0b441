"""``learn_lessons``: a task type whose lessons cannot be written (an OSError on its log, a bug
a hand-edited lesson trips) fails alone. The other task types of the window are still learned
from and consumed; the failed type's tasks wait for the next run; the derivation is
``partial``, the run record names the owner and the type. Through the real ``openai`` client
and the loopback fake server."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.engine.engine import Engine
from everos_reflect.index import cursors
from everos_reflect.index.audit import list_derivations
from everos_reflect.llm.openai_llm import OpenAILLM
from everos_reflect.model import Kind, UserRef
from everos_reflect.procedural.lessons import read_lesson
from everos_reflect.procedural.tasks import new_task
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.lessons import NAME

pytest_plugins = ["tests.fake_openai"]

REF = UserRef.of("u_ops")
TYPES = ("deploy", "migrate", "review")  # asked, and written, in this order


@pytest.fixture
def rt(root: Path, fake_openai: Any) -> Iterator[Runtime]:
    (root / "ome.toml").write_text(f"[strategies.{NAME}]\nenabled = true\n"
                                   "cooldown_seconds = 0\n")
    llm = OpenAILLM(model="fake-model", base_url=fake_openai.base_url, api_key="k",
                    max_retries=0, timeout_seconds=10, sleep=lambda s: None)
    runtime = Runtime(root, embedder=HashEmbedder(64), llm=llm)
    yield runtime
    runtime.close()


def add_task(rt: Runtime, task_type: str, day: int) -> str:
    t = new_task(REF, task_type=task_type, goal=f"Run the {task_type}", steps=["check logs"],
                 outcome="failure", errors=["timeout"],
                 timestamp=f"2026-10-{day:02d}T10:00:00+00:00")
    return rt.store.append(REF, Kind.TASK, t.meta, t.sections, day=t.day).id


def lesson_reply(body: dict[str, Any]) -> dict[str, Any]:
    prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
    task_type = next(t for t in TYPES if f"Run the {t}" in prompt)
    return {"lessons": [f"Read the {task_type} logs before retrying."], "avoid": []}


def lesson_types(rt: Runtime) -> list[str]:
    return sorted(x.task_type for x in map(read_lesson, rt.store.entries(REF, Kind.LESSON)))


def test_a_task_type_whose_lessons_cannot_be_written_fails_alone(
        rt: Runtime, fake_openai: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    tasks = {t: [add_task(rt, t, 10 + n), add_task(rt, t, 20 + n)] for n, t in enumerate(TYPES)}
    real = rt.store.append_many

    def append_many(ref: UserRef, kind: Kind, rows: Any, **options: Any) -> Any:
        if kind is Kind.LESSON and any(m.get("task_type") == "migrate" for m, _ in rows):
            raise OSError(28, "No space left on device")
        return real(ref, kind, rows, **options)

    monkeypatch.setattr(rt.store, "append_many", append_many)
    fake_openai.script(lesson_reply, lesson_reply, lesson_reply)

    outcome = Engine(rt).trigger(NAME, timeout=60)

    assert outcome.status == "partial", outcome
    assert outcome.counts == {"owners": 1, "written": 2, "failed": 1}
    assert "u_ops: task type 'migrate': No space left on device" in (outcome.error or "")
    assert "OSError" not in (outcome.error or "")
    # the type after the failed one was learned from too
    assert lesson_types(rt) == ["deploy", "review"]
    (row,) = list_derivations(rt.db(), strategy=NAME)
    assert row["status"] == "partial" and "'migrate'" in row["error"]
    assert sorted(row["inputs"]) == sorted(tasks["deploy"] + tasks["review"])
    # only the migrate tasks wait: consumed are exactly the others
    done = {i for i, _ in cursors.consumed(rt.db(), NAME, REF)}
    assert done == set(tasks["deploy"] + tasks["review"])
    assert cursors.intents(rt.db(), NAME) == []

    monkeypatch.setattr(rt.store, "append_many", real)
    fake_openai.script(lesson_reply)
    outcome = Engine(rt).trigger(NAME, timeout=60)
    assert outcome.status == "ok", outcome
    assert outcome.counts == {"owners": 1, "written": 1}
    assert lesson_types(rt) == ["deploy", "migrate", "review"]  # once each
    assert len(fake_openai.chat_bodies()) == 4  # one call for migrate, none again for the rest


def test_a_window_whose_every_task_type_failed_is_failed_and_left_whole(
        rt: Runtime, fake_openai: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    for n, t in enumerate(TYPES[:2]):
        add_task(rt, t, 10 + n)

    def broken(ref: UserRef, kind: Kind, rows: Any, **options: Any) -> Any:
        raise OSError(13, "Permission denied")

    monkeypatch.setattr(rt.store, "append_many", broken)
    fake_openai.script(lesson_reply, lesson_reply)

    outcome = Engine(rt).trigger(NAME, timeout=60)

    assert outcome.status == "failed", outcome
    assert outcome.counts == {"failed": 1}
    assert "u_ops: task type 'deploy': Permission denied" in (outcome.error or "")
    assert "u_ops: task type 'migrate': Permission denied" in (outcome.error or "")
    assert "PermissionError" not in (outcome.error or "")
    assert cursors.consumed(rt.db(), NAME, REF) == set()
    (row,) = list_derivations(rt.db(), strategy=NAME)
    assert row["status"] == "failed"


def test_a_crash_after_a_partial_write_still_leaves_the_failed_types_tasks_waiting(
        rt: Runtime, fake_openai: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The process dies after deploy's and review's lessons were written and migrate's failed,
    before the cursor moved: recovery consumes what was written for, not the migrate tasks."""
    from everos_reflect.strategies.belief_store import BeliefTier

    tasks = {t: [add_task(rt, t, 10 + n)] for n, t in enumerate(TYPES)}
    real = rt.store.append_many

    def append_many(ref: UserRef, kind: Kind, rows: Any, **options: Any) -> Any:
        if kind is Kind.LESSON and any(m.get("task_type") == "migrate" for m, _ in rows):
            raise OSError(28, "No space left on device")
        return real(ref, kind, rows, **options)

    def power_cut(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt("the process died here")

    with monkeypatch.context() as patch:
        patch.setattr(rt.store, "append_many", append_many)
        patch.setattr(BeliefTier, "_record", power_cut)
        fake_openai.script(lesson_reply, lesson_reply, lesson_reply)
        assert Engine(rt).trigger(NAME, timeout=60).status == "failed"
    assert lesson_types(rt) == ["deploy", "review"]

    fake_openai.script(lesson_reply)
    outcome = Engine(rt).trigger(NAME, timeout=60)  # recovery first, then the run
    assert outcome.status == "ok", outcome
    assert outcome.counts == {"recovered": 1, "owners": 1, "written": 1}
    assert lesson_types(rt) == ["deploy", "migrate", "review"]
    done = {i for i, _ in cursors.consumed(rt.db(), NAME, REF)}
    assert done == {i for ids in tasks.values() for i in ids}


def shown_days(body: dict[str, Any]) -> list[str]:
    """The dates of the tasks a lessons prompt showed (one numbered line each)."""
    prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return re.findall(r"^\[\d+\] (2026-10-\d\d) ", prompt, re.M)


def test_tasks_past_max_records_wait_unconsumed_and_the_run_counts_them(
        rt: Runtime, fake_openai: Any) -> None:
    (rt.root / "ome.toml").write_text(f"[strategies.{NAME}]\nenabled = true\n"
                                      "cooldown_seconds = 0\nmax_records = 2\n")
    first = [add_task(rt, "deploy", day) for day in (11, 12)]
    last = add_task(rt, "deploy", 13)
    fake_openai.script(lesson_reply, lesson_reply)

    outcome = Engine(rt).trigger(NAME, timeout=60)
    assert outcome.counts == {"owners": 1, "written": 1, "deferred_records": 1}
    assert shown_days(fake_openai.chat_bodies()[0]) == ["2026-10-11", "2026-10-12"]
    # consumed are exactly the tasks the call showed: the one cut waits
    assert {i for i, _ in cursors.consumed(rt.db(), NAME, REF)} == set(first)

    outcome = Engine(rt).trigger(NAME, timeout=60)
    assert outcome.counts == {"owners": 1}  # it restates the lesson: confirmed, no new one
    assert shown_days(fake_openai.chat_bodies()[1]) == ["2026-10-13"]
    assert {i for i, _ in cursors.consumed(rt.db(), NAME, REF)} == {*first, last}
    (lesson,) = map(read_lesson, rt.store.entries(REF, Kind.LESSON))
    assert set(lesson.evidence) == {*first, last}


def test_a_kill_between_two_task_types_writes_leaves_the_unwritten_types_tasks_waiting(
        rt: Runtime, fake_openai: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # ``learn_lessons`` killed between two task types' writes: the deploy lessons are on disk
    # under the window's key, the migrate and review ones never were. Recovery consumes the tasks
    # whose lessons were written and leaves the others waiting, so the next run learns from them
    # (before, the whole window was consumed and those task types never got their lessons).
    tasks = {t: [add_task(rt, t, 10 + n)] for n, t in enumerate(TYPES)}
    real = rt.store.append_many

    def append_many(ref: UserRef, kind: Kind, rows: Any, **options: Any) -> Any:
        if kind is Kind.LESSON and any(m.get("task_type") == "migrate" for m, _ in rows):
            raise KeyboardInterrupt("the process died here")
        return real(ref, kind, rows, **options)

    with monkeypatch.context() as patch:
        patch.setattr(rt.store, "append_many", append_many)
        fake_openai.script(lesson_reply, lesson_reply, lesson_reply)
        assert Engine(rt).trigger(NAME, timeout=60).status == "failed"
    assert lesson_types(rt) == ["deploy"]
    assert len(cursors.intents(rt.db(), NAME)) == 1  # the kill left the commit open

    fake_openai.script(lesson_reply, lesson_reply)
    outcome = Engine(rt).trigger(NAME, timeout=60)  # recovery first, then the run

    assert outcome.status == "ok", outcome
    assert outcome.counts == {"recovered": 1, "owners": 1, "written": 2}
    assert lesson_types(rt) == ["deploy", "migrate", "review"]  # once each
    # the deploy task was not shown again; migrate and review were, once
    assert len(fake_openai.chat_bodies()) == 5
    done = {i for i, _ in cursors.consumed(rt.db(), NAME, REF)}
    assert done == {i for ids in tasks.values() for i in ids}
    assert cursors.intents(rt.db(), NAME) == []
    rows = [r for r in list_derivations(rt.db(), strategy=NAME) if r["status"] == "ok"]
    (recovered,) = [r for r in rows if (r["error"] or "").startswith("recovered")]
    (run,) = [r for r in rows if r is not recovered]
    assert recovered["inputs"] == tasks["deploy"]
    assert sorted(run["inputs"]) == sorted(tasks["migrate"] + tasks["review"])
