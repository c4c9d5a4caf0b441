"""Lessons: how a lesson entry is read, and what a new one looks like.

A lesson is an entry of ``.lessons/lesson-YYYY-MM-DD.md`` (``type: lesson_daily``, prefix
``ls``) with metadata ``task_type``, ``lesson_type`` (``do`` | ``avoid``), ``evidence`` (the
task ids it rests on), ``evidence_hash`` (per task, what it was learned from: provenance
marks the lesson stale once a task reads otherwise), ``confirmations``, ``status``
(``active`` | ``contested`` | ``stale`` | ``retired``) and section ``## Lesson``. Lessons
``learn_lessons`` writes carry ``created_by: learn_lessons``: only those may have their
metadata rewritten by the daemon (SPEC §10); a person's lesson is read, never changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from everos_reflect.errors import EverosError
from everos_reflect.model import (
    Entry,
    Kind,
    UserRef,
    format_timestamp,
    id_items,
    id_order,
    meta_text,
    served_status,
)

if TYPE_CHECKING:
    from everos_reflect.markdown.store import MarkdownStore

LESSON_TYPES = ("do", "avoid")
LIVE_STATUSES = ("active", "contested")
CREATED_BY = "learn_lessons"


@dataclass(frozen=True)
class Lesson:
    id: str
    task_type: str
    lesson_type: str
    text: str
    evidence: tuple[str, ...] = ()
    confirmations: int = 1
    status: str = "active"
    timestamp: datetime | None = None
    deprecated_by: str | None = None
    contested_with: tuple[str, ...] = ()
    ours: bool = False  # written by learn_lessons
    #: the id-list keys (``evidence``, ``contested_with``) a hand edit made something else
    #: than a list of ids, a mapping say: read as no ids, and the lesson is not rewritten
    garbled: tuple[str, ...] = ()
    #: ``contested_with`` is written (as a list, empty or not, or garbled): the rivals it
    #: names are all the lesson is contested by (:func:`served`); absent, ``status`` stands
    rivals_named: bool = False

    @property
    def live(self) -> bool:
        """Shown to agents: not archived, and active or contested."""
        return self.deprecated_by is None and self.status in LIVE_STATUSES

    @property
    def rewritable(self) -> bool:
        """The daemon may update its metadata: ``learn_lessons`` wrote it and every id list
        still reads as one. A garbled list, rewritten, would lose what the person wrote."""
        return self.ours and not self.garbled

    @property
    def stamp(self) -> str | None:
        return format_timestamp(self.timestamp) if self.timestamp else None


def read_lesson(entry: Entry) -> Lesson:
    """Read a lesson entry leniently (a person may have written it)."""
    meta = entry.meta
    evidence, evidence_ok = id_items(meta.get("evidence"))
    contested, contested_ok = id_items(meta.get("contested_with"))
    lesson_type = str(meta.get("lesson_type") or "do").strip().lower()
    confirmations = meta.get("confirmations")
    # a task cited twice by a hand edit is one task: it was counted, listed and briefed twice;
    # a rival written twice one rival (listed and counted twice in the lessons answer)
    evidence, contested = list(dict.fromkeys(evidence)), list(dict.fromkeys(contested))
    # a lesson is no rival of its own: listed so, or with an empty list, it was briefed and
    # listed as contested for good, with no rival to decide against (lint names both)
    contested = [i for i in contested if i != entry.id]
    if isinstance(confirmations, bool) or not isinstance(confirmations, int):
        confirmations = max(1, len(evidence))
    return Lesson(
        id=entry.id,
        task_type=(meta_text(meta.get("task_type")) or "").strip(),
        lesson_type=lesson_type if lesson_type in LESSON_TYPES else "do",
        text=entry.sections.get("Lesson", "").strip(),
        evidence=tuple(evidence),
        confirmations=max(0, confirmations),
        status=lesson_status(entry.id, meta),
        timestamp=entry.timestamp,
        deprecated_by=entry.deprecated_by,
        contested_with=tuple(contested),
        ours=meta.get("created_by") == CREATED_BY,
        rivals_named=meta.get("contested_with") is not None,
        garbled=tuple(key for key, ok in (("evidence", evidence_ok),
                                           ("contested_with", contested_ok)) if not ok),
    )


def no_rival(lesson_id: str, meta: Mapping[str, Any]) -> bool:
    """Whether a lesson's ``contested_with`` is written as a list of ids naming no lesson but
    ``lesson_id`` itself (``[]``, or its own id): such a lesson has nothing to be contested by
    and is read as active. Absent, the ``status`` is taken as written (a person may mark a
    lesson contested without naming the rival); garbled, it is left to lint."""
    value = meta.get("contested_with")
    if value is None:
        return False
    ids, ok = id_items(value)
    return ok and all(i == lesson_id for i in ids)


def lesson_status(lesson_id: str, meta: Mapping[str, Any]) -> str:
    """A lesson's ``status`` as every reader takes it (the briefing, ``lessons``, ``search``):
    :func:`~everos_reflect.model.served_status`, but ``active`` for a contested one that
    names no rival (:func:`no_rival`)."""
    status = served_status(meta)
    return "active" if status == "contested" and no_rival(lesson_id, meta) else status


def rivals_decide(lesson_id: str, meta: Mapping[str, Any]) -> bool:
    """Whether a lesson's status as served depends on the user's other lessons: it reads as
    contested and names its rivals, which count only while they are live lessons of its task
    type (:func:`served`). A reader of one lesson (``search``, ``explain``) then asks
    :func:`served_statuses`."""
    return lesson_status(lesson_id, meta) == "contested" and \
        meta.get("contested_with") is not None


def served_statuses(store: MarkdownStore, ref: UserRef) -> dict[str, str]:
    """Each lesson of ``ref`` by id with its status as :func:`served` reads it (against the
    user's other lessons), for the readers of one lesson that :func:`rivals_decide`; empty
    when the lessons cannot be read (each then keeps its own status)."""
    try:
        lessons = [read_lesson(e) for e in store.entries(ref, Kind.LESSON)]
    except (EverosError, OSError):
        return {}
    return {x.id: x.status for x in served(lessons)}


def successor(lesson_id: str, archived: Mapping[str, str]) -> str:
    """The lesson ``lesson_id`` lives on as: archive marks followed (a refinement replaced
    it) to the first id not archived, or to where the marks loop."""
    seen = {lesson_id}
    while (nxt := archived.get(lesson_id)) is not None and nxt not in seen:
        seen.add(nxt)
        lesson_id = nxt
    return lesson_id


def live_rivals(lesson: Lesson, live: Mapping[str, Lesson],
                archived: Mapping[str, str]) -> tuple[str, ...]:
    """The rivals ``lesson`` is contested by: the ids of its ``contested_with`` that are (or
    were refined into, :func:`successor`) live lessons of its task type, but itself. A task
    id, a lesson deleted, retired or of another task type is no rival: there is nothing to
    decide against (``learn_lessons`` decides against live lessons of the task type alone)."""
    found = (successor(i, archived) for i in lesson.contested_with)
    return tuple(dict.fromkeys(
        i for i in found
        if i != lesson.id and i in live and live[i].task_type == lesson.task_type))


def served(lessons: Iterable[Lesson]) -> list[Lesson]:
    """One user's lessons as every reader serves them (the briefing, ``lessons``, API, MCP):
    each one's ``contested_with`` cut to its :func:`live_rivals`, and a contested one whose
    written list names no live rival read as active. A hand-written lesson contested by a
    task id, or by a lesson deleted by hand, was served as contested for good: nothing
    rewrites a person's lesson, so no run could decide it (``lint`` names such a rival)."""
    lessons = list(lessons)
    live = {x.id: x for x in lessons if x.live}
    archived = {x.id: x.deprecated_by for x in lessons if x.deprecated_by}
    out = []
    for x in lessons:
        rivals = live_rivals(x, live, archived) if x.rivals_named else x.contested_with
        if rivals != x.contested_with:
            x = replace(x, contested_with=rivals)
        if x.rivals_named and x.status == "contested" and not rivals:
            x = replace(x, status="active")
        out.append(x)
    return out


def ranked(lessons: list[Lesson], task_type: str) -> list[Lesson]:
    """The live lessons of ``task_type`` (as :func:`served`), most confirmed first, then
    newest; ``lessons``: every lesson of their user, whose rivals they may name."""
    live = [x for x in served(lessons) if x.live and x.task_type == task_type]
    return sorted(live, key=lambda x: (-x.confirmations, -(x.timestamp.timestamp()
                                                           if x.timestamp else 0.0),
                                        id_order(x.id)))
