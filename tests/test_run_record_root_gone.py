"""A root moved away between the start of a run's record and the start of its thread: the
record ends ``failed`` in the root's own database, where it was started, never left
``running``. (The run thread opened its own connection first thing, at the old path: that
raised, the fallback that records a failure raised the same way, and the row stayed
``running`` until some later start marked it abandoned.)"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.engine.engine import Engine, list_runs
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from tests.test_root_gone import MovesTheRoot
from tests.test_root_gone import mover as mover  # the root-gone tests' fixture


def test_a_root_moved_before_the_run_thread_starts_ends_its_record_failed(
        tmp_path: Path, mover: MovesTheRoot, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "ome.toml").write_text("")
    rt = Runtime(root, Settings(), embedder=HashEmbedder())
    real = Engine._work

    def moved_first(self: Engine, *args: Any) -> None:
        os.rename(root, tmp_path / "moved")  # in the window after the record was started
        real(self, *args)

    monkeypatch.setattr(Engine, "_work", moved_first)
    outcome = Engine(rt).trigger(mover.name, force=True, timeout=10)

    moved = Runtime(tmp_path / "moved", Settings(), embedder=HashEmbedder())
    [run] = list_runs(moved, strategy=mover.name)
    assert run["status"] == "failed"
    assert outcome.status == "failed" and run["error"] == outcome.error
    assert "was moved or deleted during the run" in run["error"]
    assert not root.exists()  # no lock, index or record written at the old path
    rt.close()
    moved.close()
