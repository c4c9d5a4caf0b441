"""A batch sync (the watcher's, a Reflection commit's) waits for a log a writer may still be
at work on before it takes the indexer lock, never under it: it held the lock through up to
ten settle waits, and an ``add`` (or any other sync) meanwhile waited behind a log it had
nothing to do with. Under the lock the log is read again: one found as it stood still is
taken as it is, one written since (or never still) keeps its entries and is synced again
later. The writer's progress during each wait is played by :func:`tests.waiting.scripted_pauses`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from pathlib import Path

import pytest
from filelock import Timeout

from everos_reflect.index.sync import STILL_WRITTEN, Indexer
from everos_reflect.markdown import settling
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from tests.sync_fixtures import two_indexed_episodes
from tests.waiting import scripted_pauses

ANN, BOB = UserRef.of("ann"), UserRef.of("bob")
DAY = date(2026, 10, 12)


def _ann_with_her_last_entry_deleted(rt: Runtime) -> tuple[Path, str, str]:
    """Ann's log of two indexed Episodes, the last deleted by hand this instant: a deletion
    in a log just written, which a sync waits for before it believes it."""
    path, first, second = two_indexed_episodes(rt, ANN)
    text = path.read_text("utf-8")
    path.write_text(text[: text.index(f"<!-- entry:{second} -->")], "utf-8")
    return path, first, second


def ann_ids(rt: Runtime) -> set[str]:
    return {r[0] for r in rt.db().execute("SELECT id FROM entries WHERE user_id = 'ann'")}


def _adds_during_each_wait(rt: Runtime) -> tuple[list[object], Callable[[], None]]:
    """A step for every settle wait: Bob's add, synced with no wait for the indexer lock;
    what each got (its result, or the ``Timeout`` of a lock held)."""
    got: list[object] = []

    def add() -> None:
        entry = rt.store.append(BOB, Kind.EPISODE,
                                {"timestamp": f"2026-10-12T0{len(got)}:00:00+00:00"},
                                {"Subject": "Tea", "Content": f"Bob's tea {len(got)}."},
                                day=DAY)
        try:
            got.append(Indexer(rt).sync_path(rt.store.path_for_id(BOB, entry.id), timeout=0,
                                             wanted=[entry.id]))
        except Timeout as exc:
            got.append(exc)

    return got, add


def _writer_then(path: Path, add: Callable[[], None]) -> Callable[[], None]:
    """A settle-wait step: a writer appends to ``path`` (it keeps moving), then Bob adds."""
    def step() -> None:
        with path.open("a", encoding="utf-8") as out:
            out.write("\n")
        add()

    return step


def test_an_add_is_synced_while_a_batch_sync_waits_for_a_log_to_stand_still(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    path, first, second = _ann_with_her_last_entry_deleted(rt)
    got, add = _adds_during_each_wait(rt)
    pauses = scripted_pauses(monkeypatch, [add])

    [result] = Indexer(rt).sync_paths([path])

    assert pauses == [settling.SETTLE_SECONDS]  # one wait: the log stood still through it
    [added] = got
    assert not isinstance(added, Timeout), "the batch sync held the indexer through its wait"
    assert added.upserted == 1  # type: ignore[attr-defined]
    assert result.deleted == 1 and not result.moving
    assert second not in ann_ids(rt) and first in ann_ids(rt)


def test_a_log_moving_through_every_wait_ahead_is_held_without_a_wait_under_the_lock(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    path, first, second = _ann_with_her_last_entry_deleted(rt)
    got, add = _adds_during_each_wait(rt)

    pauses = scripted_pauses(monkeypatch, [_writer_then(path, add)] * settling.SETTLE_TRIES)

    [result] = Indexer(rt).sync_paths([path])

    assert len(pauses) == settling.SETTLE_TRIES
    assert len(got) == settling.SETTLE_TRIES
    assert not any(isinstance(g, Timeout) for g in got)
    assert result.moving and result.waits == STILL_WRITTEN
    assert ann_ids(rt) >= {first, second}  # held until it stands still
    [again] = Indexer(rt).sync_paths([path])  # still now
    assert again.deleted == 1 and not again.moving
    assert second not in ann_ids(rt)


def test_a_log_written_after_it_stood_still_and_before_the_lock_is_held_not_waited_for(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    path, first, second = _ann_with_her_last_entry_deleted(rt)
    scripted_pauses(monkeypatch, [])
    real = Indexer._embedded_ahead

    def then_written(self: Indexer, *args: object, **kwargs: object) -> object:
        made = real(self, *args, **kwargs)  # type: ignore[arg-type]
        with path.open("a", encoding="utf-8") as out:  # after the waits, before the lock
            out.write("\n")
        return made

    monkeypatch.setattr(Indexer, "_embedded_ahead", then_written)
    waits_under_lock: list[float] = []
    real_sync = Indexer._sync

    def sync(self: Indexer, *args: object, **kwargs: object) -> object:
        waits = scripted_pauses(monkeypatch, [])
        try:
            return real_sync(self, *args, **kwargs)  # type: ignore[arg-type]
        finally:
            waits_under_lock.extend(waits)

    monkeypatch.setattr(Indexer, "_sync", sync)
    [result] = Indexer(rt).sync_paths([path])

    assert waits_under_lock == []
    assert result.moving and ann_ids(rt) >= {first, second}


def test_an_add_is_synced_while_a_scan_waits_for_a_log_to_stand_still(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reconcile scan (the watcher's, a command's before it searches) syncs such a log last,
    its lock let go for the wait."""
    _, first, _ = _ann_with_her_last_entry_deleted(rt)
    got, add = _adds_during_each_wait(rt)
    pauses = scripted_pauses(monkeypatch, [add])

    report = Indexer(rt).scan()

    assert pauses == [settling.SETTLE_SECONDS]
    [added] = got
    assert not isinstance(added, Timeout), "the scan held the indexer through its wait"
    assert report.entries_deleted == 1 and not report.waiting
    assert ann_ids(rt) == {first}
