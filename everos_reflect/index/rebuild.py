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
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

#: Why a run was skipped: what ``runs.error`` and the trigger's answer say.
REBUILDING = ("the index is being rebuilt (reindex or recluster): the run was skipped rather "
              "than work on a half-built index; trigger it again once the rebuild is done")


def lock_file(index_dir: Path) -> Path:
    return Path(index_dir) / "locks" / "rebuild.lock"


def _open(index_dir: Path) -> int:
    path = lock_file(index_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)


def try_shared(index_dir: Path) -> int | None:
    """Hold the lock shared (a strategy run) and answer the handle to :func:`release`;
    ``None`` when a rebuild holds it."""
    fd = _open(index_dir)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def release(fd: int) -> None:
    os.close(fd)  # closing the only descriptor of the open file drops its flock


@contextmanager
def rebuilding(index_dir: Path, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold the lock exclusive for a rebuild, first waiting for the runs in flight;
    ``on_wait`` is called once when it has to wait (the CLI says why it is not starting)."""
    fd = _open(index_dir)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                on_wait()
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
