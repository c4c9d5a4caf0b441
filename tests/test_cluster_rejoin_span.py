"""The items a run re-scores after a consolidated join (``UserClusters._later_rejoin``): the
time window is found as a range of the ordered run by bisection, not item by item, and the
decision loop tests that range instead of ``in_window``. Both must keep exactly the items the
per-item tests keep, at the window's edges too (see tests/test_cluster_window_edge.py for why
the edges are where rounding bites)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from everos_reflect.clustering.matrix import ClusterRow, UserClusters, _cos_at, _reach
from everos_reflect.clustering.online import (
    JOIN,
    NEW,
    in_window,
    normalize,
    window_end,
    window_start,
)
from tests.test_cluster_batch import _one_by_one

DAY = 86400.0
DIM = 12
U = 2.0 ** -22  # the ulp of floats just below 2^31
BIG = 2.0 ** 31
RULE = {"threshold": 0.5, "window_seconds": 7 * DAY, "rejoin_threshold": 0.9}


def _unit(rng: np.random.Generator, near: np.ndarray | None = None,
          noise: float = 1.0) -> np.ndarray:
    v = rng.normal(size=DIM) * noise + (0 if near is None else near)
    return (v / np.linalg.norm(v)).astype(np.float32)


def _at(v: np.ndarray, cos: float, rng: np.random.Generator) -> np.ndarray:
    """A unit vector at cosine ``cos`` from the unit ``v``."""
    w = rng.normal(size=DIM)
    w -= np.dot(w, v) * v
    w /= np.linalg.norm(w)
    return normalize((cos * v + math.sqrt(1 - cos * cos) * w).astype(np.float32))


def _edge_times(rng: np.random.Generator, first: float, last: float, window: float,
                count: int) -> list[float]:
    """Sorted times around the window of ``[first, last]``: both edges, one float either
    side of each, and random ones in between and beyond."""
    lo, hi = window_start(first, window), window_end(last, window)
    picks = [lo, hi, math.nextafter(lo, -math.inf), math.nextafter(hi, math.inf)]
    picks += [float(t) for t in rng.uniform(lo - window, hi + window, size=count)]
    return sorted(picks)


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 100_000), base=st.sampled_from([0.0, 5 * DAY, BIG - 3 * DAY]),
       window=st.sampled_from([7 * DAY, 1.0, 86400.0 + 2.5 * U, 0.0, -1.0]),
       q=st.integers(0, 6))
def test_the_items_kept_and_the_window_span_are_those_of_the_item_by_item_tests(
        seed: int, base: float, window: float, q: int) -> None:
    """Against every later item of an ordered run: kept when ``in_window`` holds or when the
    pivot bound of the cluster's group reaches; the span is exactly the items ``in_window``
    holds for. A run out of order keeps the same items and has no span."""
    rng = np.random.default_rng(seed)
    topic = _unit(rng)
    state = UserClusters()
    for i in range(12):  # consolidated clusters in a few groups around one topic
        t = base + float(rng.uniform(0, 3)) * DAY
        state.put(ClusterRow(f"cl_{i:03d}", _unit(rng, topic * 4, 0.3), 1.0, 2, t, t,
                             f"ep_n{i}"))
    cid = f"cl_{int(rng.integers(12)):03d}"
    row = state.get(cid)
    first, last = row.first_ts, row.last_ts + float(rng.uniform(0, 2)) * DAY
    times = _edge_times(rng, first, last, max(window, 1.0), 16)
    # near enough that the bound keeps some items out of the window, not all of them
    vectors = np.stack([_unit(rng, topic * 4, 0.9) for _ in times])
    bounds = state._groups.cosines(vectors)
    reach = _reach(RULE["rejoin_threshold"])
    ts = np.asarray(times)
    q = min(q, len(times) - 2)

    later, span = state._later_rejoin(q, cid, first, last, times, ts, True, window, bounds,
                                      reach)

    g = state._groups.group_of[cid]
    limit = _cos_at(state._groups.spread[cid] + reach)
    inside = [k for k in range(q + 1, len(times)) if in_window(times[k], first, last, window)]
    want = [k for k in range(q + 1, len(times))
            if in_window(times[k], first, last, window) or bounds[k, g] >= limit]
    got = [] if later is None else np.arange(len(times))[later].tolist()
    assert got == want
    assert span is not None
    assert list(range(*span)) == inside
    unordered, none = state._later_rejoin(q, cid, first, last, times, ts, False, window,
                                          bounds, reach)
    assert none is None
    assert ([] if unordered is None else np.arange(len(times))[unordered].tolist()) == want


@pytest.mark.parametrize("base", [BIG - U, 1000.0 * DAY])
@pytest.mark.parametrize("beyond", [False, True], ids=["last-float", "one-beyond"])
def test_a_consolidated_cluster_joined_in_a_run_is_joined_up_to_its_window_edge(
        base: float, beyond: bool) -> None:
    """A consolidated cluster joined by a run's first item, then an item scoring between the
    join and rejoin thresholds: at the window's last float it joins the cluster, a float
    beyond it founds one, as the pure rule decides item by item (the run re-scores it
    through the window span)."""
    rng = np.random.default_rng(7)
    centre = _unit(rng)
    window = 86400.0 + 2.5 * U
    kw = {**RULE, "window_seconds": window}
    history = [ClusterRow("cl_cons", centre, 1.0, 3, base - 4 * DAY, base, "ep_n0")]
    history += [ClusterRow(f"cl_far{i}", _unit(rng), 1.0, 1, base - 30 * DAY,
                           base - 30 * DAY, f"ep_f{i}") for i in range(10)]
    a, b = UserClusters(), UserClusters()
    for r in history:
        a.put(ClusterRow(r.cluster_id, r.centroid.copy(), r.norm, r.count, r.first_ts,
                         r.last_ts, r.consolidated_entry_id))
        b.put(ClusterRow(r.cluster_id, r.centroid.copy(), r.norm, r.count, r.first_ts,
                         r.last_ts, r.consolidated_entry_id))
    end = window_end(base, window)
    times = [base, math.nextafter(end, math.inf) if beyond else end]
    vectors = np.stack([centre, _at(centre, 0.7, rng)])

    want = _one_by_one(a, vectors, times, **kw)
    got = b.assign_run(vectors, times, lambda i: f"cl_run_{i:08d}", **kw)

    assert [reason for _, _, reason in want] == [JOIN, NEW if beyond else JOIN]
    assert got == want
    assert b.get("cl_cons").centroid.tobytes() == a.get("cl_cons").centroid.tobytes()


@settings(max_examples=300, deadline=None)
@given(x=st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                   st.sampled_from([BIG - U, BIG, 2.0 ** -53, 1.0 + 2.0 ** -52, 0.0, -0.0])),
       w=st.one_of(st.floats(min_value=0.0, allow_infinity=True),
                   st.sampled_from([86400.0 + 2.5 * U, 1.0, 0.0, 7 * DAY, 5e-324])))
def test_the_inline_edge_check_answers_what_the_general_search_answers(x: float,
                                                                         w: float) -> None:
    """``window_end`` / ``window_start`` check the rounded guess inline before falling back
    to the general search (:func:`online._edge`); both paths give the same float."""
    from everos_reflect.clustering.online import _edge

    def same(a: float, b: float) -> bool:
        return (math.isnan(a) and math.isnan(b)) or a == b

    assert same(window_end(x, w), _edge(lambda t: t - x <= w, x + w, True))
    assert same(window_start(x, w), _edge(lambda t: x - t <= w, x - w, False))
