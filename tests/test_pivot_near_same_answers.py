"""The pivot index's scorer of rejoin pairs (``_PivotGroups.near`` and
``UserClusters._rejoin_pairs`` on it) against a brute-force scorer of every pair.

``near`` bounds the (item, consolidated cluster) pairs by their groups' pivots, scores
groups of ``BLOCK_MEMBERS`` or more whole (one float32 block product each) and smaller ones
pair by pair behind each member's own angle test, and keeps those whose float32 product
reaches a floor set below the rejoin threshold by the product's error bound;
``_rejoin_pairs`` scores what is left exactly. A change to either (a tighter bound, another
layout, another product) must leave the answer a brute force gives: every pair whose exact
product (the per-pair kernel :meth:`UserClusters.choose` uses) reaches the threshold, with
those bits, and no other. Checked on random groups of 1, 7, 8, 9 and hundreds of members
(both sides of the block size), with tied pairs (members with the same centroid, an item
equal to a member, items the same vector) and with items placed right at the threshold."""

from __future__ import annotations

import math

import numpy as np
import pytest

from everos_reflect.clustering import matrix
from everos_reflect.clustering.matrix import ClusterRow, UserClusters, _reach, one_blas_thread

DIM = 384
THRESHOLD = 0.8
#: members per group: singletons, a group one short of a block, the block's edge, hundreds
SIZES = (1, 1, 1, 2, 7, 8, 9, 300)


def _unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


def _toward(rng: np.random.Generator, base: np.ndarray, cos: float) -> np.ndarray:
    """A unit vector at cosine ~``cos`` from the unit ``base`` (a random orthogonal turn)."""
    b = base.astype(np.float64)
    ortho = rng.normal(size=b.size)
    ortho -= ortho.dot(b) * b
    ortho /= np.linalg.norm(ortho)
    return _unit(cos * b + math.sqrt(max(0.0, 1.0 - cos * cos)) * ortho)


def _state(rng: np.random.Generator) -> tuple[UserClusters, list[np.ndarray]]:
    """Consolidated clusters in groups of :data:`SIZES`: each group's first member founds
    its pivot, the others lie within the group's cosine of it (pivots are random, so
    nearly orthogonal: each member joins its own group). Two members of the big group and
    two of the group of 2 share one centroid (tied scores)."""
    state = UserClusters()
    pivots: list[np.ndarray] = []
    n = 0
    for g, size in enumerate(SIZES):
        pivot = _unit(rng.normal(size=DIM))
        pivots.append(pivot)
        centroids = [pivot] + [_toward(rng, pivot, float(rng.uniform(0.91, 0.995)))
                               for _ in range(size - 1)]
        if size >= 2:
            centroids[-1] = centroids[-2].copy()  # a tie: the same centroid twice
        for c in centroids:
            state.put(ClusterRow(f"cl_{n:06d}", c, 1.0, 3, 0.0, 86400.0, f"ep_{g}_{n}"))
            n += 1
    return state, pivots


def _items(rng: np.random.Generator, state: UserClusters, pivots: list[np.ndarray]
           ) -> np.ndarray:
    """Items around every group: near a member at cosines on both sides of the threshold,
    one equal to a member, one twice (the same vector), some far from everything."""
    c32 = state._c32[:len(state)]
    starts = np.cumsum((0, *SIZES[:-1]))
    members = np.concatenate([start + rng.choice(size, size=min(size, 6), replace=False)
                              for start, size in zip(starts, SIZES, strict=True)])
    out = [_toward(rng, c32[m], float(rng.uniform(0.7, 0.95))) for m in members]
    out += [_toward(rng, p, float(rng.uniform(0.6, 0.9))) for p in pivots]
    out += [c32[int(members[0])].copy(), out[3].copy()]
    out += [_unit(rng.normal(size=DIM)) for _ in range(10)]
    # placed at the threshold itself: float32 rounding puts some just above, some below
    out += [_toward(rng, c32[int(m)], THRESHOLD) for m in members[:20]]
    return np.stack(out)


def _exact(c32: np.ndarray, v64: np.ndarray) -> np.ndarray:
    """Every (item, cluster) pair's product by the per-pair kernel (``einsum("ij,ij->i")``
    over one pair at a time: the bits :meth:`UserClusters.choose` computes)."""
    out = np.empty((v64.shape[0], c32.shape[0]))
    rows64 = c32.astype(np.float64)
    for p in range(c32.shape[0]):
        out[:, p] = np.einsum("ij,ij->i", np.broadcast_to(rows64[p], v64.shape), v64)
    return out


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_near_and_rejoin_pairs_give_the_brute_force_answer(seed: int) -> None:
    rng = np.random.default_rng(seed)
    state, pivots = _state(rng)
    groups = state._groups
    _, _, _, sizes = groups._positions()
    assert sorted(sizes.tolist()) == sorted(SIZES)  # the groups formed as built
    assert groups.radius and max(groups.radius) > 0.0
    v32 = np.ascontiguousarray(_items(rng, state, pivots))
    v64 = v32.astype(np.float64)
    c32 = state._c32[:len(state)]
    exact = _exact(c32, v64)
    want = {(int(p), int(i)) for i, p in zip(*(exact >= THRESHOLD).nonzero(), strict=True)}
    assert len(want) > 50  # the items reach many pairs, in every kind of group
    reached_sizes = {int(sizes[groups.group_of[state.ids[p]]]) for p, _ in want}
    assert {1, 7, 8, 9, 300} <= reached_sizes
    # both of near's paths run: groups scored whole (8 and more) and pair by pair
    assert min(s for s in reached_sizes if s >= matrix.BLOCK_MEMBERS) == 8
    assert max(s for s in reached_sizes if s < matrix.BLOCK_MEMBERS) == 7

    bounds = groups.cosines(v32)
    slack = 2.0 * (DIM + 2) * 2.0 ** -24
    with one_blas_thread():
        rows, items = groups.near(bounds, v32, state._c32, _reach(THRESHOLD),
                                  THRESHOLD - slack)
    got = list(zip(rows.tolist(), items.tolist(), strict=True))
    assert len(got) == len(set(got))  # no pair twice
    assert want <= set(got)  # nothing that reaches the threshold is left out
    # and nothing far below the floor is kept (the float32 filter did its work)
    assert all(exact[i, p] >= THRESHOLD - 4 * slack for p, i in got)

    rows, items, sims = state._rejoin_pairs(bounds, v32, v64, THRESHOLD,
                                            np.empty(0, dtype=np.int64))
    found = {(int(p), int(i)): s for p, i, s in zip(rows.tolist(), items.tolist(),
                                                     sims.tolist(), strict=True)}
    assert set(found) == want and len(found) == rows.size
    for (p, i), s in found.items():
        assert s == exact[i, p]  # the same bits as the per-pair kernel
    # tied pairs are among them (two members with one centroid, found by the same item)
    tied = [(p, i) for p, i in want
            if ((c32 == c32[p]).all(axis=1).sum() > 1)]
    assert tied

