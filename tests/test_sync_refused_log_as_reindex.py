"""A daily log this process may not read (no permission: its mode, an ACL, another user's
file) leaves the index as a ``reindex`` of the same Markdown once it stands still: no row of
its entries, its problem recorded, ``status`` and ``lint`` naming it. The sync kept every row
it had indexed from it and retried it as a log still being written, for good. Refused for a
moment only (its mode just changed: an editor's save), it is held and tried again, as
before; made readable, its entries come back.

Tests run as root here, where ``chmod 000`` blocks no read: the refusal is injected."""

from __future__ import annotations

import errno
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.embedding import HashEmbedder
from everos_reflect.fileio import open_regular
from everos_reflect.index import sync
from everos_reflect.index.sync import Indexer, waiting_logs
from everos_reflect.markdown import settling, store
from everos_reflect.model import UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from tests.sync_fixtures import indexed_ids, two_indexed_episodes
from tests.test_sync_state_machine import fingerprint

REF = UserRef.of("u_ann")

pytestmark = pytest.mark.usefixtures("settle_at_once")


def _refuse(monkeypatch: pytest.MonkeyPatch, name: str) -> set[bool]:
    """Every open of a log named ``name`` (in any root) is refused while the set returned
    holds True (clear it to let the log be read)."""
    refusing = {True}

    def opening(path: str | os.PathLike[str], *args: Any, **kwargs: Any) -> Any:
        if refusing and Path(path).name == name:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return open_regular(path, *args, **kwargs)

    monkeypatch.setattr(sync, "open_regular", opening)
    monkeypatch.setattr(store, "open_regular", opening)
    return refusing


def _as_a_reindex_leaves_it(rt: Runtime, copy: Path) -> None:
    shutil.copytree(rt.root, copy, ignore=shutil.ignore_patterns(".index"))
    fresh = Runtime(copy, Settings(), embedder=HashEmbedder(16))
    try:
        Indexer(fresh).reindex()
        assert fingerprint(rt, set()) == fingerprint(fresh, set())
        members = "SELECT entry_id FROM cluster_members ORDER BY entry_id"
        assert rt.db().execute(members).fetchall() == fresh.db().execute(members).fetchall()
    finally:
        fresh.close()


def test_a_log_refused_while_it_stands_still_leaves_the_index_as_a_reindex_does(
        rt: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, first, second = two_indexed_episodes(rt, REF)
    rel = rt.store.rel(path)
    refusing = _refuse(monkeypatch, path.name)

    # written a moment ago: maybe an editor's save. Said so, not left to the clock: the log
    # had to be synced within JUST_WRITTEN_NS (2 s) of the second append, which a loaded
    # machine missed (the sync then took it as standing still, and nothing was held)
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 10**18)
    held = Indexer(rt).sync_path(path)
    assert held.moving and indexed_ids(rt) == {first, second}

    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 0)  # it stands still from now on
    report = Indexer(rt).scan()

    assert report.entries_deleted == 2 and not report.waiting
    assert indexed_ids(rt) == set()
    assert waiting_logs(rt.db()) == []
    assert Indexer(rt).pending()["files_changed"] == 0  # synced: a problem, not a lag
    _as_a_reindex_leaves_it(rt, tmp_path / "refused")
    status = CliRunner().invoke(cli, ["status", "--root", str(rt.root), "--json"])
    [named] = json.loads(status.stdout)["files_with_problems"]
    assert named == {"file": rel, "problems": ["not read: Permission denied"],
                     "lines": [0]}
    lint = CliRunner().invoke(cli, ["lint", "--root", str(rt.root)])
    assert lint.exit_code == 1 and f"{rel}: not read: Permission denied" in lint.stdout
    again = Indexer(rt).scan()  # tried again, found as it was: nothing written
    assert again.files_unchanged == 1 and again.entries_deleted == 0

    refusing.clear()  # `chmod 644`: no stat of it moves
    Indexer(rt).scan()

    assert indexed_ids(rt) == {first, second}
    _as_a_reindex_leaves_it(rt, tmp_path / "fixed")
    status = CliRunner().invoke(cli, ["status", "--root", str(rt.root), "--json"])
    assert json.loads(status.stdout)["files_with_problems"] == []


def test_an_insight_citing_a_refused_log_s_entry_stays_active_then_a_deletion_meanwhile_counts(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While the log cannot be read its entries are unknown, not deleted: the insight citing
    one keeps its status. Made readable without that entry, the owner is checked whole."""
    from tests.test_provenance import DEV, delete_by_hand, setup, status

    rt, eps, first, _ = setup(root)
    try:
        path = rt.store.path_for_id(DEV, eps[1].id)
        refusing = _refuse(monkeypatch, path.name)
        monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 0)
        assert Indexer(rt).sync_path(path).deleted == 1  # the watcher's sync of the chmod
        assert status(rt, first.id) == ("active", None)

        refusing.clear()
        delete_by_hand(rt, eps[1].id)  # readable again, and the Episode gone
        Indexer(rt).scan()

        assert status(rt, first.id) == ("stale", f"evidence {eps[1].id} was deleted")
    finally:
        rt.close()


def test_the_watcher_syncs_a_chmod_the_entries_go_and_come_back(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``chmod`` moves no stat a scan compares: the watcher takes its event ("attrib")."""
    from everos_reflect.index.watcher import Watcher
    from tests.waiting import wait_for

    path, first, second = two_indexed_episodes(rt, REF)
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 0)
    with Watcher(rt, debounce=0.05, reconcile_interval=0, optimize_interval=0):
        refusing = _refuse(monkeypatch, path.name)
        os.chmod(path, 0o600)  # what refuses it is injected: root reads whatever the mode
        assert wait_for(lambda: indexed_ids(rt) == set())
        refusing.clear()
        os.chmod(path, 0o644)
        assert wait_for(lambda: indexed_ids(rt) == {first, second})


def test_a_scan_sees_a_chmod_though_no_other_stat_moves(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a watcher (the CLI), a log made unreadable by a ``chmod`` alone (its mtime and
    size as they were) kept its entries for good: the scan compares its ctime too."""
    path, first, second = two_indexed_episodes(rt, REF)
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 0)
    before = os.stat(path)
    refusing = _refuse(monkeypatch, path.name)
    time.sleep(0.02)  # past a tick of the file system's clock
    os.chmod(path, 0o600)
    assert (os.stat(path).st_mtime_ns, os.stat(path).st_size) == (before.st_mtime_ns,
                                                                  before.st_size)

    assert Indexer(rt).scan().entries_deleted == 2
    assert indexed_ids(rt) == set()

    refusing.clear()
    os.chmod(path, 0o644)
    Indexer(rt).scan()
    assert indexed_ids(rt) == {first, second}
    assert Indexer(rt).scan().files_synced == 0  # read as it is: nothing to do
