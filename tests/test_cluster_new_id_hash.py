"""A new cluster's id is hashed once.

A cluster is named after its first member (``online.cluster_id_for``: a sha256), and most
Episodes of a stream found one (one owner ×20: 7,364 clusters for 10,880 Episodes). The
free id was hashed, then hashed again to tell whether it was the first member's own (one
that is not is checked again before COMMIT: ``_Write.founders``); the search for it now
tells its attempt, and attempt 0 is the own id."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from everos_reflect.clustering import service
from everos_reflect.clustering.online import cluster_id_for
from everos_reflect.settings import ClusteringSettings
from tests.test_cluster_service import REF, FakeRuntime
from tests.test_cluster_version_join import DIM, T0, index


def _axis(n: int) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[n] = 1.0
    return v


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    hashed: list[tuple[Any, ...]] = []
    real = service.cluster_id_for

    def counting(*args: Any) -> str:
        hashed.append(args)
        return real(*args)

    monkeypatch.setattr(service, "cluster_id_for", counting)
    return hashed


def test_three_founders_cost_three_hashes(tmp_path: Path, monkeypatch) -> None:
    rt = FakeRuntime(tmp_path, ClusteringSettings())
    hashed = _counted(monkeypatch)
    out = index(rt, *[(f"ep_2026030{2 + n}_0001", f"Note {n} of the day.",
                       T0 + timedelta(days=n), _axis(1 + n)) for n in range(3)])
    assert list(out.values()) == ["new"] * 3
    assert len(hashed) == 3  # was 6: each id hashed again to compare with the own one
    assert sorted(c.cluster_id for c in service.ClusterService(rt).clusters(REF)) == sorted(
        cluster_id_for(REF.app, REF.project, REF.user_id, f"ep_2026030{2 + n}_0001")
        for n in range(3))


def test_an_id_taken_gives_the_next_attempt_and_is_checked_before_commit() -> None:
    own = cluster_id_for(REF.app, REF.project, REF.user_id, "ep_20260302_0001")
    again = cluster_id_for(REF.app, REF.project, REF.user_id, "ep_20260302_0001", 1)
    assert service._free_id({own}, REF, "ep_20260302_0001") == (again, 1)  # type: ignore[arg-type]
    assert service._free_id(set(), REF, "ep_20260302_0001") == (own, 0)  # type: ignore[arg-type]
    conn = SimpleNamespace(founders={}, named_elsewhere=lambda ref, cid: False)
    svc = object.__new__(service.ClusterService)
    assert svc._free_cluster_id(conn, REF, "ep_20260302_0001", {own}) == again  # type: ignore[arg-type]
    assert conn.founders == {REF: {again}}
    conn.founders.clear()
    assert svc._free_cluster_id(conn, REF, "ep_20260302_0001", set()) == own  # type: ignore[arg-type]
    assert conn.founders == {}
