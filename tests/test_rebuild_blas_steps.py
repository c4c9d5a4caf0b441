"""A rebuild limits BLAS to one thread once per step of Episodes, not once per Episode.

Each Episode's rule, once a user has a consolidated cluster, runs a one-row product against
the pivots of those clusters inside a one-thread BLAS block; entering and leaving that limit
resizes OpenBLAS's pool (~15 µs), more than the product. A rebuild (``recluster``, the end of
a Reflection run, ``undo``) replays a user's whole history, so it holds one block per
``BLAS_STEP`` Episodes and the blocks of the products inside are nested ones, which only
take the lock.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from everos_reflect.clustering import matrix
from everos_reflect.clustering.matrix import one_blas_thread
from everos_reflect.clustering.service import ClusterService
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from tests.reflect_fixtures import ANDREW, add_episode, make_runtime, run_reflection, seed_pets

pytestmark = pytest.mark.usefixtures("settle_at_once")


class _CountingController:
    """threadpoolctl's controller as far as :func:`one_blas_thread` uses it: counts the
    limits made (each sets the count, and puts it back on exit)."""

    def __init__(self) -> None:
        self.limits = 0
        self.held = False

    def limit(self, *, limits: int, user_api: str) -> _CountingController:
        assert (limits, user_api) == (1, "blas")
        self.limits += 1
        return self

    def __enter__(self) -> None:
        assert not self.held, "a limit was made inside another"
        self.held = True

    def __exit__(self, *exc: object) -> None:
        self.held = False


@pytest.fixture
def controller(monkeypatch: pytest.MonkeyPatch) -> _CountingController:
    fake = _CountingController()
    monkeypatch.setattr(matrix, "_BLAS_CONTROLLER", fake)
    return fake


def test_nested_blocks_make_one_limit(controller: _CountingController) -> None:
    with one_blas_thread():
        with one_blas_thread(), one_blas_thread():
            assert controller.held
        assert controller.held
    assert not controller.held
    with one_blas_thread():
        pass
    assert controller.limits == 2


def test_a_nested_block_left_by_an_error_keeps_the_outer_one(
        controller: _CountingController) -> None:
    with one_blas_thread():
        with pytest.raises(RuntimeError), one_blas_thread():
            raise RuntimeError("inside")
        assert controller.held
        with one_blas_thread():  # still nested: no new limit
            pass
    assert (controller.limits, controller.held) == (1, False)


def test_another_thread_makes_its_own_limit(controller: _CountingController) -> None:
    """The depth is per thread: a block in another thread is not taken as nested in this
    thread's (it waits for the lock, then makes its own limit)."""
    inside = threading.Event()

    def other() -> None:
        with one_blas_thread():
            inside.set()

    with one_blas_thread():
        worker = threading.Thread(target=other)
        worker.start()
        assert not inside.wait(timeout=0.1)
    worker.join()
    assert inside.is_set() and controller.limits == 2


def test_recluster_limits_blas_once_per_step(tmp_path: Path,
                                             controller: _CountingController) -> None:
    """After a merge (a consolidated cluster: every later Episode's rule runs the pivot
    product), a ``recluster`` of the user makes one limit for its few Episodes; before, it
    made one per Episode placed while a consolidated cluster existed."""
    rt = make_runtime(tmp_path / "root", ExtractiveLLM())
    seed_pets(rt)
    assert run_reflection(rt)["merged"] >= 1
    for day in range(1, 9):
        add_episode(rt, ANDREW, f"2026-09-{day:02d}T10:00:00+00:00", "Garden",
                    f"Andrew planted row {day} of tomatoes in the back garden.")
    Indexer(rt).scan()
    controller.limits = 0
    counts = ClusterService(rt).recluster(ANDREW)
    assert controller.limits == 1
    assert counts["members"] >= 9  # the narrative and the eight Episodes were placed
