"""Task records: what a new one looks like, and how any one (hand-written too) is read.

A task record is an entry of ``tasks/task-YYYY-MM-DD.md`` (``type: task_daily``, prefix ``tk``)
with metadata ``task_type`` and ``outcome`` and the sections ``## Goal``, ``## Steps`` (one step
per line), ``## Outcome`` and ``## Errors`` (one error per line). One function shapes new
records for every edge (CLI, HTTP, MCP); :func:`read_task` reads whatever a person wrote,
leniently, so a hand-written record takes part in lessons like any other.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from everos_reflect.errors import InvalidEpisode
from everos_reflect.model import (
    Entry,
    UserRef,
    blank,
    control_problem,
    format_timestamp,
    json_got,
    meta_text,
    new_record_time,
    normalize_text,
    too_long,
    validate_name,
)
from everos_reflect.problem_words import one_of

OUTCOMES = ("success", "failure", "partial")
MAX_GOAL_CHARS = 4_000
MAX_STEPS = 100
MAX_ERRORS = 50
MAX_LINE_CHARS = 2_000

# "1. x", "1) x", "- x", "* x", "+ x": list markers a person may put before a step or error
_BULLET_RE = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+")


class InvalidTask(InvalidEpisode):
    """A new task record's field is unusable; ``field`` names it (like :class:`InvalidEpisode`,
    so every edge reports it the same way)."""


@dataclass(frozen=True)
class NewTask:
    """A validated task record ready to append: its day file, metadata and sections."""

    day: date
    meta: dict[str, Any]
    sections: dict[str, str]


def _too_many(items: list[str], most: int) -> str:
    """A list over its bound, in the API's words: ``task add`` said "--step 101 steps; at
    most 100" where the API said "steps: must hold at most 100 items, got 101"."""
    return f"must hold at most {most:,} items, got {len(items):,}"


def _one_line(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise InvalidTask(what, f"must be text, got {json_got(value)}")
    problem = control_problem(value)
    if problem is not None:  # before split(): it would quietly drop U+001C-U+001F
        raise InvalidTask(what, problem)
    text = " ".join(value.split())  # a pasted multi-line error stays one line, text kept
    if blank(text):
        raise InvalidTask(what, "must not be empty")
    if len(text) > MAX_LINE_CHARS:
        raise InvalidTask(what, too_long(MAX_LINE_CHARS, len(text)))
    return text


def new_task(
    ref: UserRef,
    *,
    task_type: str,
    goal: str,
    steps: list[str],
    outcome: str,
    errors: list[str] | None = None,
    outcome_note: str | None = None,
    timestamp: str | datetime | None = None,
    now: datetime | None = None,
) -> NewTask:
    """Validate and shape a task record, as ``task add``, ``POST /api/v1/tasks`` and the MCP
    ``record_task`` tool add them. Raises :class:`InvalidTask` naming the field."""
    try:
        validate_name(task_type, "task_type")
    except ValueError as exc:
        raise InvalidTask("task_type", str(exc)) from None
    if not isinstance(goal, str) or blank(goal):
        raise InvalidTask("goal", "must not be empty")
    for name, text in (("goal", goal), ("outcome_note", outcome_note)):
        problem = control_problem(text) if isinstance(text, str) else None
        if problem is not None:
            raise InvalidTask(name, problem)
    goal = goal.strip()
    if len(goal) > MAX_GOAL_CHARS:
        raise InvalidTask("goal", too_long(MAX_GOAL_CHARS, len(goal)))
    if outcome not in OUTCOMES:
        raise InvalidTask("outcome", one_of(OUTCOMES, outcome))
    steps = list(steps or [])
    if not steps:
        raise InvalidTask("step", "must not be empty")
    if len(steps) > MAX_STEPS:
        raise InvalidTask("step", _too_many(steps, MAX_STEPS))
    step_lines = [_one_line(s, "step") for s in steps]
    errors = list(errors or [])
    if len(errors) > MAX_ERRORS:
        raise InvalidTask("error", _too_many(errors, MAX_ERRORS))
    error_lines = [_one_line(e, "error") for e in errors]
    if outcome_note is not None and not isinstance(outcome_note, str):
        raise InvalidTask("outcome_note", f"must be text, got {json_got(outcome_note)}")
    note = (outcome_note or "").strip()
    if outcome_note is not None and blank(note):  # as a blank goal: given, so meant to say
        # something; it was taken for no note at all, and the record said the outcome word
        raise InvalidTask("outcome_note", "must not be empty")
    if len(note) > MAX_GOAL_CHARS:
        raise InvalidTask("outcome_note", too_long(MAX_GOAL_CHARS, len(note)))
    ts, day = new_record_time(timestamp, now, InvalidTask)
    meta: dict[str, Any] = {"owner_id": ref.user_id,
                            "timestamp": format_timestamp(ts, fraction=timestamp is not None),
                            "task_type": task_type, "outcome": outcome}
    sections = {
        "Goal": goal,
        "Steps": "\n".join(f"{n}. {s}" for n, s in enumerate(step_lines, start=1)),
        "Outcome": note or outcome,
    }
    if error_lines:
        sections["Errors"] = "\n".join(f"- {e}" for e in error_lines)
    return NewTask(day, meta, sections)


def section_lines(body: str) -> list[str]:
    """The items of a one-per-line section, list markers removed, blank lines skipped.

    Lines end at ``\n``, as the log's: ``str.splitlines`` also ended one at a U+2028 (or a
    form feed) a hand edit left inside a step, so lessons learned from two steps where the log,
    ``lint`` and the briefing show one (``lint`` names the character)."""
    items = []
    for line in body.split("\n"):
        text = _BULLET_RE.sub("", line).strip()
        if text and text.lower() not in {"none", "(none)", "n/a"}:
            items.append(text)
    return items


@dataclass(frozen=True)
class TaskRecord:
    """A task record as the lesson logic sees it (from any entry, hand-written or not)."""

    id: str
    task_type: str
    outcome: str  # one of OUTCOMES, or "" when the entry does not say a valid one
    goal: str
    steps: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    outcome_text: str = ""
    timestamp: datetime | None = None
    deprecated_by: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def succeeded(self) -> bool:
        return self.outcome == "success"

    @property
    def failed(self) -> bool:
        return self.outcome == "failure"

    def text(self) -> str:
        """One line for prompts and briefings: goal, outcome, steps, errors."""
        parts = [f"{self.goal} (outcome: {self.outcome or 'unknown'})"]
        if self.steps:
            parts.append("steps: " + "; ".join(self.steps))
        if self.errors:
            parts.append("errors: " + "; ".join(self.errors))
        return " — ".join(parts)


def read_task(entry: Entry) -> TaskRecord:
    """Read a task entry leniently: missing sections are empty, an unknown outcome is ``""``."""
    outcome = str(entry.meta.get("outcome") or "").strip().lower()
    return TaskRecord(
        id=entry.id,
        task_type=(meta_text(entry.meta.get("task_type")) or "").strip(),
        outcome=outcome if outcome in OUTCOMES else "",
        goal=entry.sections.get("Goal", "").strip(),
        steps=tuple(section_lines(entry.sections.get("Steps", ""))),
        errors=tuple(section_lines(entry.sections.get("Errors", ""))),
        outcome_text=entry.sections.get("Outcome", "").strip(),
        timestamp=entry.timestamp,
        deprecated_by=entry.deprecated_by,
    )


def task_hash(entry: Entry) -> str:
    """The hash of what a lesson learns from a task record, as :func:`read_task` reads it:
    ``task_type``, ``outcome``, goal, steps and errors (what the ``lessons`` prompt shows and
    the offline lessons count). A lesson keeps it per task in ``evidence_hash``; a task edited
    since (its outcome, a step, an error) reads otherwise and the lesson goes stale.

    The task's ``text_hash`` is of its goal alone (what is embedded): a success edited into a
    failure kept it, and the lesson stayed active. Whitespace, Unicode normalisation and list
    markers do not count: a step renumbered or re-indented is the same step."""
    task = read_task(entry)
    fields = [task.task_type, task.outcome, normalize_text(task.goal),
              [normalize_text(s) for s in task.steps], [normalize_text(e) for e in task.errors]]
    return hashlib.sha256(json.dumps(fields, ensure_ascii=False).encode()).hexdigest()[:32]
