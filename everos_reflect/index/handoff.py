"""A write someone waits for goes before the rest of a long scan.

An add (HTTP, MCP) indexes its entry before it answers, so a search sent right after finds it,
and waits up to 10 s for the indexer lock to do so. A scan holds that lock for as long as it has
logs to embed: ``serve``'s first scan of a large root, or the re-embedding after a model change,
takes minutes. Every add made meanwhile waited the full 10 s and was answered ``indexed:
false`` (LoCoMo, 544 Episodes and 2.5k facts: five adds in a row took 10.0 s each).

So a writer that waits for the indexer announces it: it holds
``<root>/.index/locks/indexer-waiting.lock`` *shared* from before it asks for the indexer lock
until it is done with it. A scan looks between its embedding batches (one non-blocking
*exclusive* try: it fails while anyone holds the file shared), and when someone waits it lets
go of the indexer until they are done, then takes it back and goes on where it was. Nothing it
planned is lost: a log the writer synced meanwhile is planned again and found unchanged.

An ``flock``, like :mod:`everos_reflect.index.rebuild`: it works across processes (MCP next to
``serve``) and between threads (one open file per holder), and the OS drops it when its holder
dies, so a killed writer never keeps a scan waiting.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from everos_reflect.index import rebuild

#: The longest a scan stands aside at one of its pauses, however many writers keep coming: a
#: writer waits at most 10 s itself (``INDEX_WAIT_SECONDS``), so longer would only stall the
#: scan behind writers that arrive one after another.
MAX_PAUSE_SECONDS = 10.0


def waiting_file(index_dir: Path) -> Path:
    return Path(index_dir) / "locks" / "indexer-waiting.lock"


@contextmanager
def waiting(index_dir: Path) -> Iterator[None]:
    """Announce, for the block, a writer waiting for (then holding) the indexer lock. A scan
    holds the file exclusive only for the instant of its check, so this hardly waits. A file
    that cannot be made (the locks folder gone) announces nothing: the write waits as before.
    """
    try:
        fd = os.open(waiting_file(index_dir), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # closing the only descriptor of the open file drops its flock


def someone_waiting(index_dir: Path) -> bool:
    """Whether a writer announced by :func:`waiting` waits for the indexer or holds it now
    (the file held shared: an exclusive try would wait)."""
    return rebuild.held_against(waiting_file(index_dir), fcntl.LOCK_EX)


def wait_for_writers(index_dir: Path, timeout: float = MAX_PAUSE_SECONDS) -> None:
    """Wait, up to ``timeout`` seconds, until no writer waits for or holds the indexer (the
    caller has let go of it)."""
    deadline = time.monotonic() + timeout
    while someone_waiting(index_dir) and time.monotonic() < deadline:
        time.sleep(0.02)
