"""A log stamped ahead of this machine's clock (a network share's clock, ``touch -d tomorrow``)
is hashed again by a reconcile scan only until its stats have stood still across two reads a
racy window apart; after that an unchanged rescan trusts its (mtime, size), as for any log."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.index import db as dbmod
from everos_reflect.index import sync
from everos_reflect.index.sync import Indexer, StoredFile, plan_scan
from everos_reflect.markdown import settling
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings

DAY = date(2026, 10, 12)
REF = UserRef.of("u_andrew")
TOMORROW_NS = 86_400 * 10**9
W = settling.JUST_WRITTEN_NS


@pytest.fixture
def rt(tmp_path: Path) -> Iterator[Runtime]:
    runtime = Runtime(tmp_path, Settings(), embedder=HashEmbedder(32))
    yield runtime
    runtime.close()


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times the indexer read a log's bytes (to hash them)."""
    counted: list[int] = []
    real = sync.read_at_most

    def counting(fh: object, limit: int) -> bytes:
        counted.append(limit)
        return real(fh, limit)  # type: ignore[arg-type]

    monkeypatch.setattr(sync, "read_at_most", counting)
    return counted


def _log_stamped_tomorrow(rt: Runtime, content: str = "Andrew adopted Toby.") -> Path:
    rt.store.append(REF, Kind.EPISODE,
                    {"timestamp": "2026-10-12T10:00:00+00:00", "parent_type": "memcell"},
                    {"Subject": "Dog", "Content": content}, day=DAY)
    path = rt.store.log_path(REF, Kind.EPISODE, DAY)
    ahead = time.time_ns() + TOMORROW_NS
    os.utime(path, ns=(ahead, ahead))
    return path


def test_plan_scan_trusts_a_future_stamped_log_once_confirmed_a_window_apart() -> None:
    now = 10**18
    future = now + TOMORROW_NS
    fresh = StoredFile(future, 100, "x", synced_ns=now, still_since_ns=now)
    confirmed = StoredFile(future, 100, "x", synced_ns=now + W, still_since_ns=now)
    assert plan_scan({"a.md": fresh}, {"a.md": (future, 100)}) == (["a.md"], [])
    assert plan_scan({"a.md": confirmed}, {"a.md": (future, 100)}) == ([], [])
    # confirmed, then edited (the share's clock moved on): read again
    assert plan_scan({"a.md": confirmed}, {"a.md": (future + 1, 100)}) == (["a.md"], [])


def test_an_unchanged_rescan_stops_hashing_a_log_stamped_tomorrow(
    rt: Runtime, reads: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 1_000_000)  # 1 ms
    _log_stamped_tomorrow(rt)
    indexer = Indexer(rt)
    assert indexer.scan().entries_upserted == 1
    time.sleep(0.01)  # past the window: this read confirms the stats stood still
    assert indexer.scan().files_unchanged == 1
    reads.clear()
    for _ in range(3):
        report = indexer.scan()
        assert (report.files_synced, report.files_unchanged) == (0, 0)
    assert reads == []


def test_a_future_stamped_log_rewritten_within_its_window_is_read_again(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same size, same (future) mtime, new bytes, before the stats were confirmed: a coarse
    clock's tick. The scan must still see the edit."""
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 3600 * 10**9)
    path = _log_stamped_tomorrow(rt, "Andrew adopted Toby.")
    indexer = Indexer(rt)
    indexer.scan()
    st = path.stat()
    path.write_text(path.read_text().replace("Toby.", "Rex!."))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size
    assert indexer.scan().entries_upserted == 1
    text = rt.db().execute("SELECT text FROM entries").fetchone()["text"]
    assert text == "Andrew adopted Rex!."


def test_a_confirmed_future_log_edited_later_is_read_again(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 1_000_000)
    path = _log_stamped_tomorrow(rt)
    indexer = Indexer(rt)
    indexer.scan()
    time.sleep(0.01)
    indexer.scan()
    path.write_text(path.read_text().replace("Toby.", "Toby and Buddy."))
    ahead = time.time_ns() + TOMORROW_NS + 10**9
    os.utime(path, ns=(ahead, ahead))
    assert indexer.scan().entries_upserted == 1


def test_an_index_from_before_the_read_times_is_migrated_without_reading_every_log(
    tmp_path: Path, reads: list[int]
) -> None:
    """Rows written before ``files`` had read times keep trusting ``synced_at``: the upgrade
    costs no read of an unchanged log, and the log is still indexed."""
    rt = Runtime(tmp_path, Settings(), embedder=HashEmbedder(32))
    rt.store.append(REF, Kind.EPISODE,
                    {"timestamp": "2026-10-12T10:00:00+00:00", "parent_type": "memcell"},
                    {"Subject": "Dog", "Content": "Toby"}, day=DAY)
    path = rt.store.log_path(REF, Kind.EPISODE, DAY)
    hour_ago = time.time_ns() - 3600 * 10**9
    os.utime(path, ns=(hour_ago, hour_ago))
    Indexer(rt).scan()
    rt.close()
    conn = sqlite3.connect(dbmod.db_path(tmp_path))  # as 0021 left it
    conn.execute("ALTER TABLE files DROP COLUMN read_ns")
    conn.execute("ALTER TABLE files DROP COLUMN still_since_ns")
    conn.execute("DELETE FROM schema_migrations WHERE name = '0022_files_read_times'")
    conn.commit()
    conn.close()

    rt = Runtime(tmp_path, Settings(), embedder=HashEmbedder(32))
    try:
        reads.clear()
        report = Indexer(rt).scan()
        assert (report.files_seen, report.files_synced) == (1, 0)
        assert reads == []
        row = rt.db().execute("SELECT read_ns, still_since_ns FROM files").fetchone()
        assert tuple(row) == (0, 0)
        assert rt.db().execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 1
    finally:
        rt.close()


def test_a_blank_database_gets_the_read_times() -> None:
    conn = sqlite3.connect(":memory:")
    dbmod.migrate(conn)
    cols = {r[1] for r in conn.execute("PRAGMA table_info(files)")}
    assert {"read_ns", "still_since_ns"} <= cols


def test_the_read_times_migration_runs_again_on_a_database_taken_back_by_hand() -> None:
    conn = sqlite3.connect(":memory:")
    dbmod.migrate(conn)
    conn.execute("DELETE FROM schema_migrations WHERE name = '0022_files_read_times'")
    conn.commit()
    assert dbmod.migrate(conn) == ["0022_files_read_times"]
