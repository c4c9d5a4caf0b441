"""A run in time order tells which Episodes a cluster it made may take as a fact's newer
version from its own exact scores (issue 15, session 46).

``UserClusters.assign_run`` scores a cluster it creates or changes right away, exactly,
against every later item of the run in its time window; those scores now also mark the items
some such cluster brings within reach of ``VERSION_FLOOR``. Before, each Episode that would
found a cluster gathered the clusters the run had changed and scored them again in float32
(``_may_reach``, ~5 CPU-µs a call, asked of two in three LoCoMo Episodes), with a slack twice
the exact test's: a cluster just under the floor had its Episode read for a change
(``tells_change``) although the join could take none. The clusters are the same
(tests/test_cluster_version_floor.py places runs near the floor one by one and together)."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from everos_reflect.clustering import service
from everos_reflect.clustering.online import VERSION_FLOOR
from everos_reflect.settings import ClusteringSettings
from tests.test_cluster_service import FakeRuntime
from tests.test_cluster_version_join import JOB, JOB_VEC, LET_GO, T0, at, index

JOB_ROW = ("ep_20260302_0001", JOB, T0, JOB_VEC)


@pytest.fixture
def read(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts the clustering reads for a change, in order (each still read for real)."""
    texts: list[str] = []
    real = service.tells_change
    monkeypatch.setattr(service, "tells_change", lambda text: texts.append(text) or real(text))
    return texts


@pytest.fixture
def rt(tmp_path) -> FakeRuntime:
    return FakeRuntime(tmp_path, ClusteringSettings())  # the shipped 0.55 / 0.6 / 7 days


def _later(cos: float) -> tuple[str, str, object, np.ndarray]:
    return ("ep_20260306_0001", LET_GO, T0 + timedelta(days=4), at(cos))


def test_a_cluster_of_the_run_just_under_the_floor_leaves_the_episode_unread(
        rt, read: list[str]) -> None:
    """1.5e-4 under the floor: the run's exact score says no cluster can take it (the
    float32 test's slack of 2e-4 said one might, and its text was read)."""
    out = index(rt, JOB_ROW, _later(VERSION_FLOOR - 1.5e-4))
    assert out == {"ep_20260302_0001": "new", "ep_20260306_0001": "new"}
    assert read == []


@pytest.mark.parametrize(("cos", "reason"), [
    (VERSION_FLOOR - 0.5e-4, "new"),  # within the exact test's slack: read, none takes it
    (VERSION_FLOOR, "version"),
    (0.40, "version"),
])
def test_a_cluster_of_the_run_at_the_floor_has_the_episode_read(
        rt, read: list[str], cos: float, reason: str) -> None:
    out = index(rt, JOB_ROW, _later(cos))
    assert out == {"ep_20260302_0001": "new", "ep_20260306_0001": reason}
    assert read == [LET_GO]


def test_a_cluster_the_run_joined_marks_by_its_new_centroid(rt, read: list[str]) -> None:
    """The job's cluster joined by a second Episode in the same run: the later Episode is
    scored against the centroid as it then stands (the first founder's row alone would put
    it under the floor)."""
    second = ("ep_20260302_0002", "Noor works at Arup in London.", T0 + timedelta(hours=1),
              at(0.8, axis=2))
    # 0.1 to the job (under the floor) and 0.6 to the second: ~0.37 to their centroid
    vec = np.zeros(16, dtype=np.float32)
    vec[0], vec[2] = 0.1, (0.6 - 0.1 * 0.8) / 0.6
    vec[3] = np.sqrt(1.0 - float(vec[0] ** 2 + vec[2] ** 2))
    later = ("ep_20260306_0001", LET_GO, T0 + timedelta(days=4), vec)
    out = index(rt, JOB_ROW, second, later)
    assert out["ep_20260302_0002"] != "new"  # joined the job's cluster
    assert out["ep_20260306_0001"] == "version"
    assert read == [LET_GO]
