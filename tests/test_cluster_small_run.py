"""A run of a few Episodes (a watcher's flush of one file: often one) finds where each item's
time window ends with a bisection per item, not with the array calls whose fixed cost was
most of a small run's set-up (bench/results/clustering_s44.md); the same ends, so the same
placements, at the window's edges too."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from everos_reflect.clustering import matrix
from everos_reflect.clustering.matrix import UserClusters
from everos_reflect.clustering.online import normalize_rows, window_end
from tests.test_cluster_batch import DAY, DIM, _one_by_one, _snapshot, _unit

KW: dict[str, float] = {"threshold": 0.5, "window_seconds": 7 * DAY, "rejoin_threshold": 0.8}


def _vectors(rng: np.random.Generator, count: int) -> np.ndarray:
    topic = _unit(rng, DIM)
    return normalize_rows(np.stack([_unit(rng, DIM, topic * 3, 0.6) for _ in range(count)]))


def test_a_small_run_makes_no_array_call_for_its_window_ends(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    real = matrix.window_end_rows

    def counting(*args: Any) -> np.ndarray:
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(matrix, "window_end_rows", counting)
    rng = np.random.default_rng(44)
    for count, array_calls in [(1, 0), (4, 0), (40, 1)]:
        calls.clear()
        vectors = _vectors(rng, count)
        ts = [1.0e9 + n * 2 * DAY for n in range(count)]
        want = _one_by_one(UserClusters(), vectors, ts, **KW)
        assert UserClusters().assign_run(vectors, ts, lambda i: f"cl_run_{i:08d}",
                                         **KW) == want
        assert len(calls) == array_calls, count


def _edge_times(draw: st.DrawFn) -> list[float]:
    """Times in order, each the previous one's window end, one float past it or short of it,
    or a few hours on (epochs just below 2^31, where the rounded sum and the difference
    disagree)."""
    t = 2.0 ** 31 - 20 * DAY
    out = [t]
    for _ in range(draw(st.integers(0, 2 * matrix._SMALL_RUN))):
        end = window_end(t, KW["window_seconds"])
        t = draw(st.sampled_from([end, math.nextafter(end, math.inf),
                                  math.nextafter(end, -math.inf), t + 3600.0, t]))
        out.append(t)
    return out


@settings(max_examples=80, deadline=None)
@given(times=st.composite(_edge_times)(), seed=st.integers(0, 10_000))
def test_either_way_of_finding_the_window_ends_places_a_run_alike(
        times: list[float], seed: int) -> None:
    vectors = _vectors(np.random.default_rng(seed), len(times))
    placed = []
    for small in (10**6, 0):  # every run in Python, every run by the array calls
        with pytest.MonkeyPatch.context() as m:
            m.setattr(matrix, "_SMALL_RUN", small)
            state = UserClusters()
            out = state.assign_run(vectors, times, lambda i: f"cl_run_{i:08d}", **KW)
            placed.append((out, _snapshot(state)))
    assert placed[0] == placed[1]
    assert placed[0][0] == _one_by_one(UserClusters(), vectors, times, **KW)
