"""A root moved away just as a run, a recovery or an undo takes its strategy lock.

A lock's open makes the lock file's folders with their parents: taken after the root moved, it
made ``<old root>/.index/locks/strategy-….lock`` again, an empty root that other commands then
took for the root (and the run or undo went on against it). The provenance lock's own case is
``test_provenance_root_moved.py``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from everos_reflect.engine.engine import Engine
from everos_reflect.engine.recovery import recover_all
from everos_reflect.errors import RootGone
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.undo import undo_merge
from tests.reflect_fixtures import ANDREW, make_runtime, reports, run_reflection, seed_pets

REFLECT_LOCK = "strategy-reflect_episodes.lock"


@pytest.fixture
def rt(root: Path) -> Iterator[Runtime]:
    runtime = make_runtime(root, ExtractiveLLM())
    yield runtime
    runtime.close()


def move_as_taken(monkeypatch: pytest.MonkeyPatch, root: Path, lock_name: str) -> Path:
    """Move ``root`` away the first time a lock named ``lock_name`` is about to be opened:
    after the caller's own folder checks, before the lock's open. The new path of the root."""
    away = root.with_name(root.name + "-away")
    acquire = FileLock.acquire

    def moved_first(self: FileLock, *args: Any, **kwargs: Any) -> Any:
        if Path(self.lock_file).name == lock_name and root.exists() and not away.exists():
            root.rename(away)
        return acquire(self, *args, **kwargs)

    monkeypatch.setattr(FileLock, "acquire", moved_first)
    return away


def files_under(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*.md"))}


def test_a_run_whose_root_moved_as_its_lock_is_taken_fails_and_makes_no_root_again(
        rt: Runtime, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seed_pets(rt)
    logs = files_under(root)
    away = move_as_taken(monkeypatch, root, REFLECT_LOCK)
    out = Engine(rt).trigger("reflect_episodes", force=True, timeout=30)
    assert out.status == "failed"
    assert "moved or deleted" in (out.error or "")
    assert not root.exists(), sorted(str(p) for p in root.rglob("*"))
    assert files_under(away) == logs  # nothing merged anywhere
    assert (away / ".index" / "locks").is_dir()  # the moved root keeps its own


def test_a_recovery_whose_root_moved_as_its_lock_is_taken_makes_no_root_again(
        rt: Runtime, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seed_pets(rt)
    away = move_as_taken(monkeypatch, root, REFLECT_LOCK)
    with pytest.raises(RootGone, match="moved or deleted"):
        recover_all(rt)
    assert not root.exists(), sorted(str(p) for p in root.rglob("*"))
    assert any(away.rglob("*.md"))


def test_an_undo_whose_root_moved_as_its_lock_is_taken_fails_and_makes_no_root_again(
        rt: Runtime, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seed_pets(rt)
    assert run_reflection(rt)["merged"] == 1
    merged = reports(rt)[0]["merged_entry_id"]
    logs = files_under(root)
    away = move_as_taken(monkeypatch, root, REFLECT_LOCK)
    with pytest.raises(RootGone, match="moved or deleted"):
        undo_merge(rt, ANDREW, merged)
    assert not root.exists(), sorted(str(p) for p in root.rglob("*"))
    assert files_under(away) == logs  # the merge stands, nothing undone anywhere
