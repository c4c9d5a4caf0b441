"""Every log a sync could not bring in now is retried by the watcher and named in ``status``
(``index.waiting``), whichever path found it: a log refused at its first read (``chmod 000``
for a moment, then fixed) stayed out of the index until its next edit, unnamed; one a
reconcile scan (or a rescan after a folder change) found still being written was left to the
next scan, minutes later, while the watcher's own syncs retried theirs after the debounce.
An error is said in the OS's words (:func:`~everos_reflect.fileio.os_reason`), never as
``5`` for an errno alone, nor as nothing."""

from __future__ import annotations

import errno
import logging
from datetime import date
from pathlib import Path
from typing import Any

import pytest

import everos_reflect.index.sync as sync_module
from everos_reflect.index.sync import Indexer
from everos_reflect.index.watcher import FsEvent, Watcher
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.status import status_document
from tests.sync_fixtures import indexed_ids
from tests.test_sync_log_never_still import READS_PER_BATCH_SYNC, _moving_reads
from tests.waiting import scripted_pauses, wait_for

REF = UserRef.of("u_ann")
DAY = date(2026, 10, 12)


def _append(rt: Runtime, hour: int, content: str) -> str:
    return rt.store.append(REF, Kind.EPISODE, {"timestamp": f"2026-10-12T{hour:02}:00:00+00:00"},
                           {"Subject": "Note", "Content": content}, day=DAY).id


def _refused(monkeypatch: pytest.MonkeyPatch, path: Path, exc: OSError) -> list[bool]:
    """Every read of ``path`` by the indexer refused with ``exc`` while the returned list
    holds ``True`` (empty it to let reads through)."""
    refusing = [True]
    real = sync_module.open_regular

    def open_log(target: Any, *args: Any, **kwargs: Any) -> Any:
        if refusing and Path(target) == path:
            raise exc
        return real(target, *args, **kwargs)

    monkeypatch.setattr(sync_module, "open_regular", open_log)
    return refusing


def test_a_log_refused_at_its_first_read_is_named_in_status_and_retried_by_the_watcher(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    first = _append(rt, 9, "Green tea.")
    path = rt.store.path_for_id(REF, first)
    rel = rt.store.rel(path)
    with Watcher(rt, debounce=0.05, reconcile_interval=0, optimize_interval=0) as watcher:
        assert wait_for(lambda: indexed_ids(rt) == {first})
        # the writer's own events are dropped: only the retry can bring the log in
        monkeypatch.setattr(watcher._collector, "_sink", lambda event: None)
        refusing = _refused(monkeypatch, path,
                            PermissionError(errno.EACCES, "Permission denied", str(path)))
        second = _append(rt, 10, "A long walk.")
        watcher._on_event(FsEvent("modified", str(path)))
        assert wait_for(lambda: rel in watcher._retries)
        [waiting] = status_document(rt)["index"]["waiting"]
        assert (waiting["file"], waiting["why"]) == (
            rel, "it could not be read: Permission denied")
        refusing.clear()  # the permissions fixed: no edit follows
        assert wait_for(lambda: indexed_ids(rt) == {first, second})
        assert wait_for(lambda: not watcher._retries)
    assert "waiting" not in status_document(rt)["index"]


def test_a_log_a_reconcile_scan_found_still_being_written_is_retried_by_the_watcher(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    scripted_pauses(monkeypatch, [])
    caplog.set_level(logging.INFO, logger="everos_reflect.index.watcher")
    first = _append(rt, 9, "Green tea.")
    path = rt.store.path_for_id(REF, first)
    # the scan's reads find it changing, each of them (its own look, then those of the batch
    # sync it leaves the log to); no file event reaches the watcher
    reads = 1 + READS_PER_BATCH_SYNC
    made = _moving_reads(monkeypatch, path, reads)
    monkeypatch.setattr(Watcher, "_on_event", lambda self, event: None)
    with Watcher(rt, debounce=0.05, reconcile_interval=0, optimize_interval=0) as watcher:
        assert wait_for(lambda: made[0] >= reads)
        assert wait_for(lambda: indexed_ids(rt) == {first})  # the retry, no second scan
        assert wait_for(lambda: not watcher._retries)
    assert f"{rt.store.rel(path)}: it kept changing while it was read: syncing it again in " \
        "0.05 s (try 1)" in caplog.text
    assert "waiting" not in status_document(rt)["index"]


CAUSES = [(OSError(errno.EIO), "Input/output error"), (TimeoutError(), "timeout error")]


@pytest.mark.parametrize(("exc", "reason"), CAUSES, ids=["errno-alone", "nothing-said"])
def test_a_read_error_is_said_in_the_os_words(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        exc: OSError, reason: str) -> None:
    caplog.set_level(logging.INFO, logger="everos_reflect.index.sync")
    first = _append(rt, 9, "Green tea.")
    second = _append(rt, 10, "A long walk.")
    path = rt.store.path_for_id(REF, first)
    Indexer(rt).sync_path(path)
    refusing = _refused(monkeypatch, path, exc)

    result = Indexer(rt).sync_path(path)  # refused at its first read
    assert (result.not_read, result.waits) == (reason, f"it could not be read: {reason}")

    refusing.clear()
    text = path.read_text("utf-8")  # the last entry deleted by hand: read again after a wait
    path.write_text(text[: text.index(f"<!-- entry:{second} -->")], "utf-8")

    def refused_when_read_again() -> None:
        with path.open("a", encoding="utf-8") as out:
            out.write("\n")
        refusing.append(True)

    scripted_pauses(monkeypatch, [refused_when_read_again])
    result = Indexer(rt).sync_path(path)
    assert result.moving and result.waits == f"it could not be read again: {reason}"
    assert indexed_ids(rt) == {first, second}
