"""``rm -rf <root>/.index`` while the daemon runs (the index is derived: deleting it is always
safe). The daemon notices at its next pass or request, lets go of every handle it held on the
deleted files (each thread's SQLite connection, the LanceDB tables, the cluster cache),
rebuilds the index from the Markdown, says so in one line and goes on serving.

Before, every later sync failed with LanceDB's "Not found: .../_versions", searches were a
500 with that traceback, and the watcher's SQLite connection went on writing into the deleted
file (those writes were lost) until ``serve`` was restarted.
"""

from __future__ import annotations

import gc
import logging
import os
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.index import db as dbmod
from everos_reflect.index.sync import Indexer
from everos_reflect.index.watcher import Watcher
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from tests.api_client import ApiClient, add_episode
from tests.engine_fixtures import Quick, registered
from tests.waiting import wait_for

USER = "u_andrew"


@pytest.fixture(autouse=True)
def quick() -> Iterator[None]:
    with registered(Quick):
        yield


@pytest.fixture
def rt(root: Path) -> Iterator[Runtime]:
    runtime = Runtime(root, Settings(), embedder=HashEmbedder(16))
    yield runtime
    runtime.close()


def _found(call: ApiClient, answers: list[int]) -> set[str]:
    """The ids a keyword search for "dog" finds now (every status code is kept)."""
    resp = call("POST", "/api/v1/memory/search", json={
        "query": "dog", "top_k": 10, "user_id": USER, "mode": "keyword"})
    answers.append(resp.status_code)
    if resp.status_code != 200:
        assert resp.json()["error"]["code"] == "index_rebuilding", resp.text
        return set()
    return {hit["id"] for hit in resp.json()["data"]["episodes"]}


def _ids_on_disk(root: Path) -> set[str]:
    """Entry ids in the ``system.db`` at the root's path now, read by a connection of its own
    (what another process, or the next start, sees)."""
    conn = sqlite3.connect(dbmod.db_path(root))
    try:
        return {r[0] for r in conn.execute("SELECT id FROM entries")}
    finally:
        conn.close()


def _remove_index(root: Path) -> None:
    shutil.rmtree(root / ".index")


def _remove_index_at_once(root: Path) -> None:
    """The index gone in one step, as the daemon sees it: moved out of the root, then
    deleted. ``rmtree`` in place, while the watcher still writes, now and then failed with
    "Directory not empty" (as ``rm -rf`` would); the daemon tells a deleted index by its
    path, so this deletes the same thing."""
    gone = root.parent / f"{root.name}-deleted-index"
    os.rename(root / ".index", gone)
    shutil.rmtree(gone, ignore_errors=True)


def test_deleting_the_index_while_serving_rebuilds_it_and_loses_nothing(
        rt: Runtime, caplog: pytest.LogCaptureFixture) -> None:
    call = ApiClient(rt)
    answers: list[int] = []
    rebuilds: list[bool] = []  # serve writes daemon.json again there
    with Watcher(rt, debounce=0.05, reconcile_interval=0, optimize_interval=0,
                 on_index_rebuilt=lambda: rebuilds.append(True)) as watcher:
        first = add_episode(call, USER, "Toby", "Andrew adopted a dog named Toby.",
                            "2026-10-12T10:00:00+00:00")
        assert wait_for(lambda: _found(call, answers) == {first})
        wait_for(lambda: watcher.passes > 0)
        caplog.clear()
        caplog.set_level(logging.INFO)

        _remove_index_at_once(rt.root)
        second = add_episode(call, USER, "Buddy", "Andrew adopted a second dog named Buddy.",
                             "2026-10-13T10:00:00+00:00")

        assert wait_for(lambda: _found(call, answers) == {first, second}), answers
        assert wait_for(lambda: _ids_on_disk(rt.root) == {first, second})
        status = call("GET", "/api/v1/status")
        assert status.status_code == 200, status.text
        doc = status.json()["data"]
        assert doc["counts_from"] == "index" and doc["index"]["files_changed"] == 0, doc
        assert doc["totals"]["episode"] == {"live": 2, "deprecated": 0}, doc

        outcome = call("POST", "/api/v1/ome/trigger",
                       json={"name": Quick.name, "force": True, "timeout": 30})
        assert outcome.status_code == 200 and outcome.json()["status"] == "ok", outcome.text
        runs = call("GET", "/api/v1/ome/runs").json()["data"]["runs"]
        assert [(r["id"], r["status"]) for r in runs] == [(outcome.json()["run_id"], "ok")]

    assert all(code in (200, 503) for code in answers), answers
    assert rebuilds == [True]
    rebuilt = [r for r in caplog.records if "rebuilding it from the Markdown" in r.getMessage()]
    assert len(rebuilt) == 1, caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


def test_an_index_replaced_by_another_process_is_taken_up(rt: Runtime) -> None:
    """Deleted, then made again by a ``reindex`` of another process: a database is at the
    path, but not the one the daemon's handles are open on (told apart by its identity)."""
    call = ApiClient(rt)
    answers: list[int] = []
    with Watcher(rt, debounce=0.05, reconcile_interval=0, optimize_interval=0):
        first = add_episode(call, USER, "Toby", "Andrew adopted a dog named Toby.",
                            "2026-10-12T10:00:00+00:00")
        assert wait_for(lambda: _found(call, answers) == {first})

        _remove_index_at_once(rt.root)
        other = Runtime(rt.root, Settings(), embedder=HashEmbedder(16))
        Indexer(other).reindex()
        other.close()
        second = add_episode(call, USER, "Buddy", "Andrew adopted a second dog named Buddy.",
                             "2026-10-13T10:00:00+00:00")

        assert wait_for(lambda: _found(call, answers) == {first, second}), answers
        assert wait_for(lambda: _ids_on_disk(rt.root) == {first, second})
    assert all(code in (200, 503) for code in answers), answers


def test_a_connection_of_another_thread_is_let_go_once_the_index_is_found_deleted(
        rt: Runtime) -> None:
    """The thread that notices is rarely the one holding the stale connection: each thread's
    own connection is replaced at its next use."""
    import threading

    conns: list[sqlite3.Connection] = []

    def in_thread() -> None:
        conns.append(rt.db())

    worker = threading.Thread(target=in_thread)
    worker.start()
    worker.join()
    mine = rt.db()
    _remove_index(rt.root)

    assert rt.check_index() is True
    assert rt.db() is not mine
    assert rt.check_index() is False  # once: the new database is the one held now
    Indexer(rt).scan()
    assert dbmod.db_path(rt.root).is_file()


def test_an_index_left_alone_keeps_its_handles(rt: Runtime,
                                               caplog: pytest.LogCaptureFixture) -> None:
    call = ApiClient(rt)
    answers: list[int] = []
    with Watcher(rt, debounce=0.05, reconcile_interval=0.1, optimize_interval=0) as watcher:
        first = add_episode(call, USER, "Toby", "Andrew adopted a dog named Toby.",
                            "2026-10-12T10:00:00+00:00")
        assert wait_for(lambda: _found(call, answers) == {first})
        conn, vectors = rt.db(), rt.vectors
        passes = watcher.passes
        assert wait_for(lambda: watcher.passes > passes + 3)  # reconcile scans ran

        assert rt.check_index() is False
        assert rt.db() is conn and rt.vectors is vectors
    assert answers == [200] * len(answers)
    assert "rebuilding it from the Markdown" not in caplog.text


def _open_on_deleted(root: Path) -> list[str]:
    """The files of this process open on a deleted ``system.db`` (its WAL and shm too)."""
    fds = Path("/proc/self/fd")
    found = []
    for fd in fds.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith(str(dbmod.db_path(root))) and target.endswith("(deleted)"):
            found.append(target)
    return found


def test_a_connection_an_outer_frame_holds_survives_the_index_found_deleted(
        rt: Runtime) -> None:
    """``rm -rf .index`` under ``serve``: a frame holding its thread's connection (a run's
    record, an undo's journal row) called code that asked :meth:`Runtime.db` again, which
    closed that connection under it: "Cannot operate on a closed database". It is let go
    instead, and closed once the last frame holding it lets go of it too."""
    outer = rt.db()
    _remove_index(rt.root)
    assert rt.check_index() is True

    inner = rt.db()

    assert inner is not outer
    assert outer.execute("SELECT count(*) FROM entries").fetchone()[0] == 0
    assert inner.execute("SELECT count(*) FROM entries").fetchone()[0] == 0
    if Path("/proc/self/fd").is_dir():
        assert _open_on_deleted(rt.root)
        del outer
        gc.collect()  # a connection and its statement cache refer to each other
        assert _open_on_deleted(rt.root) == []


def test_work_meeting_an_index_deleted_under_it_is_one_warning_not_a_traceback(
        rt: Runtime, caplog: pytest.LogCaptureFixture) -> None:
    """``rm -rf .index`` removes ``locks/`` before ``system.db``: a rescan started in between
    failed for want of the indexer's lock file while the index did not look lost yet, and the
    watcher logged an ERROR with a traceback (seen in a test run under load)."""
    watcher = Watcher(rt, debounce=0.05, reconcile_interval=0, optimize_interval=0)
    lock_file = rt.index_dir / "locks" / "indexer.lock"

    def lock_gone(*args: object, **kwargs: object) -> None:
        # what filelock raised when the rm took ``locks/`` as it opened the lock file
        raise FileNotFoundError(2, "No such file or directory", str(lock_file))

    watcher.indexer.scan = lock_gone  # type: ignore[method-assign]
    watcher.indexer.sync_paths = lock_gone  # type: ignore[method-assign]
    log_path = rt.root / "default_app" / "default_project" / "users" / USER / "episodes" / \
        "episode-2026-08-01.md"
    with caplog.at_level(logging.WARNING):
        watcher._guarded("rescan after a folder change", watcher._scan)
        watcher.indexer.sync_path = lock_gone  # type: ignore[method-assign]
        watcher._guarded("sync", lambda: watcher.indexer.sync_path(log_path))
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    gone = [r.getMessage() for r in caplog.records if "is gone" in r.getMessage()]
    assert len(gone) == 2 and all(str(rt.index_dir / "locks") in g for g in gone)
    caplog.clear()
    with caplog.at_level(logging.WARNING):  # any other failure is still an ERROR
        watcher._guarded("some work", lambda: (_ for _ in ()).throw(FileNotFoundError(
            2, "No such file or directory", str(rt.root / "elsewhere" / "x"))))
    assert [r.levelno for r in caplog.records] == [logging.ERROR]
