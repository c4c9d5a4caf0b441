"""A provenance check handed a change after the root was moved away.

A sync's change subscribers run after its rows are written; a root moved away in between
(the watcher's root-moved test, seen under load) had the provenance check take its lock under
the old path, and the lock's folders, made with their parents, made the root again: an empty
folder holding `.index/locks/provenance.lock`, which other commands took for the root."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from everos_reflect import root_lock
from everos_reflect.embedding import HashEmbedder
from everos_reflect.index import events
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.model import Kind
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.provenance import on_changes
from tests.reflect_fixtures import ANDREW, add_episode, make_runtime


def _walk(rt: Runtime) -> events.ChangeSet:
    """The change an add of one Episode hands the check."""
    entry = add_episode(rt, ANDREW, "2026-08-01T10:00:00+00:00", "Walk", "A walk.")
    return events.ChangeSet(ANDREW, Kind.EPISODE,
                            rt.store.rel(rt.store.path_for_id(ANDREW, entry.id)), [entry])


def test_a_check_after_the_root_moved_away_waits_and_makes_no_root_again(root: Path) -> None:
    rt = make_runtime(root, ExtractiveLLM(), embedder=HashEmbedder(16))
    try:
        change = _walk(rt)
        away = root.with_name(root.name + "-away")
        root.rename(away)
        with pytest.raises(events.Deferred, match="was moved or deleted"):
            on_changes(rt, [change])
        assert not root.exists()
        away.rename(root)
        assert on_changes(rt, [change]) == []  # back: checked (no derived records to mark)
    finally:
        rt.close()


def test_a_root_moved_as_the_lock_is_taken_is_not_made_again(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the move lands between the check's own folders and the lock's open, which makes the
    # lock's folders with their parents: the old path held `.index/locks/provenance.lock`
    rt = make_runtime(root, ExtractiveLLM(), embedder=HashEmbedder(16))
    away = root.with_name(root.name + "-away")

    class MovedAsTaken(FileLock):
        def acquire(self, *args: Any, **kwargs: Any) -> Any:
            if root.exists():
                root.rename(away)
            return super().acquire(*args, **kwargs)

    try:
        change = _walk(rt)
        monkeypatch.setattr(root_lock, "FileLock", MovedAsTaken)
        with pytest.raises(events.Deferred, match="was moved or deleted"):
            on_changes(rt, [change])
        assert not root.exists(), sorted(str(p) for p in root.rglob("*"))
        assert (away / ".index" / "locks").is_dir()  # the moved root keeps its own
        monkeypatch.undo()
        away.rename(root)
        assert on_changes(rt, [change]) == []
    finally:
        rt.close()


def test_a_root_moved_in_at_the_old_path_is_left_as_it_is(
        root: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # another root moved in where this one was: its lock and index are never taken back
    rt = make_runtime(root, ExtractiveLLM(), embedder=HashEmbedder(16))
    other = make_runtime(tmp_path / "other", ExtractiveLLM(), embedder=HashEmbedder(16))
    add_episode(other, ANDREW, "2026-08-02T10:00:00+00:00", "Swim", "A swim.")
    other.close()
    away = root.with_name(root.name + "-away")

    class SwappedAsTaken(FileLock):
        def acquire(self, *args: Any, **kwargs: Any) -> Any:
            if not away.exists():
                root.rename(away)
                (tmp_path / "other").rename(root)
            return super().acquire(*args, **kwargs)

    try:
        change = _walk(rt)
        monkeypatch.setattr(root_lock, "FileLock", SwappedAsTaken)
        with pytest.raises(events.Deferred, match="was moved or deleted"):
            on_changes(rt, [change])
        assert (root / ".index" / "locks" / "provenance.lock").exists()
        assert any(root.rglob("*.md"))
    finally:
        rt.close()
