"""The provenance lock (``.index/locks/provenance.lock``) is waited for a bounded time. The
wait had no end, and the indexer waits holding its own lock: a long check elsewhere (a
``revalidate_insights`` run, a CLI process) held up every sync of ``serve``'s watcher, and a
hung one held it up for good. The indexer now puts its check off and hands the change over at
its next sync; a run's check fails with a message saying why."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from everos_reflect.errors import ProvenanceBusy
from everos_reflect.index.sync import Indexer
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import provenance
from tests.test_provenance import DEV, edit_file, setup, status


@contextmanager
def held_elsewhere(rt: Runtime) -> Iterator[None]:
    """The provenance lock, held as another check would hold it (another open of the file:
    the same process is no exception)."""
    lock = FileLock(str(rt.index_dir / "locks" / "provenance.lock"), thread_local=False)
    lock.acquire()
    try:
        yield
    finally:
        lock.release()


def finishes(work: Callable[[], Any]) -> dict[str, Any]:
    """``work()`` on a thread; what it returned or raised, once it ended. A wait without end
    is a thread still running long after any bounded wait (the lock is let go then, so the
    test does not hang)."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = work()
        except Exception as exc:
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(120)
    out["ended"] = not thread.is_alive()
    return out


def notes(rt: Runtime) -> int:
    return int(rt.db().execute("SELECT COUNT(*) FROM publish_note").fetchone()[0])


def test_a_sync_while_a_check_holds_the_lock_puts_the_check_off_and_loses_no_change(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt, eps, first, second = setup(root)
    monkeypatch.setattr(provenance, "INDEXER_WAIT_SECONDS", 0.2)
    edit_file(rt.store.path_for_id(DEV, eps[1].id), "on day 16", "on day 17")
    with held_elsewhere(rt):
        done = finishes(Indexer(rt).scan)
        assert done["ended"], "the sync waited on the provenance lock without end"
        assert "error" not in done, done
        assert Indexer(rt).pending()["files_changed"] == 0  # the edit is indexed
        assert status(rt, first.id) == ("active", None)  # not checked yet
        assert notes(rt) > 0  # kept for provenance
    Indexer(rt).scan()  # nothing changed since: the change put off is handed over now
    assert status(rt, first.id) == ("stale", f"evidence {eps[1].id} was edited")
    assert status(rt, second.id) == ("stale", f"evidence {first.id} is stale")
    assert notes(rt) == 0


def test_a_run_s_check_waits_a_bounded_time_and_says_why(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt, eps, first, _ = setup(root)
    monkeypatch.setattr(provenance, "CHECK_WAIT_SECONDS", 0.2)
    edit_file(rt.store.path_for_id(DEV, eps[1].id), "on day 16", "on day 17")
    with held_elsewhere(rt):
        done = finishes(lambda: provenance.check(rt, DEV))
        assert done["ended"], "the check waited on the provenance lock without end"
    assert isinstance(done.get("error"), ProvenanceBusy), done
    assert "another provenance check has held" in str(done["error"])
    assert "provenance.lock" in str(done["error"])
    assert status(rt, first.id) == ("active", None)  # nothing was checked
    assert provenance.check(rt, DEV).stale  # and the next check does it
