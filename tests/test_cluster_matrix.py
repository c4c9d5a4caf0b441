"""The in-memory centroid matrix: same decisions as the pure rule, kept in step with SQLite."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from everos_reflect.clustering.matrix import ClusterRow, UserClusters
from everos_reflect.clustering.online import choose_cluster, similarities
from everos_reflect.clustering.service import ClusterService
from everos_reflect.index import db as dbmod
from everos_reflect.model import UserRef
from everos_reflect.settings import ClusteringSettings, Settings

DAY = 86400.0
REF = UserRef.of("u_matrix")


def _unit(rng: np.random.Generator, dim: int, near: np.ndarray | None = None,
          noise: float = 1.0) -> np.ndarray:
    v = rng.normal(size=dim) * noise + (0 if near is None else near)
    return (v / np.linalg.norm(v)).astype(np.float32)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(0, 60), queries=st.integers(1, 25))
def test_matrix_decides_exactly_like_the_pure_rule_over_every_cluster(seed, n, queries):
    """Window set, horizon, late arrivals and pivot-group pruning never change the answer."""
    rng = np.random.default_rng(seed)
    dim = 16
    topics = [_unit(rng, dim) for _ in range(4)]
    state = UserClusters()
    rows: dict[str, ClusterRow] = {}
    for i in range(n):
        t = float(rng.uniform(0, 90)) * DAY
        c = ClusterRow(f"cl_{i:012x}", _unit(rng, dim, topics[i % 4] * 3, 0.5), 1.0, 1,
                       t, t + float(rng.uniform(0, 5)) * DAY,
                       f"ep_n{i}" if rng.random() < 0.4 else None)
        rows[c.cluster_id] = c
        state.put(c)
    if n and rng.random() < 0.5:  # some removals and updates after the fact
        for cid in rng.choice(sorted(rows), size=min(5, n), replace=False):
            if rng.random() < 0.5:
                state.remove(str(cid))
                del rows[str(cid)]
            else:
                c = rows[str(cid)]
                c.add(_unit(rng, dim, topics[0] * 3, 0.5), c.last_ts + DAY)
                state.put(c)
    for _ in range(queries):
        ts = float(rng.uniform(0, 100)) * DAY  # out of order on purpose
        v = _unit(rng, dim, topics[int(rng.integers(4))] * 3, 0.5)
        kw = {"threshold": 0.6, "window_seconds": 7 * DAY, "rejoin_threshold": 0.8}
        want = choose_cluster(v, ts, [c.candidate() for c in rows.values()], **kw)
        got = state.choose(v, ts, **kw)
        assert (got.cluster_id, got.reason) == (want.cluster_id, want.reason)
        if want.cluster_id is not None:
            assert got.similarity == want.similarity


def test_similarities_do_not_depend_on_where_a_row_sits():
    rng = np.random.default_rng(3)
    m = rng.normal(size=(97, 384)).astype(np.float32)
    v = rng.normal(size=384).astype(np.float32)
    perm = rng.permutation(97)
    assert np.array_equal(similarities(m, v)[perm], similarities(m[perm], v))
    assert all(similarities(m[i:i + 1], v)[0] == similarities(m, v)[i] for i in range(97))


class _Vectors:
    def __init__(self) -> None:
        self.data: dict[tuple[UserRef, str], np.ndarray] = {}

    def get_vectors(self, kind, ref, ids):
        return {i: self.data[(ref, i)] for i in ids if (ref, i) in self.data}


class _Runtime:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.settings = Settings(clustering=ClusteringSettings(threshold=0.5,
                                                               time_window_days=7.0,
                                                               rejoin_threshold=0.7,
                                                               member_threshold=0.0))
        self.vectors = _Vectors()
        self._conn: sqlite3.Connection | None = None

    def db(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = dbmod.connect(self.root)
        return self._conn


def test_a_change_made_through_another_connection_is_seen(tmp_path: Path):
    """Two runtimes on one root (the daemon and a CLI command): each reloads a user whose
    ``cluster_versions`` row moved, so neither decides on stale centroids."""
    a, b = _Runtime(tmp_path), _Runtime(tmp_path)
    sa, sb = ClusterService(a), ClusterService(b)
    v = np.zeros(8, dtype=np.float32)
    v[0] = 1.0
    first = sa.assign(REF, "ep_a", v, 1000.0)
    assert first.reason == "new"
    assert sb.assign(REF, "ep_b", v, 1000.0 + DAY).cluster_id == first.cluster_id
    # b changed the cluster behind a's back; a must see it (count 2) and join, not fork
    third = sa.assign(REF, "ep_c", v, 1000.0 + 2 * DAY)
    assert third.cluster_id == first.cluster_id
    row = a.db().execute("SELECT member_count FROM clusters").fetchone()
    assert row[0] == 3
    # a raw SQL edit (another tool) is picked up as well
    with dbmod.transaction(b.db()) as conn:
        conn.execute("DELETE FROM clusters")
    assert sa.assign(REF, "ep_d", v, 1000.0 + 3 * DAY).reason == "new"


def test_a_failed_transaction_leaves_memory_as_sqlite_has_it(tmp_path: Path, monkeypatch):
    rt = _Runtime(tmp_path)
    svc = ClusterService(rt)
    v = np.zeros(8, dtype=np.float32)
    v[0] = 1.0
    first = svc.assign(REF, "ep_a", v, 1000.0)

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr("everos_reflect.clustering.service._Write.finish", boom)
    with pytest.raises(RuntimeError):
        svc.assign(REF, "ep_b", v, 1000.0 + DAY)  # joined in memory, then rolled back
    monkeypatch.undo()
    assert svc.clusters(REF)[0].size == 1
    again = svc.assign(REF, "ep_b", v, 1000.0 + DAY)
    assert again.cluster_id == first.cluster_id
    assert svc.clusters(REF)[0].size == 2


def test_the_cache_drops_least_recently_used_users_beyond_its_cap(tmp_path: Path, monkeypatch):
    monkeypatch.setattr("everos_reflect.clustering.service.MAX_CACHED_CLUSTERS", 2)
    rt = _Runtime(tmp_path)
    svc = ClusterService(rt)
    users = [UserRef.of(f"u_{n}") for n in range(3)]
    v = np.zeros(8, dtype=np.float32)
    v[0] = 1.0
    first = {u: svc.assign(u, f"ep_{u.user_id}_a", v, 1000.0).cluster_id for u in users}
    cached = svc._cache.users
    assert len(cached) == 2 and users[0] not in cached  # the oldest went first
    for u in users:  # an evicted user is reloaded from SQLite and keeps clustering the same
        assert svc.assign(u, f"ep_{u.user_id}_b", v, 1000.0 + DAY).cluster_id == first[u]
    assert [c.size for u in users for c in svc.clusters(u)] == [2, 2, 2]


def _count_version_look_ups(monkeypatch) -> list[UserRef]:
    """The users whose ``cluster_versions`` row the service reads from now on, in order."""
    from everos_reflect.clustering import service as svc_mod

    looked: list[UserRef] = []
    real = svc_mod._version

    def counting(conn, ref):
        looked.append(ref)
        return real(conn, ref)

    monkeypatch.setattr(svc_mod, "_version", counting)
    return looked


def test_a_quiet_database_skips_the_version_look_up_and_a_write_does_not(tmp_path: Path,
                                                                            monkeypatch):
    """Once this connection has committed and nobody else has since (``PRAGMA
    data_version`` unchanged), a cached user is trusted without reading its version row;
    another connection's commit, or SQL this transaction ran first, sends it back to the
    look-up (and the reload it may bring)."""
    rt, other = _Runtime(tmp_path), _Runtime(tmp_path)
    svc = ClusterService(rt)
    v = np.zeros(8, dtype=np.float32)
    v[0] = 1.0
    first = svc.assign(REF, "ep_a", v, 1000.0)
    looked = _count_version_look_ups(monkeypatch)
    assert svc.assign(REF, "ep_b", v, 1000.0 + DAY).cluster_id == first.cluster_id
    assert looked == [REF]  # quiet: only finish read the version, the state was trusted
    # another connection commits: looked up again, and its change is seen
    with dbmod.transaction(other.db()) as conn:
        conn.execute("UPDATE clusters SET last_ts = last_ts - 30 * 86400, "
                     "first_ts = first_ts - 30 * 86400")
    assert svc.assign(REF, "ep_c", v, 1000.0 + 2 * DAY).reason == "new"  # out of window now
    assert looked == [REF, REF, REF]  # state and finish
    # SQL run in this transaction before the state is read: looked up and reloaded too
    looked.clear()
    with svc.batch():
        session = svc._session
        assert session is not None
        session.execute("UPDATE clusters SET member_count = 40 WHERE cluster_id = ?",
                        (first.cluster_id,))
        assert session.state(REF).get(first.cluster_id).count == 40
    assert looked == [REF, REF]  # state and finish


def test_the_same_connections_own_writes_between_transactions_send_it_to_the_look_up(
        tmp_path: Path, monkeypatch):
    """``PRAGMA data_version`` counts other connections only: rows this connection changes
    outside the service (``reindex`` empties the cluster tables so) must still reload the
    cached state, or the next assignment joins a cluster that no longer exists."""
    rt = _Runtime(tmp_path)
    svc = ClusterService(rt)
    v = np.zeros(8, dtype=np.float32)
    v[0] = 1.0
    first = svc.assign(REF, "ep_a", v, 1000.0)
    looked = _count_version_look_ups(monkeypatch)
    with dbmod.transaction(rt.db()) as conn:  # the same connection, outside the service
        conn.execute("DELETE FROM cluster_members")
        conn.execute("DELETE FROM clusters")
    second = svc.assign(REF, "ep_b", v, 1000.0 + DAY)
    assert looked[0] == REF  # not trusted: looked up (and reloaded)
    assert second.reason == "new" and second.cluster_id != first.cluster_id
    assert [c.size for c in svc.clusters(REF)] == [1]
