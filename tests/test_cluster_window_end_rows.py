"""``online.window_end_rows``: ``window_end`` for a whole run at once, the same floats.

``UserClusters.assign_run`` finds, once per ordered run, where the later items in the
window of each item's time end (``bisect_right`` of ``window_end``), instead of one
``window_end`` and one bisection per Episode placed. The vectorised bound must be the
scalar one bit for bit, at the float edges where a rounded ``last + window`` is not it
(tests/test_cluster_window_edge.py), or a run would place an edge Episode otherwise."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from everos_reflect.clustering.matrix import UserClusters
from everos_reflect.clustering.online import (
    JOIN,
    NEW,
    Candidate,
    choose_cluster,
    fold,
    window_end,
    window_end_rows,
)

U = 2.0 ** -22  # the ulp of floats just below 2^31
BIG = 2.0 ** 31
TINY = 2.0 ** -53
ONE_UP = math.nextafter(1.0, math.inf)


def _same_floats(got: np.ndarray, want: list[float]) -> None:
    """The same floats, bit for bit (``float.hex`` tells -0.0 from 0.0; a NaN is "nan")."""
    assert got.dtype == np.float64
    assert [x.hex() for x in got.tolist()] == [x.hex() for x in want]


@pytest.mark.parametrize(("lasts", "window"), [
    ([BIG - U, BIG - 2 * U, BIG + U], 86400.0 + 2.5 * U),  # rounding past 2^31
    ([TINY, 0.0, -0.0, 1.0], 1.0),  # a rounded sum one ulp off near 0
    ([1.7e9, 1.7e9 + 3600.0], 7 * 86400.0),
    ([0.0, 5.0], 0.0),
    ([-5.0, 1e-300], 3.0),
    ([1.0, -1.0], math.inf),  # the usual check fails: window_end itself answers
    ([1.0, 2.0], -1.0),  # never in the window
    ([1.0, 2.0], math.nan),
    ([math.nan, 1.0], 2.0),
], ids=["past-2^31", "near-zero", "epochs", "no-window", "tiny", "inf-window",
        "negative-window", "nan-window", "nan-time"])
def test_window_end_rows_is_window_end_of_each_row(lasts: list[float], window: float) -> None:
    got = window_end_rows(np.array(lasts, dtype=np.float64), window)
    _same_floats(got, [window_end(x, window) for x in lasts])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(-4e9, 4e9), min_size=1, max_size=12), st.floats(0.0, 1e8),
       st.integers(-2, 2))
def test_window_end_rows_equals_window_end_near_every_edge(
        lasts: list[float], window: float, nudge: int) -> None:
    for _ in range(abs(nudge)):  # windows one or two ulps off a round value
        window = math.nextafter(window, math.inf if nudge > 0 else -math.inf)
    got = window_end_rows(np.array(lasts, dtype=np.float64), window)
    _same_floats(got, [window_end(x, window) for x in lasts])


def test_the_input_is_left_as_it_was() -> None:
    lasts = np.array([1.0, 2.0, math.inf])
    window_end_rows(lasts, math.inf)
    assert lasts.tolist() == [1.0, 2.0, math.inf]


def _unit(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=8)
    return (v / np.linalg.norm(v)).astype(np.float32)


@pytest.mark.parametrize(("first", "window"), [(BIG - U, 86400.0 + 2.5 * U), (TINY, 1.0)],
                         ids=["past-2^31", "near-zero"])
@pytest.mark.parametrize("gap", [0, 1, -1], ids=["at-the-edge", "one-ulp-out", "one-ulp-in"])
def test_a_run_founds_and_joins_at_the_window_edge_as_the_pure_rule_does(
        first: float, window: float, gap: int) -> None:
    """Three Episodes with one vector: the second at the last float in the window of the
    first (or one ulp either side), the third just after it. The run places each as the
    pure rule, given the clusters as they stand, does (near 0, ``first + window`` rounds
    below the last float in the window: an end taken from it left the second out)."""
    v = _unit(3)
    edge = window_end(first, window)
    second = edge if gap == 0 else math.nextafter(edge, math.inf if gap > 0 else -math.inf)
    third = math.nextafter(second, math.inf)
    times = [first, second, third]
    kw = {"threshold": 0.5, "window_seconds": window, "rejoin_threshold": 0.9}
    out = UserClusters().assign_run(np.stack([v, v, v]), times, lambda i: f"cl_{i}", **kw)
    # the pure rule, one Episode after the other, on the clusters as they then stand
    spans: dict[str, list[float]] = {}
    for q, t in enumerate(times):
        cands = [Candidate(cid, fold(None, 0.0, 0, v)[0], lo, hi, False)
                 for cid, (lo, hi) in sorted(spans.items())]
        want = choose_cluster(v, t, cands, **kw)
        cid = want.cluster_id or f"cl_{q}"
        assert (out[q][0], out[q][2]) == (cid, want.reason)
        lo, hi = spans.get(cid, [t, t])
        spans[cid] = [min(lo, t), max(hi, t)]
    assert out[1][2] == (NEW if gap > 0 else JOIN)
