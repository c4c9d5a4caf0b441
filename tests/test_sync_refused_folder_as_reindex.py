"""A folder of the layout this process may not list (its mode, an ACL, another account's
folder) leaves the index as a ``reindex`` of the same Markdown once it stands still, as a
refused log does (tests/test_sync_refused_log_as_reindex.py): no row of the logs under it,
``status`` and ``lint`` naming it. Refused within a moment of a change to it (a ``chmod -R``
under way), its logs are held and tried again, as a refused log is; listed again, they come
back.

Tests run as root here, where ``chmod 000`` blocks no listing: the refusal is injected."""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.embedding import HashEmbedder
from everos_reflect.index import sync
from everos_reflect.index.sync import Indexer
from everos_reflect.markdown import settling, store
from everos_reflect.model import UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from tests.sync_fixtures import indexed_ids, two_indexed_episodes
from tests.test_sync_state_machine import fingerprint

REF = UserRef.of("u_ann")
FOLDER = "u_ann/episodes"

pytestmark = pytest.mark.usefixtures("settle_at_once")


def _refuse(monkeypatch: pytest.MonkeyPatch, tail: str, *, entered: bool) -> set[bool]:
    """Every listing of a folder whose path ends with ``tail`` (in any root) is refused while
    the set returned holds True (clear it to let the folder be listed); unless ``entered``
    (mode ``0o311``: listed no, entered yes), every stat and open of a file in it too (mode
    ``000``)."""
    refusing = {True}
    scandir, listdir = os.scandir, os.listdir

    def refused(path: Any) -> bool:
        return bool(refusing) and os.fspath(path).endswith(tail)

    def scanning(path: Any = ".") -> Any:
        if refused(path):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))
        return scandir(path)

    def listing(path: Any = ".") -> Any:
        if refused(path):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))
        return listdir(path)

    monkeypatch.setattr(os, "scandir", scanning)
    monkeypatch.setattr(os, "listdir", listing)
    if entered:
        return refusing
    stat, opening = os.stat, sync.open_regular

    def stating(path: Any, *args: Any, **kwargs: Any) -> Any:
        if refused(os.path.dirname(os.fspath(path))):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))
        return stat(path, *args, **kwargs)

    def open_refused(path: Any, *args: Any, **kwargs: Any) -> Any:
        if refused(os.path.dirname(os.fspath(path))):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))
        return opening(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stating)
    monkeypatch.setattr(sync, "open_regular", open_refused)
    monkeypatch.setattr(store, "open_regular", open_refused)
    return refusing


def _as_a_reindex_leaves_it(rt: Runtime, copy: Path, refusing: set[bool]) -> None:
    was = set(refusing)
    refusing.clear()  # copied whole, then refused in the copy as in the root
    shutil.copytree(rt.root, copy, ignore=shutil.ignore_patterns(".index"))
    refusing.update(was)
    fresh = Runtime(copy, Settings(), embedder=HashEmbedder(16))
    try:
        Indexer(fresh).reindex()
        assert fingerprint(rt, set()) == fingerprint(fresh, set())
        members = "SELECT entry_id FROM cluster_members ORDER BY entry_id"
        assert rt.db().execute(members).fetchall() == fresh.db().execute(members).fetchall()
    finally:
        fresh.close()


def _named(rt: Runtime) -> tuple[list[dict[str, Any]], str]:
    status = CliRunner().invoke(cli, ["status", "--root", str(rt.root), "--json"])
    lint = CliRunner().invoke(cli, ["lint", "--root", str(rt.root)])
    return json.loads(status.stdout)["files_with_problems"], lint.stdout


@pytest.mark.parametrize("entered", [False, True], ids=["mode 000", "mode 311"])
def test_a_folder_refused_while_it_stands_still_leaves_the_index_as_a_reindex_does(
        rt: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entered: bool) -> None:
    path, first, second = two_indexed_episodes(rt, REF)
    folder = rt.store.rel(path.parent)
    refusing = _refuse(monkeypatch, FOLDER, entered=entered)

    held = Indexer(rt).scan()  # its mode changed a moment ago: a `chmod -R` under way
    assert held.entries_deleted == 0 and indexed_ids(rt) == {first, second}
    assert held.waiting == {rt.store.rel(path): f"its folder {folder} may not be listed"}

    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 0)  # it stands still from now on
    report = Indexer(rt).scan()

    assert report.entries_deleted == 2 and indexed_ids(rt) == set()
    _as_a_reindex_leaves_it(rt, tmp_path / "refused", refusing)
    problems, lint = _named(rt)
    assert [p["file"] for p in problems] == [folder]
    assert f"{folder}: not read: Permission denied" in lint

    refusing.clear()
    Indexer(rt).scan()

    assert indexed_ids(rt) == {first, second}
    _as_a_reindex_leaves_it(rt, tmp_path / "fixed", refusing)
    assert _named(rt)[0] == []


@pytest.mark.parametrize("synced", ["sync_path", "sync_paths"])
def test_a_watcher_sync_of_a_log_under_a_folder_not_listed_leaves_it_as_a_reindex_does(
        rt: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, synced: str) -> None:
    path, first, second = two_indexed_episodes(rt, REF)
    refusing = _refuse(monkeypatch, FOLDER, entered=True)  # mode 311: entered, not listed
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 0)  # it stands still
    Indexer(rt).scan()
    assert indexed_ids(rt) == set()

    # the watcher saw it change: read by its path, its rows came back until the next scan
    if synced == "sync_path":
        Indexer(rt).sync_path(path)
    else:
        Indexer(rt).sync_paths([path])

    assert indexed_ids(rt) == set()
    _as_a_reindex_leaves_it(rt, tmp_path / "refused", refusing)

    refusing.clear()
    Indexer(rt).sync_path(path)

    assert indexed_ids(rt) == {first, second}
