"""A memory root moved or deleted while a run works in it: the run is ``failed``, saying so,
and nothing recreates the root at its old path.

A fleet run whose root was moved mid-run answered ``ok`` with nothing merged (the Markdown was
simply no longer there to list), and the run's first use of LanceDB recreated
``<old path>/.index/lancedb``: the fleet then took that empty folder for the root, ``ok`` and
idle on every later run, while the Episodes waited unmerged where the root had gone.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.engine import registry
from everos_reflect.engine.engine import Engine, list_runs
from everos_reflect.engine.registry import RunContext, Strategy
from everos_reflect.errors import RootGone
from everos_reflect.fleet.work import run_root
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings


class MovesTheRoot(Strategy):
    """Moves its root away mid-run (a person's ``mv``, a lost mount), then goes on."""

    name = "moves_root_test"
    description = "test double"
    unit_counts = ("done", "failed")
    touch_vectors = False

    def run(self, ctx: RunContext) -> dict[str, int]:
        root = ctx.runtime.root
        os.rename(root, root.parent / "moved")
        if self.touch_vectors:
            ctx.runtime.vectors.count("episode")
        return {"done": 1}


@pytest.fixture
def mover() -> Iterator[MovesTheRoot]:
    strategy = MovesTheRoot()
    registry.register(strategy)
    yield strategy
    registry.unregister(strategy.name)


def _runtime(root: Path) -> Runtime:
    root.mkdir()
    (root / "ome.toml").write_text("")
    return Runtime(root, Settings(), embedder=HashEmbedder())


def test_a_root_moved_during_a_run_fails_the_run_in_its_record(tmp_path: Path,
                                                               mover: MovesTheRoot) -> None:
    rt = _runtime(tmp_path / "root")
    rt.db()  # open, as a daemon's would be

    outcome = Engine(rt).trigger(mover.name, force=True, timeout=10)

    assert outcome.status == "failed"
    assert outcome.error == (f"the memory root {tmp_path / 'root'} was moved or deleted during "
                             "the run; run it again where the root is now")
    moved = Runtime(tmp_path / "moved", Settings(), embedder=HashEmbedder())
    [run] = list_runs(moved, strategy=mover.name)
    assert run["status"] == "failed" and run["error"] == outcome.error
    assert run["counts"] == outcome.counts == {"done": 1}  # what it did before stays told
    assert not (tmp_path / "root").exists()
    rt.close()
    moved.close()


def test_a_root_moved_before_its_index_is_opened_is_not_recreated(tmp_path: Path,
                                                                  mover: MovesTheRoot) -> None:
    mover.touch_vectors = True
    rt = _runtime(tmp_path / "root")

    outcome = Engine(rt).trigger(mover.name, force=True, timeout=10)

    assert outcome.status == "failed"
    assert "was moved or deleted during the run" in (outcome.error or "")
    assert not (tmp_path / "root").exists()  # no ghost root with an empty .index/lancedb
    with pytest.raises(RootGone, match=r"memory root .*root is gone \(moved or deleted"):
        rt.vectors  # noqa: B018 - the property opens LanceDB
    rt.close()


def test_a_root_that_is_gone_before_the_run_starts_fails_without_recreating_it(
        tmp_path: Path, mover: MovesTheRoot) -> None:
    rt = _runtime(tmp_path / "root")
    engine = Engine(rt)  # a daemon's, opened long before
    os.rename(tmp_path / "root", tmp_path / "elsewhere")

    outcome = engine.trigger(mover.name, force=True, timeout=10)

    assert outcome.status == "failed" and outcome.run_id is None
    assert "is gone (moved or deleted" in (outcome.error or "")
    assert not (tmp_path / "root").exists()
    rt.close()


def test_a_fleet_root_moved_mid_run_comes_back_failed(tmp_path: Path,
                                                      mover: MovesTheRoot) -> None:
    root = tmp_path / "root"
    _runtime(root).close()

    result = run_root(str(root), mover.name, force=True,
                      opener=lambda r: Runtime(Path(r), Settings(), embedder=HashEmbedder()))

    assert result.status == "failed"
    assert "was moved or deleted during the run" in (result.error or "")
    assert not root.exists()
