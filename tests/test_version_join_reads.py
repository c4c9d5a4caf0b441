"""The join of a fact's newer version reads a bounded number of member texts per placement
(``service.MAX_VERSION_READS``, latest first): each read is a full reading of two texts
(~1 ms), and a cluster near a heavy user's Episode can hold hundreds of members."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from everos_reflect.clustering import service
from everos_reflect.clustering.service import ClusterService
from everos_reflect.settings import ClusteringSettings
from tests.test_cluster_service import REF, FakeRuntime, snapshot
from tests.test_cluster_version_join import JOB, JOB_VEC, LET_GO, T0, at, index


def _job_then_lunches_then_let_go(rt: FakeRuntime, lunches: int) -> dict[str, str]:
    """The job, ``lunches`` later members of its cluster that say nothing of it, then the
    dismissal at cosine 0.40: the job is the member read last."""
    rows = [("ep_20260302_0001", JOB, T0, JOB_VEC)]
    rows += [(f"ep_20260302_{n + 2:04d}", f"Noor had lunch with Ana, week {n}.",
              T0 + timedelta(hours=n + 1), JOB_VEC) for n in range(lunches)]
    rows.append(("ep_20260306_0001", LET_GO, T0 + timedelta(days=4), at(0.40)))
    return index(rt, *rows)


@pytest.mark.parametrize(("lunches", "placed"), [
    (service.MAX_VERSION_READS - 1, "version"),  # the job is the last text it may read
    (service.MAX_VERSION_READS, "new"),  # read out before it reaches the job
])
def test_the_version_join_reads_at_most_its_bound_latest_first(
        tmp_path: Path, lunches: int, placed: str) -> None:
    rt = FakeRuntime(tmp_path, ClusteringSettings())
    out = _job_then_lunches_then_let_go(rt, lunches)
    assert out["ep_20260306_0001"] == placed
    online = snapshot(rt)
    ClusterService(rt).recluster(REF)  # rebuilt, the same bound gives the same clusters
    assert snapshot(rt)[0] == online[0]
    assert [m[:3] for m in snapshot(rt)[1]] == [m[:3] for m in online[1]]
