"""What the sync and watcher tests share besides conftest's ``rt``: the ids the index holds and
a log of two indexed Episodes."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from everos_reflect.index.sync import Indexer
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime


def indexed_ids(rt: Runtime) -> set[str]:
    """Every entry id the SQLite index holds, live or archived."""
    return {r[0] for r in rt.db().execute("SELECT id FROM entries")}


def two_indexed_episodes(rt: Runtime, ref: UserRef) -> tuple[Path, str, str]:
    """``ref``'s log of 2026-10-12 holding two Episodes, both indexed: its path and their ids."""
    day = date(2026, 10, 12)
    first = rt.store.append(ref, Kind.EPISODE, {"timestamp": "2026-10-12T09:00:00+00:00"},
                            {"Subject": "Tea", "Content": "Green tea."}, day=day)
    second = rt.store.append(ref, Kind.EPISODE, {"timestamp": "2026-10-12T10:00:00+00:00"},
                             {"Subject": "Walk", "Content": "A long walk."}, day=day)
    Indexer(rt).scan()
    assert indexed_ids(rt) == {first.id, second.id}
    return rt.store.path_for_id(ref, first.id), first.id, second.id
