"""A log that keeps changing through every read of a sync: the sync says so, and the log is
synced once it stands still, without another edit.

Another program writing a log in place while the indexer reads it (an editor's slow save, a
sync tool) moves it during the read; the indexer reads it again after each settle wait, and
gives up after the last. An ``add`` whose log was read so answered as indexed, and a search
sent right after missed the Episode; the watcher said "cannot read …" and nothing retried it.
The writer's progress during each read is played by a patched ``read_at_most``.
"""

from __future__ import annotations

import logging
import os
from datetime import date
from pathlib import Path
from typing import Any

import pytest

import everos_reflect.index.sync as sync_module
from everos_reflect.index.sync import Indexer
from everos_reflect.index.watcher import FsEvent, Watcher
from everos_reflect.markdown import settling
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from tests.api_client import ApiClient
from tests.sync_fixtures import indexed_ids
from tests.waiting import scripted_pauses, wait_for

REF = UserRef.of("u_ann")
#: The reads of a log one batch sync (``sync_paths``: the watcher's) makes when it never
#: finds it still: before it takes the indexer lock, one look and one after each settle wait
#: (``Indexer._looked_ahead``), then one under the lock, which waits for nothing.
READS_PER_BATCH_SYNC = 2 + settling.SETTLE_TRIES
#: The reads an add's own sync (``sync_path``) makes of such a log: one under the indexer
#: lock, which finds it moving and lets go of the lock, then those of a batch sync.
READS_PER_ADD_SYNC = 1 + READS_PER_BATCH_SYNC


def _moving_reads(monkeypatch: pytest.MonkeyPatch, path: Path, reads: int) -> list[int]:
    """The next ``reads`` reads of ``path`` by the indexer each find it growing while read
    (a blank line appended at the end: the log's entries stay as they are); later reads find
    it still. Returns the count of reads made."""
    made = [0]
    real = sync_module.read_at_most

    def read(fh: Any, limit: int) -> bytes:
        data = real(fh, limit)
        if not os.path.samestat(os.fstat(fh.fileno()), os.stat(path)):
            return data
        made[0] += 1
        if made[0] <= reads:
            with path.open("ab") as out:
                out.write(b"\n")
        return data

    monkeypatch.setattr(sync_module, "read_at_most", read)
    return made


def test_an_add_whose_log_never_stood_still_while_read_answers_not_indexed(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    scripted_pauses(monkeypatch, [])
    path = rt.store.log_path(REF, Kind.EPISODE, date(2026, 10, 12))
    _moving_reads(monkeypatch, path, READS_PER_ADD_SYNC)

    resp = ApiClient(rt)("POST", "/api/v1/memory/episodes", json={
        "user_id": REF.user_id, "subject": "Tea", "content": "Ann likes green tea.",
        "timestamp": "2026-10-12T09:00:00+00:00"})

    assert resp.status_code == 201, resp.text
    answer = resp.json()["data"]
    assert answer["id"] not in indexed_ids(rt)
    assert answer["indexed"] is False
    assert "kept changing while it was read" in answer["index_error"]
    Indexer(rt).sync_path(path)  # standing still now: the next sync reads it
    assert answer["id"] in indexed_ids(rt)


def test_the_watcher_syncs_a_log_that_never_stood_still_once_it_does_without_an_edit(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """No file event comes after the sync gave up (the writer was done, or its writes raise
    none: a network share, an ``mmap``): the watcher retries the log itself."""
    scripted_pauses(monkeypatch, [])
    first = rt.store.append(REF, Kind.EPISODE, {"timestamp": "2026-10-12T09:00:00+00:00"},
                            {"Subject": "Tea", "Content": "Green tea."})
    path = rt.store.path_for_id(REF, first.id)
    caplog.set_level(logging.INFO)
    with Watcher(rt, debounce=0.05, reconcile_interval=0, optimize_interval=0) as watcher:
        assert wait_for(lambda: indexed_ids(rt) == {first.id})
        made = _moving_reads(monkeypatch, path, READS_PER_BATCH_SYNC)
        # the writer's own events are dropped: only the retry can bring the log in
        monkeypatch.setattr(watcher._collector, "_sink", lambda event: None)
        second = rt.store.append(REF, Kind.EPISODE, {"timestamp": "2026-10-12T10:00:00+00:00"},
                                 {"Subject": "Walk", "Content": "A long walk."})
        watcher._on_event(FsEvent("modified", str(path)))  # the add's own write
        assert wait_for(lambda: made[0] > READS_PER_BATCH_SYNC)
        assert wait_for(lambda: indexed_ids(rt) == {first.id, second.id})
    assert "kept changing while it was read" in caplog.text
