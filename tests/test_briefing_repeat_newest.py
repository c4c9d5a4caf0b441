"""A line the briefing folds from copies of one record ("recorded 12x or more") shows the
newest copy's id and date. The search fetched at most 12 of the copies, in no order of time
(their vectors are equal), and the line showed the newest of those: a task recorded daily for
a month was briefed with its twelfth day."""

from __future__ import annotations

import random

from everos_reflect.briefing.build import EVIDENCE_K, build_briefing
from everos_reflect.index.sync import Indexer
from everos_reflect.model import Kind, UserRef
from everos_reflect.procedural.tasks import new_task
from everos_reflect.runtime import Runtime

REF = UserRef.of("u_ops")


def _task(rt: Runtime, day: int, outcome: str) -> str:
    t = new_task(REF, task_type="deploy", goal="Deploy the web service", steps=["deploy"],
                 outcome=outcome, timestamp=f"2026-10-{day:02d}T10:00:00+00:00")
    return rt.store.append(REF, Kind.TASK, t.meta, t.sections, day=t.day).id


def test_a_folded_repeat_shows_its_newest_copy(rt: Runtime) -> None:
    days = list(range(1, 30))
    random.Random(7).shuffle(days)
    ids = {day: _task(rt, day, "failure") for day in days}
    _task(rt, 30, "success")  # newest of the goal, but another line: not a copy
    Indexer(rt).scan()
    b = build_briefing(rt, REF, "Deploy the web service", max_tokens=2000, min_similarity=-1)
    (line,) = [i for i in b.items if "failure" in i.text]
    assert (line.id, line.timestamp[:10]) == (ids[29], "2026-10-29")
    # the twelve copies fetched and the newest: thirteen known, more maybe
    assert line.note == f"recorded {EVIDENCE_K + 1}x or more"
    assert f"[{ids[29]} · task · 2026-10-29]" in b.text
    assert ids[29] not in b.repeated_ids and len(b.repeated_ids) == EVIDENCE_K
