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

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from everos_reflect.model import (
    Entry,
    format_timestamp,
    id_items,
    id_order,
    meta_text,
    served_status,
)

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


def ranked(lessons: list[Lesson], task_type: str) -> list[Lesson]:
    """The live lessons of ``task_type``, most confirmed first, then newest."""
    live = [x for x in lessons if x.live and x.task_type == task_type]
    return sorted(live, key=lambda x: (-x.confirmations, -(x.timestamp.timestamp()
                                                           if x.timestamp else 0.0),
                                        id_order(x.id)))
