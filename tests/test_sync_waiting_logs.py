"""A log that never stands still while the indexer reads it (a writer that keeps appending,
a sync tool rewriting it in a loop) is retried with a doubling wait, not every debounce for
good (each try holds the indexer through its settle waits: seconds in which every ``add``
waited), and ``status`` says which log waits, why, since when and after how many tries.
The writer's progress during each read is played by a patched ``read_at_most``."""

from __future__ import annotations

import logging
import re
import sqlite3

import pytest
from click.testing import CliRunner

import everos_reflect.index.sync as sync_module
from everos_reflect.cli.main import cli
from everos_reflect.index.sync import Indexer
from everos_reflect.index.watcher import RETRY_MAX_SECONDS, FsEvent, Watcher, retry_delay
from everos_reflect.model import Kind
from everos_reflect.runtime import Runtime
from everos_reflect.status import status_document
from tests.sync_fixtures import indexed_ids
from tests.test_sync_log_never_still import (
    READS_PER_ADD_SYNC,
    READS_PER_BATCH_SYNC,
    REF,
    _moving_reads,
)
from tests.waiting import scripted_pauses, wait_for


def test_the_wait_doubles_from_the_debounce_up_to_a_bound() -> None:
    assert [retry_delay(n, 0.5) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 4.0]
    assert retry_delay(30, 0.5) == retry_delay(10_000, 0.5) == RETRY_MAX_SECONDS


def test_the_watcher_retries_a_log_that_never_stands_still_ever_later_then_syncs_it(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    scripted_pauses(monkeypatch, [])
    first = rt.store.append(REF, Kind.EPISODE, {"timestamp": "2026-10-12T09:00:00+00:00"},
                            {"Subject": "Tea", "Content": "Green tea."})
    path = rt.store.path_for_id(REF, first.id)
    caplog.set_level(logging.INFO, logger="everos_reflect.index.watcher")
    retries = re.compile(r": syncing it again in ([0-9.]+) s \(try (\d+)\)")

    def tried() -> list[tuple[float, int]]:
        return [(float(m.group(1)), int(m.group(2))) for r in caplog.records
                if (m := retries.search(r.getMessage()))]

    with Watcher(rt, debounce=0.05, reconcile_interval=0, optimize_interval=0) as watcher:
        assert wait_for(lambda: indexed_ids(rt) == {first.id})
        # four syncs find it moving through all their reads; the fifth finds it still
        made = _moving_reads(monkeypatch, path, 4 * READS_PER_BATCH_SYNC)
        monkeypatch.setattr(watcher._collector, "_sink", lambda event: None)
        second = rt.store.append(REF, Kind.EPISODE, {"timestamp": "2026-10-12T10:00:00+00:00"},
                                 {"Subject": "Walk", "Content": "A long walk."})
        watcher._on_event(FsEvent("modified", str(path)))
        assert wait_for(lambda: indexed_ids(rt) == {first.id, second.id})
        assert made[0] == 4 * READS_PER_BATCH_SYNC + 2  # the fifth: its look, then its read
        assert tried() == [(0.05, 1), (0.1, 2), (0.2, 3), (0.4, 4)]
        assert wait_for(lambda: not watcher._retries)
    assert "waiting" not in status_document(rt)["index"]


def test_status_names_the_log_that_waits_why_since_when_and_its_tries(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    scripted_pauses(monkeypatch, [])
    first = rt.store.append(REF, Kind.EPISODE, {"timestamp": "2026-10-12T09:00:00+00:00"},
                            {"Subject": "Tea", "Content": "Green tea."})
    path = rt.store.path_for_id(REF, first.id)
    rel = rt.store.rel(path)
    Indexer(rt).sync_path(path)
    entry = rt.store.append(REF, Kind.EPISODE, {"timestamp": "2026-10-12T10:00:00+00:00"},
                            {"Subject": "Walk", "Content": "A long walk."})
    _moving_reads(monkeypatch, path, 2 * READS_PER_ADD_SYNC)

    assert Indexer(rt).sync_path(path).moving
    [first] = status_document(rt)["index"]["waiting"]
    assert first["file"] == rel and first["tries"] == 1
    assert first["why"] == "it kept changing while it was read"
    assert Indexer(rt).sync_path(path).moving
    assert status_document(rt)["index"]["waiting"] == [{**first, "tries": 2}]
    text = CliRunner().invoke(cli, ["status", "--root", str(rt.root)]).stdout
    assert "index: 1 log to be synced again once it stands still:" in text
    assert f"  {rel}: it kept changing while it was read (2 tries since " in text

    assert not Indexer(rt).sync_path(path).moving  # standing still now
    assert "waiting" not in status_document(rt)["index"]
    assert entry.id in indexed_ids(rt)


def test_a_failure_to_note_the_waiting_logs_fails_no_sync(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The list ``status`` reads is bookkeeping: a database busy for it (another process
    writing) must not turn a sync that was done into an add answered ``indexed: false``."""
    def busy(conn: object) -> list[dict[str, object]]:
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(sync_module, "waiting_logs", busy)
    entry = rt.store.append(REF, Kind.EPISODE, {"timestamp": "2026-10-12T09:00:00+00:00"},
                            {"Subject": "Tea", "Content": "Green tea."})
    result = Indexer(rt).sync_path(rt.store.path_for_id(REF, entry.id))
    assert result.upserted == 1 and entry.id in indexed_ids(rt)
    assert "could not note the logs waiting to be synced again" in caplog.text
