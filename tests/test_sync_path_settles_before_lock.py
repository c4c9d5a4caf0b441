"""An add's own sync (``sync_path``: the API's, MCP's and the CLI's ``add``) waits for a log
a writer may still be at work on before it takes the indexer lock, never under it, as a batch
sync does (:mod:`tests.test_sync_settles_before_lock`): it held the lock through up to ten
settle waits, and every other add and sync meanwhile waited behind it. Under the lock the log
is read again and taken as it stood still, or its deletions held while it moves."""

from __future__ import annotations

from pathlib import Path

import pytest
from filelock import Timeout

from everos_reflect.index.sync import STILL_WRITTEN, Indexer
from everos_reflect.markdown import settling
from everos_reflect.model import Kind
from everos_reflect.runtime import Runtime
from tests.test_sync_settles_before_lock import (
    ANN,
    DAY,
    _adds_during_each_wait,
    _ann_with_her_last_entry_deleted,
    _writer_then,
    ann_ids,
)
from tests.waiting import scripted_pauses


def _ann_adds_to_her_log(rt: Runtime, monkeypatch: pytest.MonkeyPatch,
                         ) -> tuple[Path, str, str, str]:
    """:func:`_ann_with_her_last_entry_deleted`, then Ann's add to that log (the store's own
    wait for the log it found just written returns at once)."""
    path, first, second = _ann_with_her_last_entry_deleted(rt)
    scripted_pauses(monkeypatch, [])
    new = rt.store.append(ANN, Kind.EPISODE, {"timestamp": "2026-10-12T05:00:00+00:00"},
                          {"Subject": "Tea", "Content": "Ann's add."}, day=DAY).id
    return path, first, second, new


def test_an_add_is_synced_while_another_add_s_sync_waits_for_its_log_to_stand_still(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    """An add's own sync (``sync_path``) waits for its log, which a person just edited, with
    the indexer lock let go: it held the lock through the wait, and Bob's add meanwhile
    waited behind it (0.2 s for a log that stood still, 2 s for one still being written)."""
    path, first, _, new = _ann_adds_to_her_log(rt, monkeypatch)
    got, add = _adds_during_each_wait(rt)
    pauses = scripted_pauses(monkeypatch, [add])

    result = Indexer(rt).sync_path(path, timeout=5, wanted=[new])

    assert pauses == [settling.SETTLE_SECONDS]  # one wait: the log stood still through it
    [added] = got
    assert not isinstance(added, Timeout), "the add's sync held the indexer through its wait"
    assert added.upserted == 1  # type: ignore[attr-defined]
    assert (result.upserted, result.deleted, result.moving) == (1, 1, False)
    assert ann_ids(rt) == {first, new}


def test_an_add_s_log_moving_through_every_wait_is_held_with_the_lock_let_go(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    path, first, second, new = _ann_adds_to_her_log(rt, monkeypatch)
    got, add = _adds_during_each_wait(rt)

    pauses = scripted_pauses(monkeypatch, [_writer_then(path, add)] * settling.SETTLE_TRIES)

    result = Indexer(rt).sync_path(path, timeout=5, wanted=[new])

    assert len(pauses) == len(got) == settling.SETTLE_TRIES
    assert not any(isinstance(g, Timeout) for g in got)
    assert result.moving and result.waits == STILL_WRITTEN
    assert ann_ids(rt) == {first, second, new}  # the add answered; the deletion waits
