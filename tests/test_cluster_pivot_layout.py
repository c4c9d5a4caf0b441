"""The pivot index's slot arrays and block scoring (``clustering/matrix.py``): the grouped
layout built from the slots stays what the membership sets, spreads and row positions say
through puts, drift, removals, compaction and runs, and through a service's deletes,
consolidations and reloads; the rejoin pairs it leaves (whole groups scored as one block,
small ones pair by pair) are exactly the pairs at or above the threshold; and a run whose
best far rejoin was changed earlier in the run takes the next one, as the pure rule does."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from everos_reflect.clustering import matrix
from everos_reflect.clustering.matrix import (
    BLOCK_MEMBERS,
    ClusterRow,
    UserClusters,
    one_blas_thread,
)
from everos_reflect.clustering.online import NEW, choose_cluster, normalize_rows, similarities
from everos_reflect.clustering.service import ClusterService
from everos_reflect.model import UserRef
from tests.test_cluster_consolidated import _Runtime  # the service's fake runtime, one copy

DAY = 86400.0
DIM = 64
REF = UserRef.of("u_layout")
RULE = {"threshold": 0.55, "window_seconds": 7 * DAY, "rejoin_threshold": 0.8}


def _unit(rng: np.random.Generator, near: np.ndarray | None = None,
          noise: float = 1.0, dim: int = DIM) -> np.ndarray:
    v = rng.normal(size=dim) * noise + (0 if near is None else near)
    return (v / np.linalg.norm(v)).astype(np.float32)


def _consolidated(rng: np.random.Generator, cid: str, topic: np.ndarray,
                  noise: float) -> ClusterRow:
    when = float(rng.uniform(0, 300)) * DAY
    return ClusterRow(cid, _unit(rng, topic * 4, noise, topic.size), 1.0, 3, when, when + DAY,
                      f"ep_n_{cid}")


def _assert_in_step(state: UserClusters) -> None:
    """The layout the index holds (updated in place) and one rebuilt from the slots both
    list, per group, exactly the group's members at their current rows with their current
    spreads; every consolidated cluster is a member of one group, and nothing else is."""
    groups = state._groups
    held = groups._positions()
    groups._layout = None
    rebuilt = groups._positions()
    consolidated = {cid for cid in state.ids if state.get(cid).consolidated_entry_id}
    assert set(groups.group_of) == consolidated
    for flat, spreads, starts, sizes in (held, rebuilt):
        assert sizes.tolist() == [len(m) for m in groups.members]
        for g, members in enumerate(groups.members):
            lo, hi = int(starts[g]), int(starts[g] + sizes[g])
            got = {state.ids[p]: s for p, s in zip(flat[lo:hi].tolist(),
                                                   spreads[lo:hi].tolist(), strict=True)}
            assert got == {cid: groups.spread[cid] for cid in members}, g


def _far_pairs(state: UserClusters, probes: np.ndarray, threshold: float
               ) -> set[tuple[str, int, float]]:
    """``_rejoin_pairs`` (no window rows) as (cluster id, probe, cosine)."""
    groups = state._groups
    v32 = normalize_rows(probes)
    rows, items, sims = state._rejoin_pairs(groups.cosines(v32), v32,
                                            v32.astype(np.float64), threshold,
                                            np.empty(0, dtype=np.int64))
    return {(state.ids[p], q, s) for p, q, s in zip(rows.tolist(), items.tolist(),
                                                    sims.tolist(), strict=True)}


def _brute(state: UserClusters, probes: np.ndarray, threshold: float
           ) -> set[tuple[str, int, float]]:
    """Every (consolidated cluster, probe) pair at or above ``threshold``, each scored as
    the one-by-one rule scores it."""
    out = set()
    n = len(state)
    for q, v in enumerate(normalize_rows(probes)):
        sims = similarities(state._c32[:n], v)
        for p in np.flatnonzero((sims >= threshold) & state._consolidated[:n]).tolist():
            out.add((state.ids[p], q, float(sims[p])))
    return out


def test_the_layout_follows_puts_drift_removals_compaction_and_runs():
    rng = np.random.default_rng(31)
    topics = [_unit(rng) for _ in range(12)]
    state = UserClusters()
    n = 0
    for step in range(40):
        action = rng.integers(0, 5)
        if action <= 1 or len(state) < 8:  # new consolidated and plain clusters
            for _ in range(int(rng.integers(1, 12))):
                row = _consolidated(rng, f"cl_{n:06d}", topics[int(rng.integers(0, 12))],
                                    0.1)
                if rng.random() < 0.3:
                    row.consolidated_entry_id = None
                state.put(row)
                n += 1
        elif action == 2:  # drift: a consolidated centroid moves to another topic
            cids = sorted(state._groups.group_of)
            for cid in rng.choice(cids, size=min(4, len(cids)), replace=False).tolist():
                row = state.get(cid)
                row.centroid = _unit(rng, topics[int(rng.integers(0, 12))] * 4, 0.15)
                state.put(row)
        elif action == 3:  # removals move the last row into the hole
            for cid in rng.choice(state.ids, size=min(3, len(state)), replace=False).tolist():
                state.remove(cid)
        else:  # a run that rejoins some, then the tidy a run starts with
            probes = normalize_rows(np.stack([_unit(rng, topics[int(rng.integers(0, 12))] * 4,
                                                    0.15) for _ in range(10)]))
            state.assign_run(probes, [900 * DAY + step * 10 + i for i in range(10)],
                             lambda i, s=step: f"cl_r{s:03d}_{i:03d}", **RULE)
        if rng.random() < 0.3:
            state._groups.compact()
        _assert_in_step(state)
    assert max(len(m) for m in state._groups.members) >= BLOCK_MEMBERS


def test_rejoin_pairs_are_exactly_those_at_the_threshold_in_big_and_small_groups():
    """Topics with many consolidated clusters (groups scored as one block) and scattered
    singletons (scored pair by pair): the pairs kept are exactly the pairs the one-by-one
    rule scores at or above the threshold, cosines bit for bit, also with the threshold set
    to one of those cosines (a tie kept by ``>=``)."""
    rng = np.random.default_rng(37)
    for _trial in range(4):
        topics = [_unit(rng) for _ in range(6)]
        state = UserClusters()
        n = 0
        for t, topic in enumerate(topics):
            for _ in range(4 + 10 * t):
                state.put(_consolidated(rng, f"cl_{n:06d}", topic, 0.1))
                n += 1
        for _ in range(30):
            state.put(_consolidated(rng, f"cl_{n:06d}", _unit(rng), 1.0))
            n += 1
        sizes = [len(m) for m in state._groups.members]
        assert max(sizes) >= BLOCK_MEMBERS and min(sizes) < BLOCK_MEMBERS
        probes = np.stack([_unit(rng, topics[i % 6] * 4, 0.12) for i in range(48)])
        for threshold in (0.8, 0.7):
            expected = _brute(state, probes, threshold)
            assert expected and _far_pairs(state, probes, threshold) == expected
        tie = sorted(s for _, _, s in _brute(state, probes, 0.8))[len(expected) // 3]
        assert _far_pairs(state, probes, tie) == _brute(state, probes, tie)


def _pure(rows: dict[str, ClusterRow], vectors: np.ndarray,
          ts: Sequence[float]) -> list[tuple[str, float | None, str]]:
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


def test_a_far_rejoin_changed_earlier_in_the_run_gives_way_to_the_next_best():
    """Two consolidated clusters long past: A at 10° from a topic, B at 20°. The first item
    (45° from the topic, 35° from A, beyond B's reach) rejoins A and pulls it to 27.5°, so
    the second item (on the topic) no longer prefers A; its score with A from the start of
    the run is stale, and it takes B, as the pure rule does. In random orientations."""
    rng = np.random.default_rng(41)

    def at(basis: np.ndarray, degrees: float, towards: int) -> np.ndarray:
        r = np.radians(degrees)
        return (np.cos(r) * basis[0] + np.sin(r) * basis[towards]).astype(np.float32)

    for _ in range(10):
        basis = np.linalg.qr(rng.normal(size=(DIM, DIM)))[0].T  # orthonormal rows
        rows = {"cl_a": ClusterRow("cl_a", at(basis, 10.0, 1), 1.0, 1, 0.0, DAY, "ep_na"),
                "cl_b": ClusterRow("cl_b", at(basis, 20.0, 2), 1.0, 1, 0.0, DAY, "ep_nb")}
        state = UserClusters()
        for row in rows.values():
            state.put(ClusterRow(row.cluster_id, row.centroid.copy(), row.norm, row.count,
                                 row.first_ts, row.last_ts, row.consolidated_entry_id))
        items = normalize_rows(np.stack([at(basis, 45.0, 1), at(basis, 0.0, 1)]))
        ts = [500 * DAY, 600 * DAY]  # the second out of A's window once A holds the first
        placed = state.assign_run(items, ts, lambda i: f"cl_run_{i:08d}", **RULE)
        assert placed == _pure(rows, items, ts)
        assert [(cid, reason) for cid, _, reason in placed] == [("cl_a", "rejoin"),
                                                                ("cl_b", "rejoin")]


def test_the_layout_stays_in_step_with_sqlite_through_deletes_consolidation_and_reload(
        tmp_path: Path):
    """A service's cached clusters after batches, merges and deleted Episodes (which delete
    clusters and move rows): the layout matches the membership, and the rejoin pairs of the
    cached state are those of a state freshly loaded from SQLite and of the brute force."""
    rt = _Runtime(tmp_path)
    svc = ClusterService(rt)
    rng = np.random.default_rng(43)
    topics = [_unit(rng) for _ in range(24)]
    n, dropped = 0, 0
    for round_ in range(6):
        with svc.batch():
            for _ in range(40):
                v = _unit(rng, topics[int(rng.integers(0, 24))] * 4, 0.3)
                eid = f"ep_{n:05d}"
                rt.vectors.data[(REF, eid)] = v
                svc.assign(REF, eid, v, round_ * 60 * DAY + n * DAY / 8)
                n += 1
        for k, info in enumerate(svc.eligible_for_reflection(REF, 100)):
            live = [m.entry_id for m in svc.members(info.cluster_id)]
            centre = np.mean([rt.vectors.data[(REF, e)] for e in live], axis=0)
            narrative = f"ep_n{round_:02d}_{k:03d}"
            rt.vectors.data[(REF, narrative)] = centre
            svc.mark_consolidated(info.cluster_id, narrative, centre, live)
        before = len(svc._cache.users[REF])
        gone = [f"ep_{i:05d}" for i in rng.choice(n, size=12, replace=False).tolist()]
        svc.on_entries_removed(REF, gone)
        cached = svc._cache.users[REF]
        dropped += before - len(cached)
        _assert_in_step(cached)
    assert len(cached._groups.group_of) >= 10 and dropped > 0
    fresh = ClusterService(_Runtime(tmp_path))
    with fresh._writing() as conn:
        reloaded = conn.state(REF)
    _assert_in_step(reloaded)
    probes = np.stack([_unit(rng, topics[i % 24] * 4, 0.3) for i in range(48)])
    for threshold in (0.8, 0.6):
        expected = _brute(cached, probes, threshold)
        assert expected
        assert _far_pairs(cached, probes, threshold) == expected
        assert _far_pairs(reloaded, probes, threshold) == expected


def _blas_threads() -> list[int]:
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


def test_one_blas_thread_holds_only_inside_its_block():
    """numpy's own OpenBLAS is found (threadpoolctl < 3.5 does not know numpy 2's
    ``scipy_openblas`` and would limit nothing, hence the pin) and held to one thread.
    (Holding the module's lock keeps any other thread's block out meanwhile.)"""
    with matrix._BLAS_LOCK, threadpool_limits(3, user_api="blas"):
        assert _blas_threads() and set(_blas_threads()) == {3}
        with one_blas_thread():
            assert set(_blas_threads()) == {1}
            with one_blas_thread():  # nested in the same thread
                assert set(_blas_threads()) == {1}
            assert set(_blas_threads()) == {1}
        assert set(_blas_threads()) == {3}


class _ProcessWideLimit:
    """A stand-in for threadpoolctl's controller over one process-wide thread count, as
    OpenBLAS keeps it: a limit saves the count it finds and sets 1 when made, and puts the
    saved count back on exit. Records which thread set what."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.calls: list[tuple[int, int]] = []  # (thread, count set)

    def _set(self, count: int) -> None:
        self.count = count
        self.calls.append((threading.get_ident(), count))

    def limit(self, *, limits: int, user_api: str) -> _ProcessWideLimit._Held:
        assert user_api == "blas"
        return self._Held(self, limits)

    class _Held:
        def __init__(self, owner: _ProcessWideLimit, limits: int) -> None:
            self.owner, self.saved = owner, owner.count
            owner._set(limits)

        def __enter__(self) -> None:
            return None

        def __exit__(self, *exc: object) -> None:
            self.owner._set(self.saved)


def test_blocks_in_two_threads_leave_blas_its_thread_count(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two threads' blocks that would overlap (the second entering while the first holds,
    the first leaving first) leave the count as it was, each thread putting back what it
    lowered: before, the second put back the 1 it found and BLAS stayed on one thread for
    the rest of the process (the count is process-wide; and OpenBLAS 0.3.31 may ignore a
    count set from another thread than the one that lowered it)."""
    fake = _ProcessWideLimit(3)
    monkeypatch.setattr(matrix, "_BLAS_CONTROLLER", fake)
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:
        with one_blas_thread():
            first_in.set()
            # the second thread now waits for this block; it used to enter it at once
            second_in.wait(timeout=0.25)
        first_out.set()

    def second() -> None:
        first_in.wait()
        with one_blas_thread():
            second_in.set()
            first_out.wait()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert second_in.is_set() and fake.count == 3
    (a, one), (a_back, three), (b, one_b), (b_back, three_b) = fake.calls
    assert (one, three, one_b, three_b) == (1, 3, 1, 3)
    assert a == a_back != b == b_back
