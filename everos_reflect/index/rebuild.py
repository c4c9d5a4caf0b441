"""Readers-writer lock between ``reindex`` or ``recluster`` (the writers) and strategy runs
(the readers).

``reindex`` empties ``entries``, ``files`` and the clusters and fills them again, file by file.
A Reflection run that started in the middle saw only the clusters built so far and answered
``ok`` (one try merged 1 of 6 clusters). So a run holds this lock *shared* for its whole life and
``reindex`` holds it *exclusive*: a run that meets a rebuild is skipped and recorded ``busy``
with the reason, and a rebuild waits for the runs already in flight before it drops a row.
``recluster`` rewrites the same clusters from the index and holds it the same way.

An ``flock`` on ``<root>/.index/locks/rebuild.lock``: it works across processes (a CLI
``reindex`` next to a ``serve`` daemon) and, one open file per holder, between threads; the OS
drops it when its holder dies, so a crashed rebuild never leaves the engine refusing runs.

Writer first: ``flock`` lets a new shared holder in while an exclusive one waits, so runs that
overlapped one another kept a ``reindex`` waiting for ever. A rebuild therefore first takes
``rebuild-intent.lock`` exclusive, and holds it until it is done; a run takes that one shared
only while it takes the main lock, so a run that starts once a rebuild is waiting is skipped
as ``busy``, as during the rebuild itself, and the rebuild waits only for the runs already in
flight.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

#: Why a run was skipped: what ``runs.error`` and the trigger's answer say.
REBUILDING = ("the index is being rebuilt (reindex or recluster), or is about to be: the run "
              "was skipped rather than work on a half-built index; trigger it again once the "
              "rebuild is done")


def lock_file(index_dir: Path) -> Path:
    return Path(index_dir) / "locks" / "rebuild.lock"


def intent_file(index_dir: Path) -> Path:
    """Held exclusive by a rebuild from before it waits for the runs until it is done."""
    return Path(index_dir) / "locks" / "rebuild-intent.lock"


def refill_file(index_dir: Path) -> Path:
    """Held exclusive by a ``reindex`` (of any process) while the index is emptied and filled
    again: a search then would answer from the half-built index (:func:`wait_refilled`)."""
    return Path(index_dir) / "locks" / "refill.lock"


@contextmanager
def refilling(index_dir: Path) -> Iterator[None]:
    """Hold :func:`refill_file` for a reindex (after :func:`rebuilding`)."""
    fd = _open(refill_file(index_dir))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def being_refilled(index_dir: Path) -> bool:
    """Whether a reindex of any process is filling the index again now."""
    return held_against(refill_file(index_dir), fcntl.LOCK_SH)


def held_against(path: Path, how: int) -> bool:
    """Whether someone holds ``path``'s flock so that taking it ``how`` (``LOCK_SH`` or
    ``LOCK_EX``) would wait. Opened without creating anything: a lock file that was never
    made (a read-only root, a root never reindexed) is held by nobody."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, how | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False


def wait_refilled(index_dir: Path, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for a reindex under way (:func:`being_refilled`) to
    end; whether none is under way now."""
    deadline = time.monotonic() + timeout
    while being_refilled(index_dir):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def _open(path: Path) -> int:
    # ``.index/`` and ``locks/`` only: never the root itself (a root moved or deleted in the
    # meantime is FileNotFoundError here, not recreated as an empty folder by a lock)
    path.parent.parent.mkdir(exist_ok=True)
    path.parent.mkdir(exist_ok=True)
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)


def _try(path: Path, how: int) -> int | None:
    """``path`` locked ``how`` without waiting: its handle, or ``None`` when it is held."""
    fd = _open(path)
    try:
        fcntl.flock(fd, how | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def try_shared(index_dir: Path) -> int | None:
    """Hold the lock shared (a strategy run) and answer the handle to :func:`release`;
    ``None`` when a rebuild holds it or is waiting for it."""
    intent = _try(intent_file(index_dir), fcntl.LOCK_SH)
    if intent is None:
        return None
    try:
        return _try(lock_file(index_dir), fcntl.LOCK_SH)
    finally:
        os.close(intent)  # held only while joining: a rebuild may now announce itself


def release(fd: int) -> None:
    os.close(fd)  # closing the only descriptor of the open file drops its flock


@contextmanager
def rebuilding(index_dir: Path, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold the lock exclusive for a rebuild, first waiting for the runs in flight;
    ``on_wait`` is called once when it has to wait (the CLI says why it is not starting)."""
    told = False

    def take(fd: int) -> None:
        nonlocal told
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None and not told:
                told = True
                on_wait()
            fcntl.flock(fd, fcntl.LOCK_EX)

    intent = _open(intent_file(index_dir))
    try:
        take(intent)  # held by another rebuild, or a run taking the main lock this instant
        fd = _open(lock_file(index_dir))
        try:
            take(fd)  # the runs already in flight
            yield
        finally:
            os.close(fd)
    finally:
        os.close(intent)
