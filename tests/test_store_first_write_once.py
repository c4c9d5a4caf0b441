"""The first write to a log runs its edit once, under the log's lock. A check made before the
lock (so that a refused write leaves no lock file) ran the whole edit a first time on every
log not written before: parsed, ids allocated, entries rendered and parsed back twice, and a
batch's ``refer`` called outside the lock it is documented to run under. A refused write
still leaves the root as it was."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.errors import TooLarge
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime

REF = UserRef.of("u_ann")
DAY = date(2026, 10, 12)


def _locks(root: Path) -> list[str]:
    folder = root / ".index" / "locks"
    return sorted(p.name for p in folder.glob("md-*.lock")) if folder.is_dir() else []


@pytest.mark.parametrize("logs", [1, 2])
def test_the_first_write_to_a_log_runs_its_edit_once_under_its_lock(
        rt: Runtime, logs: int) -> None:
    calls: list[tuple[int, list[str], list[str]]] = []

    def refer(place: int, meta: Any, ids: list[str]) -> Any:
        calls.append((place, list(ids), _locks(rt.root)))
        return meta

    items = [({"timestamp": f"2026-10-1{n}T09:00:00+00:00"}, {"Subject": "Tea", "Content": t})
             for n, t in ((2, "Green tea."), (3, "Black tea."))]
    batches = [(REF, Kind.EPISODE, date(2026, 10, 12 + n), items) for n in range(logs)]
    made = rt.store.append_to_logs(batches, refer=refer)

    assert [len(m) for m in made] == [2] * logs
    assert [(place, ids) for place, ids, _ in calls] == [
        (place, [e.id for e in entries]) for entries in made for place in (0, 1)]
    assert all(len(held) == logs for _, _, held in calls)  # each log's lock taken first


def test_a_refused_first_write_leaves_no_lock_file(rt: Runtime) -> None:
    big = "x" * (rt.settings.limits.max_entry_bytes + 1)
    with pytest.raises(TooLarge):
        rt.store.append(REF, Kind.EPISODE, {}, {"Subject": "Big", "Content": big}, day=DAY)
    with pytest.raises(TooLarge):
        rt.store.append_to_logs([(REF, Kind.EPISODE, DAY, [({}, {"Content": "Tea."})]),
                                 (REF, Kind.EPISODE, date(2026, 10, 13),
                                  [({}, {"Content": big})])])
    assert _locks(rt.root) == []
    assert not rt.store.log_path(REF, Kind.EPISODE, DAY).exists()
    assert not (rt.root / "default_app").exists()  # no user folder made either
