"""A hand-written task record may hold an error or a step far longer than any edge takes (up to
an entry's 256 KiB: a pasted log). Offline, the lesson learned from it stored the whole text as
its ``signature``: 70 KB of metadata, refused at the write ("YAML block is over 64 KiB"), so the
run failed, and every run after it the same way: that task type never had a lesson. The
signature is now cut with a hash of the whole, and the quote cut; nothing else changes."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from everos_reflect.model import Kind
from everos_reflect.procedural.learning import (
    MAX_SIGNATURE_CHARS,
    bounded_signature,
    offline_candidates,
)
from everos_reflect.procedural.tasks import MAX_LINE_CHARS, TaskRecord
from everos_reflect.runtime import Runtime
from tests.reflect_fixtures import make_runtime
from tests.test_lessons import REF, learn, lessons

PASTED = "E" + "x" * 70_000  # one long word: no volatile part to blank


def _record(n: int, outcome: str, *, steps: tuple[str, ...] = ("deploy",),
            errors: tuple[str, ...] = ()) -> TaskRecord:
    return TaskRecord(id=f"tk_20261001_000{n}", task_type="deploy", outcome=outcome,
                      goal="Deploy", steps=steps, errors=errors)


def test_a_long_signature_is_cut_with_a_hash_of_the_whole() -> None:
    assert bounded_signature("short") == "short"
    exact = "s" * MAX_SIGNATURE_CHARS
    assert bounded_signature(exact) == exact  # what any edge's record gives: unchanged
    one, other = bounded_signature(PASTED), bounded_signature(PASTED + "y")
    assert len(one) < 300 and one.startswith("Ex")
    assert one != other and bounded_signature(PASTED) == one


def test_a_long_recurring_error_makes_one_bounded_lesson() -> None:
    [lesson] = offline_candidates([_record(1, "failure", errors=(PASTED,)),
                                   _record(2, "failure", errors=(PASTED,))])
    assert lesson.evidence == ("tk_20261001_0001", "tk_20261001_0002")
    assert len(lesson.signature or "") < 300
    assert len(lesson.text) < MAX_LINE_CHARS + 200 and "…" in lesson.text


def test_a_long_step_every_success_took_makes_one_bounded_lesson() -> None:
    step = "check " + " ".join(f"w{i}" for i in range(20_000))
    [lesson] = offline_candidates([_record(1, "success", steps=(step,)),
                                   _record(2, "success", steps=(step,)),
                                   _record(3, "failure")])
    assert lesson.lesson_type == "do" and len(lesson.signature or "") < 300
    assert len(lesson.text) < MAX_LINE_CHARS + 200


@pytest.fixture
def offline(root: Path) -> Iterator[Runtime]:
    from everos_reflect.llm.extractive import ExtractiveLLM

    rt = make_runtime(root, ExtractiveLLM())
    yield rt
    rt.close()


def test_learn_lessons_writes_the_lesson_of_a_pasted_error_and_confirms_it(
        offline: Runtime) -> None:
    def hand_written(day: int) -> str:
        meta = {"owner_id": REF.user_id, "timestamp": f"2026-10-{day:02d}T10:00:00+00:00",
                "task_type": "deploy", "outcome": "failure"}
        sections = {"Goal": "Deploy", "Steps": "1. deploy", "Outcome": "failure",
                    "Errors": f"- {PASTED}"}
        return offline.store.append(REF, Kind.TASK, meta, sections,
                                    day=date(2026, 10, day)).id

    first = [hand_written(1), hand_written(2)]
    counts = learn(offline)  # "clipped": the records were cut to fit the prompt
    assert counts.get("written") == 1 and "failed" not in counts, counts
    [lesson] = lessons(offline)
    assert lesson.evidence == tuple(first) and lesson.lesson_type == "avoid"
    third = hand_written(3)
    counts = learn(offline)
    assert "failed" not in counts, counts
    [again] = lessons(offline)  # the same signature: confirmed, not a second lesson
    assert again.id == lesson.id and third in again.evidence and again.confirmations == 3
