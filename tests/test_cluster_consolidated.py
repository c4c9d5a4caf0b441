"""Consolidated clusters (rejoinable at any age) as history grows: the candidates scored per
Episode stay bounded by the pivot index, decisions stay those of the pure rule over every
cluster, and Reflection's bookkeeping does not reload a user's clusters from SQLite."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from everos_reflect.clustering.matrix import ClusterRow, UserClusters, _reach
from everos_reflect.clustering.online import (
    NEW,
    choose_cluster,
    normalize_rows,
    similarities,
)
from everos_reflect.clustering.service import ClusterService, _Write
from everos_reflect.index import db as dbmod
from everos_reflect.model import Kind, UserRef
from everos_reflect.settings import ClusteringSettings, Settings

DAY = 86400.0
DIM = 384
REF = UserRef.of("u_consolidated")
RULE = {"threshold": 0.55, "window_seconds": 7 * DAY, "rejoin_threshold": 0.8}


def _unit(rng: np.random.Generator, dim: int, near: np.ndarray | None = None,
          noise: float = 1.0) -> np.ndarray:
    v = rng.normal(size=dim) * noise + (0 if near is None else near)
    return (v / np.linalg.norm(v)).astype(np.float32)


def _history(rng: np.random.Generator, topics: list[np.ndarray], per_topic: int,
             dim: int = DIM) -> list[ClusterRow]:
    """``per_topic`` consolidated clusters around each topic, all long past (out of any
    window of the queries): only a rejoin can pick them."""
    rows = []
    for t, topic in enumerate(topics):
        for k in range(per_topic):
            c = _unit(rng, dim, topic * 4, 1.0 / dim ** 0.5)
            when = float(rng.uniform(0, 300)) * DAY
            rows.append(ClusterRow(f"cl_{t:06d}{k:06d}", c, 1.0, 3, when, when + DAY,
                                   f"ep_n{t}_{k}"))
    return rows


def _consolidated_scored(state: UserClusters, vector: np.ndarray, ts: float) -> int:
    """How many consolidated clusters ``choose`` scores for one Episode."""
    rows = state.candidate_positions(ts, RULE["window_seconds"], vector,
                                     RULE["rejoin_threshold"])
    return int(state._consolidated[rows].sum())


def test_rejoin_candidates_stay_bounded_as_consolidated_clusters_accumulate():
    """Three consolidated clusters per topic; the topics (and so the consolidated clusters)
    grow 16-fold. An Episode on one topic scores that topic's clusters, a number that does
    not move with the total, per Episode and for a whole run alike (the run scores only
    the pairs the index leaves for each Episode)."""
    rng = np.random.default_rng(5)
    topics = [_unit(rng, DIM) for _ in range(800)]
    queries = np.stack([_unit(rng, DIM, topics[i] * 4, 1.0 / DIM ** 0.5) for i in range(40)])
    scored, pairs = {}, {}
    for count in (50, 200, 800):
        state = UserClusters()
        for row in _history(rng, topics[:count], 3):
            state.put(row)
        assert len(state) == 3 * count
        scored[count] = max(_consolidated_scored(state, q, 400 * DAY) for q in queries)
        groups = state._groups
        rows, items = groups.pairs(groups.cosines(queries), _reach(0.8), state.pos)
        pairs[count] = int(np.bincount(items, minlength=len(queries)).max())
        # nothing the rule could rejoin was left out
        for i, q in enumerate(queries):
            sims = similarities(state._c32[: len(state)], q)
            assert set(np.flatnonzero(sims >= 0.8)) <= set(rows[items == i].tolist())
    assert scored[800] <= 6 and pairs[800] <= 6, (scored, pairs)
    assert scored[800] == scored[50] and pairs[800] == pairs[50]


def _pure_one_by_one(rows: dict[str, ClusterRow], vectors: np.ndarray,
                     ts: list[float]) -> list[tuple[str, float | None, str]]:
    """The reference: :func:`choose_cluster` over every cluster (no window set, no pivot
    index), then the fold, item after item."""
    out: list[tuple[str, float | None, str]] = []
    for i, (v, t) in enumerate(zip(vectors, ts, strict=True)):
        d = choose_cluster(v, t, [c.candidate() for c in rows.values()], **RULE)
        if d.cluster_id is None:
            row = ClusterRow.new(f"cl_run_{i:08d}", v, t)
            out.append((row.cluster_id, None, NEW))
        else:
            row = rows[d.cluster_id]
            row.add(v, t)
            out.append((row.cluster_id, d.similarity, d.reason))
        rows[row.cluster_id] = row
    return out


@pytest.mark.parametrize("shuffled", [False, True])
def test_a_run_among_many_consolidated_clusters_decides_as_the_pure_rule(shuffled):
    """Hundreds of consolidated clusters in tight groups (a topic that recurs leaves several
    next to each other), a run revisiting some of them long after: every rejoin, join and new
    cluster, every similarity and every centroid bit are those of the pure rule applied to
    every cluster one Episode after the other."""
    rng = np.random.default_rng(21 + shuffled)
    for trial in range(6):
        topics = [_unit(rng, DIM) for _ in range(60)]
        history = _history(rng, topics, 5)
        state = UserClusters()
        for row in history:
            state.put(row)
        reference = {r.cluster_id: ClusterRow(r.cluster_id, r.centroid.copy(), r.norm, r.count,
                                              r.first_ts, r.last_ts, r.consolidated_entry_id)
                     for r in history}
        run = 120
        ts = sorted(float(t) * DAY for t in rng.uniform(500, 530, size=run))
        if shuffled:
            rng.shuffle(ts)
        spread = [0.5, 1.0, 2.0, None]  # close to a topic (rejoins), looser, unrelated
        picks = [spread[int(rng.integers(4))] for _ in range(run)]
        vectors = normalize_rows(np.stack([
            _unit(rng, DIM) if s is None else
            _unit(rng, DIM, topics[int(rng.integers(60))] * 4, s / DIM ** 0.5)
            for s in picks]))
        want = _pure_one_by_one(reference, vectors, ts)
        got = state.assign_run(vectors, ts, lambda i: f"cl_run_{i:08d}", **RULE)
        assert got == want, trial
        assert {reason for _, _, reason in got} == {"rejoin", "join", "new"}, trial
        for cid, row in reference.items():
            mine = state.get(cid)
            assert (mine.centroid.tobytes(), mine.norm, mine.count, mine.first_ts,
                    mine.last_ts) == (row.centroid.tobytes(), row.norm, row.count,
                                      row.first_ts, row.last_ts), (trial, cid)


@pytest.mark.parametrize("dim", [384, 383, 7])
def test_the_gathered_pair_product_has_the_per_episode_bits(dim):
    """The run scores the pairs the index leaves with one ``einsum("ij,ij->i")`` over rows
    gathered pair by pair; each value must be what :func:`similarities` gives for that pair
    when one Episode is placed at a time (the test of a rejoin is ``>=``, to the bit)."""
    rng = np.random.default_rng(dim + 1)
    for _ in range(30):
        m, k = int(rng.integers(1, 40)), int(rng.integers(1, 30))
        centroids = np.stack([_unit(rng, dim) for _ in range(m)])
        vectors = normalize_rows(np.stack([_unit(rng, dim) for _ in range(k)]))
        rows = rng.integers(0, m, size=200)
        items = rng.integers(0, k, size=200)
        together = np.einsum("ij,ij->i", centroids[rows].astype(np.float64),
                             vectors.astype(np.float64)[items])
        for n, (r, q) in enumerate(zip(rows, items, strict=True)):
            assert together[n] == similarities(centroids, vectors[q])[r]


def test_the_pivot_bound_keeps_pairs_exactly_at_the_rejoin_threshold():
    """Vectors kept as unit only to within 1e-6 (as ``normalize`` keeps them) and a
    threshold set to the exact cosine of one pair: the pair is still left by the bound, and
    the run rejoins it; one ulp above the threshold, it does not."""
    rng = np.random.default_rng(8)
    for trial in range(60):
        topic = _unit(rng, DIM)
        rows = _history(rng, [topic, _unit(rng, DIM)], 6)
        state = UserClusters()
        for row in rows:
            state.put(row)
        scale = np.float32(1.0 + float(rng.uniform(-9e-7, 9e-7)))
        v = _unit(rng, DIM, topic * float(rng.uniform(1.0, 4.0)), 1.0 / DIM ** 0.5) * scale
        target = int(rng.integers(len(rows)))
        exact = float(similarities(rows[target].centroid[None, :], v)[0])
        groups = state._groups
        found, _ = groups.pairs(groups.cosines(v[None, :]), _reach(exact), state.pos)
        assert state.pos[rows[target].cluster_id] in found.tolist(), trial
        kw = {**RULE, "threshold": 1.5, "rejoin_threshold": exact}
        sims = similarities(state._c32[: len(state)], v)
        best = state.ids[int(np.argmax(sims))]
        placed = state.assign_run(v[None, :], [900 * DAY], lambda i: "cl_new", **kw)
        assert placed[0][2] == "rejoin" and placed[0][0] == best, trial
        state = UserClusters()
        for row in rows:
            state.put(row)
        kw["rejoin_threshold"] = float(np.nextafter(float(sims.max()), 2.0))
        assert state.assign_run(v[None, :], [900 * DAY], lambda i: "cl_new",
                                **kw)[0][2] == NEW, trial


def test_cosine_bounds_are_upper_bounds_of_the_true_cosines():
    """The float32 bound is never below the cosine between the directions (float64), for
    random, near-identical and opposite pairs, at several widths."""
    rng = np.random.default_rng(2)
    for dim in (384, 1536, 7):
        state = UserClusters()
        pivots = [_unit(rng, dim) for _ in range(20)]
        for n, p in enumerate(pivots):
            state.put(ClusterRow(f"cl_{n:012x}", p, 1.0, 1, 0.0, 0.0, f"ep_n{n}"))
        groups = state._groups
        vectors = [_unit(rng, dim) for _ in range(20)]
        vectors += [p + np.float32(1e-7) * _unit(rng, dim) for p in pivots]
        vectors += [-p for p in pivots]
        v = np.stack(vectors)
        bound = groups.cosines(v)
        v64 = v.astype(np.float64) / np.linalg.norm(v.astype(np.float64), axis=1)[:, None]
        true = v64 @ groups._matrix().T
        assert (bound >= true).all(), dim


# --------------------------------------------------------------------------- the service


class _Vectors:
    def __init__(self) -> None:
        self.data: dict[tuple[UserRef, str], np.ndarray] = {}

    def get_vectors(self, kind: Kind, ref: UserRef, ids: list[str]) -> dict[str, np.ndarray]:
        return {i: self.data[(ref, i)] for i in ids if (ref, i) in self.data}


class _Runtime:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.settings = Settings(clustering=ClusteringSettings(
            threshold=0.55, time_window_days=7.0, rejoin_threshold=0.8, member_threshold=0.0))
        self.vectors = _Vectors()
        self._conn: sqlite3.Connection | None = None

    def db(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = dbmod.connect(self.root)
        return self._conn


def _columns(state: UserClusters) -> dict[str, tuple]:
    return {cid: state.stored(cid) for cid in state.ids}


def test_reflection_bookkeeping_keeps_the_users_clusters_in_memory(tmp_path: Path,
                                                                    monkeypatch):
    """``mark_consolidated`` (one transaction per merge) changes a cluster through SQL and
    mirrors it in memory: the user's clusters are not reloaded from SQLite (before, every
    merge reloaded all of them, and the next batch walked the reloaded time heap), and what
    memory holds afterwards is what a fresh load from SQLite gives, column for column."""
    rt = _Runtime(tmp_path)
    svc = ClusterService(rt)
    rng = np.random.default_rng(4)
    topics = [_unit(rng, 32) for _ in range(6)]
    for n in range(60):
        v = _unit(rng, 32, topics[n % 6] * 4, 0.3)
        rt.vectors.data[(REF, f"ep_{n:04d}")] = v
        svc.assign(REF, f"ep_{n:04d}", v, n * DAY / 4)
    loads = []
    real = _Write._load

    def counted(self: _Write, ref: UserRef) -> UserClusters:
        loads.append(ref)
        return real(self, ref)

    monkeypatch.setattr(_Write, "_load", counted)
    merged = 0
    for info in svc.eligible_for_reflection(REF, 100):
        live = [m.entry_id for m in svc.members(info.cluster_id)]
        centre = np.mean([rt.vectors.data[(REF, e)] for e in live], axis=0)
        narrative = f"ep_n{merged:04d}"
        rt.vectors.data[(REF, narrative)] = centre
        svc.mark_consolidated(info.cluster_id, narrative, centre, live)
        merged += 1
    assert merged >= 4 and loads == []
    # a later Episode rejoins in memory what SQLite holds
    v = _unit(rng, 32, topics[0] * 4, 0.3)
    svc.assign(REF, "ep_late", v, 400 * DAY)
    assert loads == []
    cached = svc._cache.users[REF]
    fresh = ClusterService(_Runtime(tmp_path))
    with fresh._writing() as conn:
        reloaded = conn.state(REF)
    assert reloaded is not cached and _columns(reloaded) == _columns(cached)
    assert sorted(cached._groups.group_of) == sorted(reloaded._groups.group_of)


def test_a_change_by_another_writer_is_still_reloaded(tmp_path: Path):
    """Holding the state before a transaction's own SQL does not hide another connection's
    change: the version moved before the hold, so the hold itself reloads."""
    a, b = _Runtime(tmp_path), _Runtime(tmp_path)
    sa, sb = ClusterService(a), ClusterService(b)
    v = np.zeros(8, dtype=np.float32)
    v[0] = 1.0
    first = sa.assign(REF, "ep_a", v, 0.0)
    sa.assign(REF, "ep_b", v, DAY)
    a.vectors.data[(REF, "ep_n")] = v
    b.vectors.data[(REF, "ep_n")] = v
    sb.mark_consolidated(first.cluster_id, "ep_n", v, ["ep_a", "ep_b"])
    # a's cache still holds the cluster as unconsolidated; its next write must see b's change
    far = sa.assign(REF, "ep_c", v, 400 * DAY)
    assert (far.cluster_id, far.reason) == (first.cluster_id, "rejoin")
    assert sa.cluster(first.cluster_id).size == 2


def test_the_pivot_groups_forget_a_removed_row_and_follow_moved_ones():
    """Removing a row moves the last one into its place: the grouped positions follow."""
    rng = np.random.default_rng(9)
    topic = _unit(rng, DIM)
    state = UserClusters()
    rows = _history(rng, [topic], 8)
    for row in rows:
        state.put(row)
    q = _unit(rng, DIM, topic * 4, 1.0 / DIM ** 0.5)
    before = set(state.ids[p] for p in state.candidate_positions(900 * DAY, 7 * DAY, q, 0.8))
    state.remove(rows[2].cluster_id)
    after = set(state.ids[p] for p in state.candidate_positions(900 * DAY, 7 * DAY, q, 0.8))
    assert after == before - {rows[2].cluster_id}


def test_groups_emptied_by_drift_are_dropped_and_every_cluster_in_reach_is_still_found():
    """Consolidated clusters that drift away from their pivots leave their groups (empty
    ones included) behind; the next run drops the empty groups, shrinks the radii to the
    members' own angles, and the pairs the index leaves still hold every cluster a query
    may rejoin. The members' own angles prune more than their groups' radii do."""
    rng = np.random.default_rng(17)
    topics = [_unit(rng, DIM) for _ in range(40)]
    state = UserClusters()
    history = _history(rng, topics, 3)
    for row in history:
        state.put(row)
    groups = state._groups
    before = len(groups.pivots)
    # every cluster of the first ten topics moves onto another topic: their groups empty
    for row in history[:30]:
        moved = ClusterRow(row.cluster_id, _unit(rng, DIM, topics[39] * 4, 1.0 / DIM ** 0.5),
                           row.norm, row.count, row.first_ts, row.last_ts,
                           row.consolidated_entry_id)
        state.put(moved)
    assert groups.emptied > 0
    groups.tidy()  # what a run does first
    assert groups.emptied == 0 and len(groups.pivots) < before
    assert all(groups.members) and all(
        cid in groups.members[g] for cid, g in groups.group_of.items())
    assert all(r == max(groups.spread[c] for c in m)
               for r, m in zip(groups.radius, groups.members, strict=True))
    # a run rejoining and moving some of them keeps every radius an upper bound
    queries = normalize_rows(np.stack([_unit(rng, DIM, topics[i] * 4, 1.0 / DIM ** 0.5)
                                       for i in range(0, 40, 2)]))
    placed = state.assign_run(queries, [900 * DAY + n for n in range(len(queries))],
                              lambda i: f"cl_q{i:04d}", **RULE)
    assert "rejoin" in {reason for _, _, reason in placed}
    assert all(r >= max(groups.spread[c] for c in m)
               for r, m in zip(groups.radius, groups.members, strict=True) if m)
    probes = np.stack([_unit(rng, DIM, topics[i] * 4, 0.6 / DIM ** 0.5) for i in range(40)])
    rows, items = groups.pairs(groups.cosines(probes), _reach(0.8), state.pos)
    for i, q in enumerate(probes):
        sims = similarities(state._c32[: len(state)], q)
        rejoinable = set(np.flatnonzero((sims >= 0.8) & state._consolidated[: len(state)]))
        assert rejoinable <= set(rows[items == i].tolist()), i


def _at_angle(rng: np.random.Generator, pivot: np.ndarray, degrees: float) -> np.ndarray:
    """A unit vector at ``degrees`` from ``pivot``, in a random direction."""
    u = rng.normal(size=pivot.shape[0])
    u -= u @ pivot * pivot
    u /= np.linalg.norm(u)
    a = np.radians(degrees)
    return (np.cos(a) * pivot + np.sin(a) * u).astype(np.float32)


def test_members_own_angles_prune_what_the_group_radius_keeps():
    """A group whose radius is wide because of one member: a vector far enough from the
    pivot still reaches the group, but not its members close to the pivot (the vector's
    angle to the pivot less theirs exceeds the reach). The pairs left keep every cluster the
    vector may rejoin, and fewer than the group's whole membership."""
    rng = np.random.default_rng(23)
    pivot = _unit(rng, DIM)
    state = UserClusters()
    rows = [pivot, _at_angle(rng, pivot, 24.0)] + [_at_angle(rng, pivot, 3.0) for _ in range(6)]
    for n, c in enumerate(rows):
        state.put(ClusterRow(f"cl_{n:012x}", c, 1.0, 2, 0.0, DAY, f"ep_n{n}"))
    groups = state._groups
    assert len(groups.pivots) == 1
    probes = np.stack([_at_angle(rng, pivot.astype(np.float64), 58.0) for _ in range(20)])
    found, items = groups.pairs(groups.cosines(probes), _reach(0.8), state.pos)
    assert 0 < len(found) < len(rows) * len(probes)
    for i, q in enumerate(probes):
        sims = similarities(state._c32[: len(state)], q)
        assert set(np.flatnonzero(sims >= 0.8)) <= set(found[items == i].tolist()), i
