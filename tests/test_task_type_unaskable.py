"""A hand-written lesson or task whose ``task_type`` no query can name (none, ``deploy prod``,
a control character, 3,000 characters): lessons are served per task type, and
``lessons --task-type``, the API and the briefing take only a valid name, so such a lesson
was never served, and a task taught only such lessons, and ``lint`` said nothing."""

from __future__ import annotations

from datetime import date

from everos_reflect.lint import lint_report
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime

REF = UserRef.of("u_ops")
LESSON = {"timestamp": "2026-10-20T09:00:00+00:00", "lesson_type": "do",
          "evidence": ["tk_20261012_0001"], "depth": 1}
TASK = {"timestamp": "2026-10-20T09:00:00+00:00", "outcome": "success"}
RULE = "use 1-128 characters from A-Z a-z 0-9 _ . -, starting with a letter or digit"


def test_lint_names_a_task_type_no_query_can_ask_for(rt: Runtime) -> None:
    def lesson(**meta: object) -> str:
        return rt.store.append(REF, Kind.LESSON, {**LESSON, **meta}, {"Lesson": "Retry."},
                               day=date(2026, 10, 20)).id

    spaced, bell, none, fine = (lesson(task_type="deploy prod"), lesson(task_type="a\x07b"),
                                lesson(), lesson(task_type="deploy"))
    task = rt.store.append(REF, Kind.TASK, {**TASK, "task_type": "deploy prod"},
                           {"Goal": "Ship", "Steps": "- build", "Outcome": "ok"},
                           day=date(2026, 10, 20)).id
    messages = [p["message"] for p in lint_report(rt.root)["problems"]]
    served = "no query can ask for this task type, so this lesson is never served"
    assert f"entry {spaced}: invalid task_type 'deploy prod': {RULE}: {served}" in messages
    assert f"entry {bell}: invalid task_type 'a\\x07b': {RULE}: {served}" in messages
    assert f"entry {none}: no task_type: a lesson is served per task type, so one without " \
        "is never served (write one, e.g. task_type: deploy)" in messages
    assert f"entry {task}: invalid task_type 'deploy prod': {RULE}: no query can ask for " \
        "this task type, so no lesson learned from this task is ever served" in messages
    assert not any(m.startswith(f"entry {fine}:") for m in messages)
