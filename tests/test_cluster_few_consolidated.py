"""With few consolidated clusters an Episode's rule scores them all, without the pivot index.

Bounding the consolidated clusters an Episode may rejoin (``_PivotGroups``) costs a BLAS
product and a handful of small numpy calls per Episode, more than scoring twenty rows
exactly: a rebuild of one owner ×20 after a Reflection run of 20 merges spent a third of
its plan there. Up to ``SCORE_ALL_CONSOLIDATED`` of them are all scored; the rows
this adds are ones the index leaves out, which cannot be chosen, so the decision is the one
the pure rule gives over every cluster, above and below the limit.
"""

from __future__ import annotations

import numpy as np
import pytest

from everos_reflect.clustering import matrix
from everos_reflect.clustering.matrix import SCORE_ALL_CONSOLIDATED, ClusterRow, UserClusters
from everos_reflect.clustering.online import choose_cluster
from tests.test_cluster_pivot_layout import DAY, RULE, _consolidated, _unit


def _state(rng: np.random.Generator, consolidated: int, recent: int,
           topics: np.ndarray) -> UserClusters:
    """``consolidated`` clusters spread over 300 days around a few topics, and ``recent``
    plain ones in the last week before day 400."""
    state = UserClusters()
    for n in range(consolidated):
        state.put(_consolidated(rng, f"cl_c{n:04d}", topics[n % len(topics)], 0.35))
    for n in range(recent):
        when = (393 + float(rng.uniform(0, 7))) * DAY
        state.put(ClusterRow(f"cl_r{n:04d}", _unit(rng, topics[n % len(topics)] * 3, 0.6),
                             1.0, 2, when, when + 3600.0, None))
    return state


def _decisions(state: UserClusters, probes: np.ndarray, ts: float) -> list[tuple]:
    out = []
    for v in probes:
        d = state.choose(v, ts, **RULE)
        out.append((d.cluster_id, d.reason, None if d.cluster_id is None else d.similarity))
    return out


def _pure(state: UserClusters, probes: np.ndarray, ts: float) -> list[tuple]:
    candidates = [state.get(cid).candidate() for cid in state.ids]
    out = []
    for v in probes:
        d = choose_cluster(v, ts, candidates, **RULE)
        out.append((d.cluster_id, d.reason, None if d.cluster_id is None else d.similarity))
    return out


@pytest.mark.parametrize("consolidated", [1, 20, SCORE_ALL_CONSOLIDATED,
                                          SCORE_ALL_CONSOLIDATED + 1, 200])
def test_the_decisions_are_the_pure_rules_above_and_below_the_limit(consolidated: int) -> None:
    rng = np.random.default_rng(4600 + consolidated)
    topics = np.stack([_unit(rng) for _ in range(6)])
    state = _state(rng, consolidated, 12, topics)
    olds = [state.get(cid).centroid for cid in state.ids if cid.startswith("cl_c")]
    probes = np.stack([_unit(rng, topics[n % 6] * 4, 0.4 + 0.1 * (n % 5)) for n in range(60)]
                      + [_unit(rng, olds[n % len(olds)] * 8, 0.3 + 0.1 * (n % 4))
                         for n in range(60)])
    got = _decisions(state, probes, 400 * DAY)
    assert got == _pure(state, probes, 400 * DAY)
    assert {reason for _, reason, _ in got} >= {"rejoin", "new"}


def test_under_the_limit_no_pivot_bound_is_computed(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(46)
    topics = np.stack([_unit(rng) for _ in range(4)])
    state = _state(rng, 20, 6, topics)
    probes = np.stack([_unit(rng, topics[n % 4] * 4, 0.5) for n in range(30)])
    expected = _pure(state, probes, 400 * DAY)

    def refused(self: object, vectors: np.ndarray) -> np.ndarray:
        raise AssertionError("the pivot bounds were computed for 20 consolidated clusters")

    monkeypatch.setattr(matrix._PivotGroups, "cosines", refused)
    assert _decisions(state, probes, 400 * DAY) == expected
