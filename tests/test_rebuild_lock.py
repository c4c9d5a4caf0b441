"""The rebuild lock (``index/rebuild.py``): runs share it, ``reindex``/``recluster`` hold it
alone, and a rebuild that is waiting goes before any run that has not started yet."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from everos_reflect.index import rebuild


def test_a_run_cannot_start_while_a_rebuild_waits_for_the_runs_in_flight(
    tmp_path: Path
) -> None:
    first = rebuild.try_shared(tmp_path)
    assert first is not None
    waiting, rebuilt = threading.Event(), threading.Event()

    def reindex() -> None:
        with rebuild.rebuilding(tmp_path, on_wait=waiting.set):
            rebuilt.set()

    writer = threading.Thread(target=reindex)
    writer.start()
    try:
        assert waiting.wait(10)
        second = rebuild.try_shared(tmp_path)  # the next run
        if second is not None:
            rebuild.release(second)
        assert second is None  # busy, not joining in ahead of the waiting rebuild
        assert not rebuilt.is_set()
    finally:
        rebuild.release(first)
        writer.join(10)
    assert rebuilt.is_set()
    after = rebuild.try_shared(tmp_path)  # the rebuild done, runs run again
    assert after is not None
    rebuild.release(after)


def test_overlapping_runs_cannot_starve_a_waiting_rebuild(tmp_path: Path) -> None:
    # Back-to-back runs that overlapped each other kept the shared lock held for ever, and a
    # reindex waiting for it never started.
    first = rebuild.try_shared(tmp_path)
    assert first is not None
    held = [first]
    rebuilt = threading.Event()

    def reindex() -> None:
        with rebuild.rebuilding(tmp_path):
            rebuilt.set()

    writer = threading.Thread(target=reindex)
    writer.start()
    refused = 0
    deadline = time.monotonic() + 3
    try:
        while not rebuilt.is_set() and time.monotonic() < deadline:
            fd = rebuild.try_shared(tmp_path)  # a new run starts ...
            if fd is None:
                refused += 1
            else:
                held.append(fd)
            time.sleep(0.02)
            if held:  # ... before the oldest one ends
                rebuild.release(held.pop(0))
        starved = not rebuilt.is_set()
    finally:
        for fd in held:
            rebuild.release(fd)
        writer.join(10)
    assert not starved
    assert refused >= 1
