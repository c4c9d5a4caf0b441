"""Placing a run of Episodes at once (an index batch) gives what placing them one by one gives:
same clusters, ids, centroids bit for bit, same stored similarities."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from everos_reflect.clustering.matrix import ClusterRow, UserClusters
from everos_reflect.clustering.online import (
    NEW,
    fold,
    normalize,
    normalize_rows,
    similarities,
)
from everos_reflect.clustering.service import ClusterService
from everos_reflect.index import db as dbmod
from everos_reflect.model import Entry, Kind, UserRef, format_timestamp
from everos_reflect.settings import ClusteringSettings, Settings

DAY = 86400.0
DIM = 16


def _unit(rng: np.random.Generator, dim: int, near: np.ndarray | None = None,
          noise: float = 1.0) -> np.ndarray:
    v = rng.normal(size=dim) * noise + (0 if near is None else near)
    return (v / np.linalg.norm(v)).astype(np.float32)


def _state(rows: list[ClusterRow]) -> UserClusters:
    state = UserClusters()
    for r in rows:
        state.put(ClusterRow(r.cluster_id, r.centroid.copy(), r.norm, r.count, r.first_ts,
                             r.last_ts, r.consolidated_entry_id))
    return state


def _one_by_one(state: UserClusters, vectors: np.ndarray, ts: list[float],
                **kw: float) -> list[tuple[str, float | None, str]]:
    """The reference: choose, then fold the Episode in, item after item (the service's
    ``_assign`` without SQL)."""
    out: list[tuple[str, float | None, str]] = []
    for i, (v, t) in enumerate(zip(vectors, ts, strict=True)):
        d = state.choose(v, t, **kw)
        if d.cluster_id is None:
            row = ClusterRow.new(f"cl_run_{i:08d}", v, t)
            out.append((row.cluster_id, None, NEW))
        else:
            row = state.get(d.cluster_id)
            row.add(v, t)
            out.append((row.cluster_id, d.similarity, d.reason))
        state.put(row)
    return out


def _snapshot(state: UserClusters) -> dict[str, tuple]:
    return {r.cluster_id: (r.centroid.tobytes(), r.norm, r.count, r.first_ts, r.last_ts,
                           r.consolidated_entry_id) for r in state.rows()}


@settings(max_examples=120, deadline=None)
@given(seed=st.integers(0, 100_000), existing=st.integers(0, 40), run=st.integers(1, 60),
       shuffled=st.booleans(), member=st.sampled_from([0.0, 0.45]),
       threshold=st.sampled_from([0.5, 0.7, 0.85]))
def test_a_run_places_every_item_as_one_by_one_placement_would(seed, existing, run, shuffled,
                                                                member, threshold):
    """Existing clusters (some consolidated, some with identical centroids for ties), then a
    run in time order or shuffled (late arrivals): decisions, similarities and the resulting
    arrays are identical."""
    rng = np.random.default_rng(seed)
    topics = [_unit(rng, DIM) for _ in range(3)]
    rows = []
    for i in range(existing):
        t = float(rng.uniform(0, 60)) * DAY
        if rows and rng.random() < 0.15:  # same centroid as an earlier cluster: an exact tie
            centroid = rows[-1].centroid.copy()
        else:
            centroid = _unit(rng, DIM, topics[i % 3] * 3, 0.6)
        rows.append(ClusterRow(f"cl_{i:012x}", centroid, float(rng.uniform(0.6, 1.0)),
                               int(rng.integers(1, 5)), t, t + float(rng.uniform(0, 4)) * DAY,
                               f"ep_n{i}" if rng.random() < 0.3 else None))
    a, b = _state(rows), _state(rows)
    kw = {"threshold": threshold, "window_seconds": 7 * DAY, "rejoin_threshold": 0.8,
          "member_threshold": member}
    if rows and rng.random() < 0.5:  # a horizon already moved on, as after earlier batches
        probe, when = _unit(rng, DIM), float(rng.uniform(30, 60)) * DAY
        a.choose(probe, when, **kw)
        b.choose(probe, when, **kw)
    ts = sorted(float(t) * DAY for t in rng.uniform(40, 120, size=run))
    if shuffled:
        rng.shuffle(ts)
    raw = np.stack([_unit(rng, DIM, topics[int(rng.integers(3))] * 3, 0.6) for _ in range(run)])
    if run > 2 and rng.random() < 0.3:
        raw[-1] = raw[0]  # a repeated Episode
    vectors = normalize_rows(raw)
    assert all(np.array_equal(vectors[i], normalize(raw[i])) for i in range(run))

    want = _one_by_one(a, vectors, ts, **kw)
    got = b.assign_run(vectors, ts, lambda i: f"cl_run_{i:08d}", **kw)

    assert got == want
    assert _snapshot(b) == _snapshot(a)


def test_the_run_product_keeps_a_pair_exactly_at_the_threshold():
    """The run scores every pair in one product; a pair whose exact cosine (as one-by-one
    placement computes it) equals the threshold must still join, one ulp more must not."""
    rng = np.random.default_rng(7)
    for trial in range(200):
        c = _unit(rng, 384)
        v = _unit(rng, 384, c * float(rng.uniform(0.5, 3.0)), 1.0 / 384 ** 0.5)
        exact = float(similarities(c[None, :], v)[0])
        state = _state([ClusterRow("cl_000000000001", c, 1.0, 1, 0.0, 0.0)])
        kw = {"threshold": exact, "window_seconds": 7 * DAY, "rejoin_threshold": 1.5}
        placed = state.assign_run(v[None, :], [DAY], lambda i: "cl_new", **kw)
        assert placed == [("cl_000000000001", exact, "join")], trial
        above = _state([ClusterRow("cl_000000000001", c, 1.0, 1, 0.0, 0.0)])
        kw["threshold"] = float(np.nextafter(exact, 2.0))
        assert above.assign_run(v[None, :], [DAY], lambda i: "cl_new", **kw)[0][2] == NEW


@pytest.mark.parametrize("dim", [384, 383, 7])
def test_the_run_product_and_founding_rows_have_the_per_episode_bits(dim):
    """What the run computes for all its Episodes at once is what placing them one at a time
    computes, bit for bit, at the embedder's width and at odd widths (SIMD tails): the
    float64 einsum of the candidates against the run equals :func:`similarities` per
    Episode, and the lengths of the stacked matmul equal ``np.dot(v, v)`` per row (what
    ``fold`` stores as a new cluster's norm). A BLAS matrix product would not do."""
    rng = np.random.default_rng(dim)
    for _ in range(40):
        k, m = int(rng.integers(1, 40)), int(rng.integers(1, 40))
        centroids = np.stack([_unit(rng, dim) for _ in range(m)])
        vectors = normalize_rows(np.stack([_unit(rng, dim) for _ in range(k)]))
        v64 = vectors.astype(np.float64)
        together = np.einsum("ij,kj->ik", centroids.astype(np.float64), v64)
        for q in range(k):
            assert together[:, q].tobytes() == similarities(centroids, vectors[q]).tobytes()
        lengths = np.sqrt(np.matmul(v64[:, None, :], v64[:, :, None]).reshape(k))
        assert lengths.tolist() == [fold(None, 0.0, 0, v)[1] for v in vectors]
        assert (v64 / lengths[:, None]).astype(np.float32).tobytes() == b"".join(
            fold(None, 0.0, 0, v)[0].tobytes() for v in vectors)


@pytest.mark.parametrize("member", [0.0, 0.45])
def test_a_run_at_full_width_with_ties_at_the_threshold_places_as_one_by_one(member):
    """At 384 dimensions, a threshold set to the exact cosine of some (cluster, Episode) pair
    or of two Episodes of the run (a tie at the threshold, decided by ``>=``), identical
    centroids (ties between clusters, to the smaller id), late arrivals and consolidated
    clusters: the run gives the one-by-one decisions, similarities and arrays."""
    rng = np.random.default_rng(12 + int(member * 100))
    dim = 384
    for trial in range(60):
        topics = [_unit(rng, dim) for _ in range(3)]
        rows = []
        for i in range(int(rng.integers(0, 30))):
            t = float(rng.uniform(0, 60)) * DAY
            centroid = (rows[-1].centroid.copy() if rows and rng.random() < 0.15
                        else _unit(rng, dim, topics[i % 3] * 2, 1.0 / dim ** 0.5))
            rows.append(ClusterRow(f"cl_{i:012x}", centroid, float(rng.uniform(0.6, 1.0)),
                                   int(rng.integers(1, 5)), t,
                                   t + float(rng.uniform(0, 4)) * DAY,
                                   f"ep_n{i}" if rng.random() < 0.3 else None))
        run = int(rng.integers(1, 40))
        ts = sorted(float(t) * DAY for t in rng.uniform(40, 120, size=run))
        if rng.random() < 0.3:
            rng.shuffle(ts)
        vectors = normalize_rows(np.stack([
            _unit(rng, dim, topics[int(rng.integers(3))] * 2, 1.0 / dim ** 0.5)
            for _ in range(run)]))
        if rows and rng.random() < 0.5:
            threshold = float(similarities(rows[int(rng.integers(len(rows)))].centroid[None, :],
                                           vectors[int(rng.integers(run))])[0])
        elif run > 1:
            threshold = float(similarities(vectors[:1], vectors[int(rng.integers(1, run))])[0])
        else:
            threshold = 0.6
        kw = {"threshold": threshold, "window_seconds": 7 * DAY,
              "rejoin_threshold": max(threshold, 0.8), "member_threshold": member}
        a, b = _state(rows), _state(rows)
        want = _one_by_one(a, vectors, ts, **kw)
        got = b.assign_run(vectors, ts, lambda i: f"cl_run_{i:08d}", **kw)
        assert got == want, trial
        assert _snapshot(b) == _snapshot(a), trial


def test_normalize_rows_gives_normalize_bits_and_refuses_a_zero_vector():
    rng = np.random.default_rng(11)
    raw = rng.normal(size=(50, 384)).astype(np.float32)
    raw[:20] /= np.linalg.norm(raw[:20], axis=1, keepdims=True)  # unit already: kept as is
    raw[20:25] = raw[:5] * np.float32(1 + 9e-7)  # just inside normalize's 1e-6 tolerance
    raw[25:30] = raw[:5] * np.float32(1 + 2e-6)  # just outside it
    out = normalize_rows(raw)
    assert out.dtype == np.float32
    for i in range(len(raw)):
        assert out[i].tobytes() == normalize(raw[i]).tobytes(), i
    raw[3] = 0.0
    with pytest.raises(ValueError):
        normalize_rows(raw)


# --------------------------------------------------------------------------- the service


class _Vectors:
    def __init__(self) -> None:
        self.data: dict[tuple[UserRef, str], np.ndarray] = {}

    def get_vectors(self, kind, ref, ids):
        return {i: self.data[(ref, i)] for i in ids if (ref, i) in self.data}


class _Runtime:
    def __init__(self, root: Path, member: float) -> None:
        self.root = root
        self.settings = Settings(clustering=ClusteringSettings(
            threshold=0.55, time_window_days=7.0, rejoin_threshold=0.75,
            member_threshold=member))
        self.vectors = _Vectors()
        self._conn: sqlite3.Connection | None = None

    def db(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = dbmod.connect(self.root)
        return self._conn


def _episode(eid: str, owner: str, ts: float, text: str) -> Entry:
    when = datetime.fromtimestamp(ts, UTC)
    return Entry(eid, Kind.EPISODE, {"owner_id": owner, "timestamp": format_timestamp(when),
                                     "parent_type": "memcell"},
                 {"Subject": eid, "Content": text})


def _dump(rt: _Runtime) -> tuple[list, list]:
    conn = rt.db()
    clusters = conn.execute(
        "SELECT cluster_id, user_id, centroid, centroid_norm, member_count, first_ts, last_ts, "
        "consolidated_entry_id FROM clusters ORDER BY cluster_id").fetchall()
    members = conn.execute(
        "SELECT user_id, entry_id, cluster_id, ts, similarity, deprecated_by, text_hash "
        "FROM cluster_members ORDER BY user_id, entry_id").fetchall()
    return [tuple(r) for r in clusters], [tuple(r) for r in members]


@pytest.mark.parametrize("member", [0.0, 0.6])
def test_an_index_batch_stores_what_one_assign_per_episode_stores(tmp_path: Path, member):
    """Two users, three index batches: new Episodes, Episodes whose text changed (taken out
    and placed again, which splits the run), a consolidated cluster that later Episodes
    rejoin. The batch path and ``assign`` one Episode per transaction store the same rows."""
    rng = np.random.default_rng(5)
    topics = [_unit(rng, 32) for _ in range(4)]
    users = [UserRef.of("u_a"), UserRef.of("u_b")]
    batched, single = _Runtime(tmp_path / "b", member), _Runtime(tmp_path / "s", member)
    sb, ss = ClusterService(batched), ClusterService(single)
    vec: dict[str, np.ndarray] = {}
    entries: dict[tuple[UserRef, str], Entry] = {}
    n = 0

    def episodes(user: UserRef, count: int, start: float, span: float) -> list[Entry]:
        nonlocal n
        out = []
        for t in sorted(rng.uniform(start, start + span, size=count)):
            eid = f"ep_{n:06d}"
            n += 1
            vec[eid] = _unit(rng, 32, topics[int(rng.integers(4))] * 2.5, 0.5)
            out.append(_episode(eid, user.user_id, float(t) * DAY, f"text {eid}"))
        return out

    def index(batch: dict[UserRef, list[Entry]]) -> None:
        for user, es in batch.items():  # stored first, as the indexer stores them
            for rt in (batched, single):
                rt.vectors.data.update(((user, e.id), vec[e.id]) for e in es)
        with sb.batch():
            for user, es in batch.items():
                sb.on_entries_indexed(user, es, {e.id: vec[e.id] for e in es})
        for user, es in batch.items():
            for e in sorted(es, key=lambda e: (e.timestamp, e.id)):
                entries[(user, e.id)] = e
                ss.assign(user, e.id, vec[e.id], e.timestamp, text_hash=e.text_hash)

    index({u: episodes(u, 80, 0, 60) for u in users})
    assert _dump(batched) == _dump(single)

    changed: dict[UserRef, list[Entry]] = {}
    for u in users:
        old = [e for (user, _), e in entries.items() if user == u][::9]
        edits = []
        for e in old:
            vec[e.id] = _unit(rng, 32, topics[int(rng.integers(4))] * 2.5, 0.5)
            edits.append(_episode(e.id, u.user_id, e.timestamp.timestamp(), f"edited {e.id}"))
        changed[u] = edits + episodes(u, 40, 50, 30)
    index(changed)
    assert _dump(batched) == _dump(single)

    for rt, svc in ((batched, sb), (single, ss)):  # consolidate the largest cluster of u_a
        info = max(svc.clusters(users[0]), key=lambda c: (c.size, c.cluster_id))
        live = [m.entry_id for m in svc.members(info.cluster_id)]
        centre = np.mean([vec[i] for i in live], axis=0)
        centre = (centre / np.linalg.norm(centre)).astype(np.float32)
        rt.vectors.data[(users[0], "ep_narrative")] = centre
        svc.mark_consolidated(info.cluster_id, "ep_narrative", centre, live)
    index({u: episodes(u, 60, 200, 40) for u in users})  # long after: only rejoins reach back
    clusters, members = _dump(batched)
    assert (clusters, members) == _dump(single)
    assert any(c[7] is not None for c in clusters)


def test_stored_many_reads_what_stored_reads_for_each_cluster():
    """The batch writer's bulk read gives each cluster's columns exactly as the one-cluster
    read does (centroid bytes, norm, count, span, narrative), in the order asked."""
    rng = np.random.default_rng(7)
    rows = [ClusterRow(f"cl_{i:012x}", _unit(rng, DIM), float(rng.uniform(0.5, 1.0)),
                       int(rng.integers(1, 9)), float(i) * DAY, float(i + 2) * DAY,
                       f"ep_n{i}" if i % 3 == 0 else None) for i in range(12)]
    state = _state(rows)
    state.remove(rows[4].cluster_id)  # a hole filled by the last row: positions move
    ids = [r.cluster_id for r in reversed(rows) if r.cluster_id in state]
    assert state.stored_many(ids) == [state.stored(cid) for cid in ids]
    assert state.stored_many([]) == []
