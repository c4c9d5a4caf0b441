"""A backup made of hard links beside the root (``cp -al``, rsnapshot) gives every log a second
link, and a log with a second link must be looked for under the root's other names: each
read and each write of such a log globbed every user's folder, and a reindex of 300 users'
6,000 logs took 224 s instead of 10 s. The root is listed once per pass and the listing kept
while no folder above the logs and no linked log has changed: the cost of a backup no longer
grows with the logs read or written. Counted in ``os.scandir`` calls, never timed."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path

import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.index.sync import Indexer
from everos_reflect.markdown import same_file
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings

USERS = [UserRef.of(name) for name in ("alice", "bob", "carol")]
FIRST = date(2026, 10, 1)


class _Scandirs:
    """Counts ``os.scandir`` calls (the listings a glob or a walk makes)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = os.scandir

        def counted(path: object = ".") -> object:
            self.calls += 1
            return real(path)  # type: ignore[call-overload]

        monkeypatch.setattr(os, "scandir", counted)

    def during(self, work: object) -> int:
        before = self.calls
        work()  # type: ignore[operator]
        return self.calls - before


@pytest.fixture
def scandirs(monkeypatch: pytest.MonkeyPatch) -> _Scandirs:
    return _Scandirs(monkeypatch)


def _runtime(root: Path, days: int) -> Runtime:
    rt = Runtime(root, Settings(), embedder=HashEmbedder(16))
    for ref in USERS:
        for n in range(days):
            day = FIRST + timedelta(days=n)
            rt.store.append(ref, Kind.EPISODE, {"timestamp": f"{day}T09:00:00+00:00",
                                                "parent_type": "memcell"},
                            {"Subject": "Day", "Content": f"{ref.user_id} on day {n}."},
                            day=day)
    return rt


def _back_up(rt: Runtime, backup: Path) -> int:
    """Every log hard-linked into ``backup``, outside the root, as ``cp -al`` does."""
    backup.mkdir()
    paths = list(rt.store.iter_files())
    for n, path in enumerate(paths):
        os.link(path, backup / f"{n}.md")
    return len(paths)


@pytest.fixture
def runtimes(tmp_path: Path) -> Iterator[list[Runtime]]:
    made: list[Runtime] = []
    yield made
    for rt in made:
        rt.close()


def _extra_on_reindex(tmp_path: Path, days: int, scandirs: _Scandirs,
                      runtimes: list[Runtime]) -> int:
    rt = _runtime(tmp_path / f"root-{days}", days)
    runtimes.append(rt)
    alone = scandirs.during(lambda: Indexer(rt).reindex())
    assert _back_up(rt, tmp_path / f"backup-{days}") == days * len(USERS)
    beside = scandirs.during(lambda: Indexer(rt).reindex())
    assert {r[0] for r in rt.db().execute("SELECT count(*) FROM entries")} == {
        days * len(USERS)}
    return beside - alone


def test_a_reindex_beside_a_backup_lists_the_root_once_however_many_logs_it_reads(
        tmp_path: Path, scandirs: _Scandirs, runtimes: list[Runtime]) -> None:
    few = _extra_on_reindex(tmp_path, 2, scandirs, runtimes)
    many = _extra_on_reindex(tmp_path, 6, scandirs, runtimes)
    assert many == few


def _extra_on_writes(tmp_path: Path, days: int, scandirs: _Scandirs,
                     runtimes: list[Runtime]) -> int:
    rt = _runtime(tmp_path / f"root-{days}", days)
    runtimes.append(rt)

    def add_to_every_log() -> None:
        for ref in USERS:
            for n in range(days):
                day = FIRST + timedelta(days=n)
                rt.store.append(ref, Kind.EPISODE, {"timestamp": f"{day}T10:00:00+00:00"},
                                {"Subject": "More", "Content": "Later that day."}, day=day)

    alone = scandirs.during(add_to_every_log)
    _back_up(rt, tmp_path / f"backup-{days}")
    beside = scandirs.during(add_to_every_log)
    assert all(os.stat(path).st_nlink == 1 for path in rt.store.iter_files())
    return beside - alone


def test_writes_beside_a_backup_keep_one_listing_of_the_root(
        tmp_path: Path, scandirs: _Scandirs, runtimes: list[Runtime],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Timestamps taken as exact (the listing is kept at once): on a real filesystem it is
    kept once the logs and folders are two seconds older than it."""
    monkeypatch.setattr(same_file, "_RACY_NS", 0)
    few = _extra_on_writes(tmp_path, 2, scandirs, runtimes)
    many = _extra_on_writes(tmp_path, 6, scandirs, runtimes)
    assert many == few


def test_a_kept_listing_sees_a_user_folder_moved_in_with_a_hard_link(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder moved into the root changes no log's ctime, only the mtime of the folder it
    lands in: the listing kept from before is not trusted, and carol's name of alice's log
    follows alice's next write as a hard link (refused when read), not a copy of its own."""
    monkeypatch.setattr(same_file, "_RACY_NS", 0)
    rt = _runtime(root, 1)
    try:
        alice = rt.store.log_path(USERS[0], Kind.EPISODE, FIRST)
        outside = tmp_path / "dave"
        (outside / "episodes").mkdir(parents=True)
        os.link(alice, outside / "episodes" / alice.name)
        users = alice.parents[2]
        hour_ago = time.time() - 3600
        os.utime(users, (hour_ago, hour_ago))
        assert rt.store.link_problem(alice) is None  # lists the root and keeps the listing

        os.rename(outside, users / "dave")
        dave = users / "dave" / "episodes" / alice.name
        rt.store.append(USERS[0], Kind.EPISODE, {"timestamp": f"{FIRST}T10:00:00+00:00"},
                        {"Subject": "More", "Content": "Later that day."}, day=FIRST)
        assert os.path.samestat(os.stat(dave), os.stat(alice))
        assert b"Later that day." in dave.read_bytes()
        assert f"hard link to {rt.store.rel(alice)}" in str(rt.store.link_problem(dave))
    finally:
        rt.close()
