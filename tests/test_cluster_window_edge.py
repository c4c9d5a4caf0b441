"""The time window has one definition (``online.in_window``) and every other window test is
derived from it, so an Episode at the window's edge is in it for all of them or for none.

The old forms compared ``t`` with a rounded ``last + window`` / ``first - window``; the cases
below are built so that rounding and the rounded difference ``in_window`` computes disagree:
at epochs straddling 2^31 (a pair one ulp out of the window passed the filters) and with
timestamps near 0 (an Episode in the window was filtered out, so a run, the matrix and the
pure rule placed it differently)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from everos_reflect.clustering.matrix import ClusterRow, UserClusters
from everos_reflect.clustering.online import (
    JOIN,
    NEW,
    Candidate,
    choose_cluster,
    in_window,
    in_window_rows,
    window_end,
    window_start,
)

U = 2.0 ** -22  # the ulp of floats just below 2^31 (one more binade above: 2 * U)
BIG = 2.0 ** 31
TINY = 2.0 ** -53
ONE_UP = math.nextafter(1.0, math.inf)  # 1 + 2^-52

# (t, first, last, window, the old form's answer)
EDGE = [
    # last + w = 2^31 + 86400 + 1.5 U rounds up to t, but t - last = 86400 + 3 U > w
    pytest.param(BIG + 86400.0 + 2 * U, BIG - U, BIG - U, 86400.0 + 2.5 * U, True,
                 id="epoch-after-end"),
    # first - w rounds down to t = 2^31 - U, but first - t = 86400 + 3 U > w
    pytest.param(BIG - U, BIG + 86400.0 + 2 * U, BIG + 86400.0 + 2 * U,
                 86400.0 + 3 * U - 2.0 ** -24, True, id="epoch-before-start"),
    # t - last = 1 + 2^-53 rounds (to even) to 1 <= w, but last + w rounds to 1 < t
    pytest.param(ONE_UP, TINY, TINY, 1.0, False, id="small-after-end"),
    # first - t = 1 + 2^-53 rounds to 1 <= w, but first - w = 2^-52 > t
    pytest.param(TINY, ONE_UP, ONE_UP, 1.0, False, id="small-before-start"),
]


def _old_form(t: float, first: float, last: float, window: float) -> bool:
    """What the run's bisect and the vectorised filters tested before."""
    return first - window <= t <= last + window


@pytest.mark.parametrize(("t", "first", "last", "window", "old"), EDGE)
def test_the_old_forms_disagree_at_the_edge_and_the_derived_bounds_do_not(
        t: float, first: float, last: float, window: float, old: bool) -> None:
    assert _old_form(t, first, last, window) is old
    assert in_window(t, first, last, window) is (not old)  # the cases really are edges
    derived = window_start(first, window) <= t <= window_end(last, window)
    assert derived is in_window(t, first, last, window)
    assert bool(in_window_rows(t, np.array([first]), np.array([last]), window)[0]) \
        is in_window(t, first, last, window)


def test_the_bounds_are_the_last_and_first_floats_in_the_window() -> None:
    for last, window in [(BIG - U, 86400.0 + 2.5 * U), (TINY, 1.0), (1.7e9, 7 * 86400.0),
                         (0.0, 0.0), (-5.0, 3.0), (1e-300, 1e300)]:
        end = window_end(last, window)
        assert in_window(end, last, last, window)
        assert not in_window(math.nextafter(end, math.inf), last, last, window)
        start = window_start(last, window)
        assert in_window(start, last, last, window)
        assert not in_window(math.nextafter(start, -math.inf), last, last, window)
    assert window_end(1.0, -1.0) == -math.inf and window_start(1.0, -1.0) == math.inf
    assert window_end(1.0, math.inf) == math.inf and window_start(1.0, math.inf) == -math.inf


@settings(max_examples=400, deadline=None)
@given(st.floats(0.0, 4e9), st.floats(0.0, 1e8), st.integers(-3, 3), st.integers(-3, 3),
       st.floats(0.0, 1e6))
def test_the_derived_bounds_equal_in_window_near_both_edges(
        last: float, window: float, up: int, down: int, width: float) -> None:
    first = last
    last = last + width
    after = last + window
    before = first - window
    for _ in range(abs(up)):
        after = math.nextafter(after, math.inf if up > 0 else -math.inf)
    for _ in range(abs(down)):
        before = math.nextafter(before, math.inf if down > 0 else -math.inf)
    for t in (after, before):
        expected = in_window(t, first, last, window)
        assert (window_start(first, window) <= t <= window_end(last, window)) is expected


def _unit(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=8)
    return (v / np.linalg.norm(v)).astype(np.float32)


KW = {"threshold": 0.5, "window_seconds": 1.0, "rejoin_threshold": 0.9}


@pytest.mark.parametrize("times", [[TINY, ONE_UP], [ONE_UP, TINY]], ids=["ordered", "late"])
def test_a_run_places_an_edge_episode_as_the_pure_rule_does(times: list[float]) -> None:
    """In the window by in_window (the pure rule joins), but out by the old bisect (ordered
    run) / the old vectorised filter (a late arrival): the run founded a second cluster."""
    v = _unit(1)
    expect = choose_cluster(v, times[1], [Candidate("cl_a", v, times[0], times[0], False)],
                            **KW)
    assert expect.reason == JOIN
    out = UserClusters().assign_run(np.stack([v, v]), times, lambda i: f"cl_{i}", **KW)
    assert out[0][2] == NEW
    assert out[1][0] == out[0][0] and out[1][2] == JOIN


@pytest.mark.parametrize("ts", [ONE_UP, TINY])
def test_the_matrix_and_a_run_see_an_edge_cluster_the_pure_rule_sees(ts: float) -> None:
    """A stored cluster at the edge of an Episode's window: the horizon (``ts - window``
    rounded) and the run's row filter dropped it before."""
    v = _unit(2)
    at = TINY if ts == ONE_UP else ONE_UP
    row = ClusterRow.new("cl_a", v, at)
    expect = choose_cluster(v, ts, [Candidate("cl_a", v, at, at, False)], **KW)
    assert expect.reason == JOIN
    state = UserClusters()
    state.put(row)
    got = state.choose(v, ts, **KW)
    assert (got.cluster_id, got.reason) == ("cl_a", JOIN)
    state = UserClusters()
    state.put(ClusterRow.new("cl_a", v, at))
    out = state.assign_run(v[None, :], [ts], lambda i: f"cl_{i}", **KW)
    assert out == [("cl_a", out[0][1], JOIN)]
