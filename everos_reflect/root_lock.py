"""Locks under ``<root>/.index/locks/`` taken so that a root moved away is never made again.

A lock's open makes the lock file's folders with their parents. A root moved (or renamed, or
deleted) between a caller's own checks and that open came back at its old path as an empty
folder holding only ``.index/locks/<name>.lock``, which other commands then took for the root
(and the run, undo or check that took the lock went on against it). :func:`take` makes only
``.index`` and ``locks`` (never the root), and, once the lock is held, checks that the root
is still the folder the runtime opened; if not, it gives the lock back, takes back what the
open made at the old path (:func:`take_back_lock_folders`) and raises :class:`RootGone`.
Every lock a strategy's work holds (a run, a recovery, an undo, a provenance check) goes
through here.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from filelock import FileLock

from everos_reflect.errors import RootGone
from everos_reflect.model import shown_path

if TYPE_CHECKING:
    from everos_reflect.runtime import Runtime


def take(runtime: Runtime, path: Path, timeout: float) -> FileLock:
    """Hold the lock at ``path`` (``<root>/.index/locks/<name>.lock``), waiting up to
    ``timeout`` seconds (0: one try); the held lock, for the caller to release.

    Raises :class:`filelock.Timeout` while another thread or process holds it, and
    :class:`~everos_reflect.errors.RootGone` (:class:`NoRoot` for a root that never was) when
    the root is not at its path, before or once the lock is held: nothing is left at the old
    path then."""
    for folder in (runtime.index_dir, path.parent):
        try:
            folder.mkdir(exist_ok=True)  # never the root itself
        except FileNotFoundError:
            runtime.check_root()  # the reason, in the root's words
            raise
    lock = FileLock(str(path), thread_local=False)
    lock.acquire(timeout=timeout)
    if runtime.root_gone():
        # moved away between the folders made above and the lock's open, which made the
        # lock's folders (and the root) again at the old path
        lock.release()
        take_back_lock_folders(path, runtime.root)
        runtime.check_root()
        # back by now: still not to be taken, its run or undo would start from a moved root
        raise RootGone(f"the memory root {shown_path(runtime.root)} was moved or deleted "
                       "while in use")
    return lock


def take_back_lock_folders(lock_file: Path, root: Path) -> None:
    """Remove ``root/.index/locks/<lock_file>`` and its three folders when that is all there
    is at ``root``: what a lock's open made at a root's old path. Anything else there (a root
    moved in since, with its own logs and index) is left as it is."""
    shape = ((root, root / ".index"), (root / ".index", lock_file.parent),
             (lock_file.parent, lock_file))
    try:
        if lock_file.parent.parent != root / ".index" or any(
                [p.name for p in folder.iterdir()] != [child.name] for folder, child in shape):
            return
        lock_file.unlink()
        for folder in (lock_file.parent, root / ".index", root):
            folder.rmdir()
    except OSError:  # moved or filled meanwhile: left as it is
        return


__all__ = ["take", "take_back_lock_folders"]
