"""A FIFO (or device) named like a daily log is refused at once, never opened blocking."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.index.sync import Indexer
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings


def _within(seconds: float, work: object) -> list[object]:
    """Run ``work`` in a thread; fail (instead of hanging the suite) if it blocks."""
    outcome: list[object] = []

    def target() -> None:
        try:
            outcome.append(work())  # type: ignore[operator]
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "blocked on the FIFO"
    return outcome


@pytest.fixture
def fifo(root: Path) -> tuple[Runtime, Path]:
    folder = root / "default_app/default_project/users/u1/episodes"
    folder.mkdir(parents=True)
    path = folder / "episode-2026-10-12.md"
    os.mkfifo(path)
    return Runtime(root, Settings(), embedder=HashEmbedder(16)), path


def test_reading_a_fifo_named_like_a_log_fails_at_once(fifo: tuple[Runtime, Path]) -> None:
    rt, path = fifo
    (outcome,) = _within(10, lambda: rt.store.read(path))
    assert isinstance(outcome, OSError) and "not a regular file" in str(outcome)


def test_syncing_a_fifo_named_like_a_log_skips_it_at_once(fifo: tuple[Runtime, Path]) -> None:
    rt, path = fifo
    (outcome,) = _within(10, lambda: Indexer(rt).sync_path(path))
    assert not isinstance(outcome, Exception)
    assert rt.db().execute("SELECT COUNT(*) FROM files").fetchone()[0] == 0
