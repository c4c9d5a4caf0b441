"""A log an editor rewrites in place (truncate, then write) read while it is cut short.

Cut at an entry boundary, the log parsed cleanly without its last entries: the sync took them
for entries a person deleted, dropped them from the index and published their deletion (every
record citing them went stale for good, their cluster memberships were dropped), and the
rewrite finished a moment later brought them back as new entries. A sync that would drop
entries from a log written this instant now waits for it to stand still first, and reads it
again if it moved. The editor's progress during that wait is played by the patched pause, so
nothing here depends on how fast a thread runs.
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import BinaryIO

import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.index import events, sync
from everos_reflect.index.sync import Indexer
from everos_reflect.markdown import settling
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from tests.waiting import scripted_pauses

REF = UserRef.of("u_andrew")
DAY = date(2026, 10, 12)


@pytest.fixture
def rt(root: Path) -> Iterator[Runtime]:
    runtime = Runtime(root, Settings(), embedder=HashEmbedder(32))
    yield runtime
    runtime.close()


@pytest.fixture(autouse=True)
def just_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every log here counts as written this instant, however slowly the test runs."""
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 3600 * 10**9)


@pytest.fixture
def deletions() -> Iterator[list[str]]:
    """Every entry id whose deletion the indexer publishes."""
    seen: list[str] = []

    def record(_rt: Runtime, changes: list[events.ChangeSet]) -> None:
        for change in changes:
            seen.extend(change.deleted)

    events.subscribe_batch("test-deletions", record)
    yield seen
    events.unsubscribe("test-deletions")


def _log_of_three(rt: Runtime) -> tuple[Path, list[str]]:
    ids = [rt.store.append(REF, Kind.EPISODE, {"timestamp": f"2026-10-12T1{n}:00:00+00:00",
                                               "parent_type": "memcell"},
                           {"Subject": f"Pet {n}", "Content": f"Andrew adopted pet {n}."},
                           day=DAY).id for n in range(3)]
    return rt.store.log_path(REF, Kind.EPISODE, DAY), ids



def test_a_log_read_cut_at_an_entry_boundary_mid_rewrite_loses_no_entry(
        rt: Runtime, deletions: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    path, ids = _log_of_three(rt)
    indexer = Indexer(rt)
    indexer.sync_path(path)
    whole = path.read_bytes()
    cut = whole.index(f"<!-- entry:{ids[1]} -->".encode())
    path.write_bytes(whole[:cut])  # truncated and rewritten: only the first entry is there yet
    pauses = scripted_pauses(monkeypatch, [lambda: path.write_bytes(whole)])

    result = indexer.sync_path(path)

    assert pauses, "the sync never waited for the log to stand still"
    assert result.deleted == 0
    assert deletions == []
    indexed = {r[0] for r in rt.db().execute("SELECT id FROM entries")}
    assert indexed == set(ids)


def test_entries_a_person_deleted_are_dropped_once_the_log_stands_still(
        rt: Runtime, deletions: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    path, ids = _log_of_three(rt)
    indexer = Indexer(rt)
    indexer.sync_path(path)
    text = path.read_text()
    path.write_text(text[:text.index(f"<!-- entry:{ids[1]} -->")])  # a person's hand edit
    scripted_pauses(monkeypatch, [])

    result = indexer.sync_path(path)

    assert result.deleted == 2
    assert sorted(deletions) == ids[1:]
    assert {r[0] for r in rt.db().execute("SELECT id FROM entries")} == {ids[0]}


def test_entries_missing_from_a_log_that_keeps_changing_are_held_not_dropped(
        rt: Runtime, deletions: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer still at work after every wait: the entries it has not written back yet
    stay indexed, and the log is marked unread, so the next sync (the writer's own file
    event, the reconcile scan) plans it whole."""
    path, ids = _log_of_three(rt)
    indexer = Indexer(rt)
    indexer.sync_path(path)
    whole = path.read_bytes()
    cut = whole.index(f"<!-- entry:{ids[1]} -->".encode())
    grown = [whole[:cut] + b"\n" * n for n in range(1, 100)]
    path.write_bytes(whole[:cut])
    scripted_pauses(monkeypatch, [lambda part=part: path.write_bytes(part) for part in grown])

    result = indexer.sync_path(path)

    assert result.deleted == 0 and deletions == []
    assert {r[0] for r in rt.db().execute("SELECT id FROM entries")} == set(ids)
    row = rt.db().execute("SELECT mtime_ns FROM files").fetchone()
    assert row["mtime_ns"] == -1

    path.write_bytes(whole)
    monkeypatch.setattr(settling, "pause", lambda seconds: None)
    report = indexer.scan()
    assert report.files_synced == 1 and report.entries_deleted == 0
    assert {r[0] for r in rt.db().execute("SELECT id FROM entries")} == set(ids)


def test_a_log_briefly_gone_while_an_editor_replaces_it_keeps_its_entries(
        rt: Runtime, deletions: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Some editors and tools delete a file and write it anew under the same name."""
    path, ids = _log_of_three(rt)
    indexer = Indexer(rt)
    indexer.sync_path(path)
    whole = path.read_bytes()
    path.unlink()
    scripted_pauses(monkeypatch, [lambda: path.write_bytes(whole)])

    result = indexer.sync_path(path)

    assert not result.removed and result.deleted == 0 and deletions == []
    assert {r[0] for r in rt.db().execute("SELECT id FROM entries")} == set(ids)


def test_a_scan_waits_once_for_every_log_it_would_drop_entries_from(
        rt: Runtime, deletions: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A `git checkout` that takes entries out of many logs costs one wait, not one each."""
    logs = []
    for day in (DAY, date(2026, 10, 13), date(2026, 10, 14)):
        first = rt.store.append(REF, Kind.EPISODE, {"timestamp": f"{day}T09:00:00+00:00"},
                                {"Subject": "Walk", "Content": "A walk."}, day=day)
        rt.store.append(REF, Kind.EPISODE, {"timestamp": f"{day}T10:00:00+00:00"},
                        {"Subject": "Run", "Content": "A run."}, day=day)
        logs.append((rt.store.log_path(REF, Kind.EPISODE, day), first.id))
    indexer = Indexer(rt)
    indexer.scan()
    for path, first in logs:
        text = path.read_text()
        path.write_text(text[:text.index("<!-- /entry:")] + f"<!-- /entry:{first} -->\n")
    pauses = scripted_pauses(monkeypatch, [])

    report = indexer.scan()

    assert len(pauses) == 1
    assert report.entries_deleted == 3 and len(deletions) == 3
    assert {r[0] for r in rt.db().execute("SELECT id FROM entries")} == {f for _, f in logs}


@pytest.mark.parametrize("how", ["sync_path", "scan"])
@pytest.mark.parametrize("what", ["folder", "fifo", "socket"])
def test_a_log_replaced_by_no_file_is_dropped_after_one_wait(
        rt: Runtime, deletions: list[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path, what: str, how: str) -> None:
    """`rm log; mkdir log`: what stands at the log's name is no log, and it standing there
    is no writer at work. It was taken for the log coming back at every wait, so the sync
    waited all ten (2 s, the indexer locked) and then held the entries until the folder's
    mtime had aged."""
    path, ids = _log_of_three(rt)
    indexer = Indexer(rt)
    indexer.sync_path(path)
    path.unlink()
    if what == "folder":
        path.mkdir()
    elif what == "fifo":
        os.mkfifo(path)
    else:
        server = socket.socket(socket.AF_UNIX)
        if len(str(path)) > 100:  # AF_UNIX paths are short: bound nearby, moved into place
            server.bind(str(tmp_path / "s"))
            os.rename(tmp_path / "s", path)
        else:
            server.bind(str(path))
        server.close()
    pauses = scripted_pauses(monkeypatch, [])

    if how == "sync_path":
        result = indexer.sync_path(path)
        assert result.removed and result.deleted == 3
    else:
        report = indexer.scan()
        assert report.files_removed == 1 and report.entries_deleted == 3

    assert pauses == [settling.SETTLE_SECONDS]
    assert sorted(deletions) == ids
    assert rt.db().execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 0
    assert indexer.pending()["files_deleted"] == 0


def _aged(path: Path) -> None:
    """``path``, its folder, its user's and ``users`` last changed three days ago: a log
    nobody has touched for a while."""
    old = path.stat().st_mtime - 3 * 86_400
    for item in (path, *list(path.parents)[:3]):
        os.utime(item, (old, old))


def _cut_at_first_read(monkeypatch: pytest.MonkeyPatch, path: Path, left: int = 0) -> None:
    """The indexer's first read (of ``path``: the one log synced) finds it truncated to
    ``left`` bytes, between its stats and its bytes, as a ``cp backup.md`` over it begins."""
    real = sync.read_at_most
    cuts = [path]

    def read_at_most(fh: BinaryIO, limit: int) -> bytes:
        if cuts:
            os.truncate(cuts.pop(), left)
        return real(fh, limit)

    monkeypatch.setattr(sync, "read_at_most", read_at_most)


def test_an_old_log_truncated_while_read_and_written_again_keeps_its_entries(
        rt: Runtime, deletions: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Truncated between the stats and the read, a log untouched for days read as empty
    with its old mtime: nothing said a writer was at work, and every entry's deletion was
    published at once."""
    path, ids = _log_of_three(rt)
    indexer = Indexer(rt)
    indexer.sync_path(path)
    whole = path.read_bytes()
    _aged(path)
    _cut_at_first_read(monkeypatch, path)
    pauses = scripted_pauses(monkeypatch, [lambda: path.write_bytes(whole)])  # copy done

    result = indexer.sync_path(path)

    assert pauses == [settling.SETTLE_SECONDS]
    assert result.deleted == 0 and deletions == []
    assert {r[0] for r in rt.db().execute("SELECT id FROM entries")} == set(ids)
    assert indexer.pending()["files_changed"] == 0


def test_an_old_log_cut_for_good_while_read_loses_its_entries_after_one_wait(
        rt: Runtime, deletions: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    path, ids = _log_of_three(rt)
    indexer = Indexer(rt)
    indexer.sync_path(path)
    _aged(path)
    _cut_at_first_read(monkeypatch, path, path.read_bytes().index(f"<!-- entry:{ids[1]} -->"
                                                                  .encode()))
    pauses = scripted_pauses(monkeypatch, [])

    result = indexer.sync_path(path)

    assert pauses  # it waited for the log to stand still, then believed it
    assert result.deleted == 2 and sorted(deletions) == ids[1:]
    assert indexer.pending() == {"files_changed": 0, "files_deleted": 0, "lag_seconds": None}


@pytest.mark.parametrize("folder", ["user", "episodes"])
def test_a_folder_renamed_and_back_under_a_sync_keeps_its_entries(
        rt: Runtime, deletions: list[str], monkeypatch: pytest.MonkeyPatch,
        folder: str) -> None:
    """A sync tool's move (``mv u_andrew u_andrew.tmp && mv u_andrew.tmp u_andrew``) read in
    between: the log's own folder was gone too, so nothing was waited for and the deletion
    of every entry was published."""
    path, ids = _log_of_three(rt)
    indexer = Indexer(rt)
    indexer.sync_path(path)
    _aged(path)
    moved = path.parent if folder == "episodes" else path.parent.parent
    aside = moved.with_name(f"{moved.name}.tmp")
    moved.rename(aside)
    pauses = scripted_pauses(monkeypatch, [lambda: aside.rename(moved)])

    result = indexer.sync_path(path)

    assert pauses == [settling.SETTLE_SECONDS]
    assert result.deleted == 0 and deletions == []
    assert {r[0] for r in rt.db().execute("SELECT id FROM entries")} == set(ids)


def test_a_user_folder_deleted_under_a_sync_loses_its_entries_after_one_wait(
        rt: Runtime, deletions: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    path, ids = _log_of_three(rt)
    indexer = Indexer(rt)
    indexer.sync_path(path)
    _aged(path)
    shutil.rmtree(rt.store.user_dir(REF))
    pauses = scripted_pauses(monkeypatch, [])

    result = indexer.sync_path(path)

    assert pauses == [settling.SETTLE_SECONDS]
    assert result.removed and sorted(deletions) == sorted(ids)
    assert indexer.pending() == {"files_changed": 0, "files_deleted": 0, "lag_seconds": None}
