"""The clusters the service holds in memory are counted as users come, go and change, not summed
over every user held at each transaction: that sum made one lone Episode's transaction cost
~1 µs per user held (4.4 ms with 4,000 users, bench/live_transaction.py), and a batch over
many users that much per user it loaded."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from everos_reflect.clustering import service as svc_mod
from everos_reflect.clustering.matrix import UserClusters
from everos_reflect.clustering.service import ClusterService
from everos_reflect.model import UserRef
from tests.test_cluster_matrix import DAY, _Runtime


def _vector(axis: int) -> np.ndarray:
    v = np.zeros(8, dtype=np.float32)
    v[axis % 8] = 1.0
    return v


def _exact(svc: ClusterService) -> None:
    cache = svc._cache
    assert cache.counted == {ref: len(st) for ref, st in cache.users.items()}
    assert cache.held == sum(cache.counted.values())


def test_a_lone_transaction_reads_the_size_of_no_user_it_does_not_touch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    svc = ClusterService(_Runtime(tmp_path))  # type: ignore[arg-type]
    others = [UserRef.of(f"u_{n}") for n in range(30)]
    for n, ref in enumerate(others):
        svc.assign(ref, f"ep_{n}", _vector(n), 1000.0)
    writer = UserRef.of("writer")
    svc.assign(writer, "ep_w0", _vector(0), 1000.0)
    read: list[UserClusters] = []
    size = UserClusters.__len__

    def counting(st: UserClusters) -> int:
        read.append(st)
        return size(st)

    monkeypatch.setattr(UserClusters, "__len__", counting)
    svc.assign(writer, "ep_w1", _vector(1), 1000.0 + DAY)  # a new cluster
    svc.assign(writer, "ep_w2", _vector(1), 1000.0 + 2 * DAY)  # joins it
    monkeypatch.undo()
    held = svc._cache.users
    assert {id(st) for st in read} <= {id(held[writer])}  # was: every user's, each time
    assert len(held) == 31
    _exact(svc)


def test_the_count_stays_exact_through_eviction_removal_and_a_failed_transaction(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(svc_mod, "MAX_CACHED_CLUSTERS", 5)
    svc = ClusterService(_Runtime(tmp_path))  # type: ignore[arg-type]
    users = [UserRef.of(f"u_{n}") for n in range(4)]
    for step in range(12):
        ref = users[step % 4]
        # two far apart in time: a new cluster each; then one joining the first
        svc.assign(ref, f"ep_{step}", _vector(step), 1000.0 + 30 * DAY * (step // 4))
        _exact(svc)
        # the bound holds at each COMMIT (but for the last user, kept whatever its size)
        assert svc._cache.held <= 5 or len(svc._cache.users) == 1
    assert len(svc._cache.users) < 4  # some were let go
    svc.on_entries_removed(users[3], ["ep_11"])  # its cluster goes with it
    _exact(svc)
    svc.assign(users[0], "ep_back", _vector(0), 1000.0)  # reloaded from SQLite
    _exact(svc)

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("disk full")

    with monkeypatch.context() as m:
        m.setattr(svc_mod._Write, "finish", boom)
        with pytest.raises(RuntimeError):
            svc.assign(users[0], "ep_lost", _vector(5), 1000.0 + 200 * DAY)
    assert users[0] not in svc._cache.users  # dropped with its count
    _exact(svc)
    assert [len(svc.clusters(u)) for u in users] == [3, 3, 3, 2]
