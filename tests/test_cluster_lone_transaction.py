"""One Episode placed in a transaction of its own (``ClusterService.assign``, a watcher
syncing one file) asks SQLite's ``PRAGMA data_version`` once (issue 15, session 46).

The cache of cluster states is current while no other connection has committed since this
one last wrote (:meth:`_Write._unchanged`): the transaction reads ``data_version`` to know,
and recorded it again before COMMIT (:meth:`_Write.finish`), a second statement for a value
that cannot have moved while the transaction holds the write lock. The few clusters such a
transaction writes are read out of memory by scalars (``UserClusters.stored_columns``), the
same bytes and values as the array path."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from everos_reflect.clustering.matrix import ClusterRow, UserClusters
from everos_reflect.clustering.service import ClusterService
from everos_reflect.settings import ClusteringSettings
from tests.test_cluster_service import REF, FakeRuntime
from tests.test_cluster_version_join import T0, at


@pytest.fixture
def rt(tmp_path) -> FakeRuntime:
    return FakeRuntime(tmp_path, ClusteringSettings())


def test_a_lone_transaction_reads_data_version_once(rt: FakeRuntime) -> None:
    svc = ClusterService(rt)
    svc.assign(REF, "ep_20260302_0001", at(1.0), T0)  # the user's state is now cached
    statements: list[str] = []
    rt.db().set_trace_callback(statements.append)
    svc.assign(REF, "ep_20260302_0002", at(0.9), T0 + timedelta(hours=1))
    rt.db().set_trace_callback(None)
    assert sum("data_version" in s for s in statements) == 1
    # the cache was current: the user's clusters were not read again
    assert not [s for s in statements if s.startswith("SELECT cluster_id, centroid")]


def test_another_connection_committing_between_lone_transactions_is_seen(
        rt: FakeRuntime) -> None:
    """The one read still tells another writer's commit: its cluster is in memory next."""
    svc = ClusterService(rt)
    svc.assign(REF, "ep_20260302_0001", at(1.0), T0)
    other = FakeRuntime(rt.root, rt.settings.clustering)
    ClusterService(other).assign(REF, "ep_20260302_0002", at(0.0, axis=2), T0)
    decision = svc.assign(REF, "ep_20260302_0003", at(0.0, axis=2), T0 + timedelta(hours=1))
    assert decision.reason != "new"  # joined the cluster the other connection made


def test_stored_columns_of_a_few_clusters_match_the_array_path() -> None:
    st = UserClusters()
    rng = np.random.default_rng(0)
    ids = [f"cl_{n:012x}" for n in range(10)]
    for n, cid in enumerate(ids):
        vec = rng.normal(size=16).astype(np.float32)
        st.put(ClusterRow.new(cid, vec / np.linalg.norm(vec), 1000.0 + n,
                              "ep_n" if n == 2 else None))
    for k in range(1, 5):
        few = ids[k - 1::-1]  # up to four, by scalars
        many = st.stored_columns([*few, *ids[5:]])  # more than four, by arrays
        assert list(st.stored_columns(few)) == [column[:k] for column in many]
