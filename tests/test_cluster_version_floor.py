"""An Episode that would found a cluster is read for a change only when some cluster in its
time window scores at least the version floor against it (issue 15, session 41).

The join of a fact's newer version (``online.choose_version``) takes no cluster under
``VERSION_FLOOR`` or out of the window, so for an Episode with none such its text cannot change
where it goes; reading it for a change (``tells_change``) was ~20 CPU-µs of the ~60 a LoCoMo
Episode cost, and three in four LoCoMo Episodes that found a cluster have no cluster that near.
``UserClusters.assign_run`` now asks ``version_of`` only when one may be: by the run's scores
of the clusters as they stood before it, and a float32 product with the clusters the run has
created or changed so far. The clusters are the same (tests/test_version_join_cost.py places
runs with changes at cosines 0.2-0.6 one by one and as ``recluster``)."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from everos_reflect.clustering import matrix, service
from everos_reflect.clustering.online import VERSION_FLOOR
from everos_reflect.clustering.service import ClusterService
from everos_reflect.settings import ClusteringSettings
from tests.test_cluster_service import REF, FakeRuntime, episode, snapshot, store_rows
from tests.test_cluster_version_join import FLIGHTS, JOB, JOB_VEC, LET_GO, T0, at, index


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


JOB_ROW = ("ep_20260302_0001", JOB, T0, JOB_VEC)


@pytest.mark.parametrize("together", [True, False], ids=["one-run", "two-batches"])
@pytest.mark.parametrize(("vec", "days"), [
    (at(VERSION_FLOOR - 0.01), 4),  # under the floor
    (at(0.0), 1),  # nothing in common
    (at(0.40), 8),  # near enough, out of the time window
])
def test_an_episode_with_no_cluster_near_enough_for_a_version_is_not_read_for_a_change(
        rt, read: list[str], together: bool, vec: np.ndarray, days: int) -> None:
    later = ("ep_20260320_0001", LET_GO, T0 + timedelta(days=days), vec)
    # the job's cluster made earlier in the same run, or there before the run
    out = index(rt, JOB_ROW, later) if together else index(rt, JOB_ROW) | index(rt, later)
    assert out == {"ep_20260302_0001": "new", "ep_20260320_0001": "new"}
    assert read == []  # the job founded the first cluster: nothing near it either


@pytest.mark.parametrize("together", [True, False], ids=["one-run", "two-batches"])
@pytest.mark.parametrize("cos", [VERSION_FLOOR, 0.40])
def test_an_episode_with_a_cluster_near_enough_is_read_and_joins_as_the_newer_version(
        rt, read: list[str], together: bool, cos: float) -> None:
    """At the floor itself too: the float32 test keeps a cluster its rounding could drop."""
    later = ("ep_20260306_0001", LET_GO, T0 + timedelta(days=4), at(cos))
    out = index(rt, JOB_ROW, later) if together else index(rt, JOB_ROW) | index(rt, later)
    assert out == {"ep_20260302_0001": "new", "ep_20260306_0001": "version"}
    assert read == [LET_GO]


def test_a_text_that_tells_no_change_near_a_cluster_is_read_and_founds_one(
        rt, read: list[str]) -> None:
    out = index(rt, JOB_ROW, ("ep_20260306_0001", FLIGHTS, T0 + timedelta(days=4), at(0.40)))
    assert out == {"ep_20260302_0001": "new", "ep_20260306_0001": "new"}
    assert read == [FLIGHTS]


def test_past_the_rows_it_scores_every_episode_that_would_found_a_cluster_is_read(
        rt, read: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that changed more clusters than :data:`matrix._REACH_ROWS` asks every Episode
    that would found one, as before this test existed (the clusters do not change)."""
    monkeypatch.setattr(matrix, "_REACH_ROWS", 1)
    rows = [JOB_ROW, ("ep_20260302_0002", "Noor plays chess on Sundays.",
                      T0 + timedelta(hours=1), at(0.0, axis=2)),
            ("ep_20260320_0001", LET_GO, T0 + timedelta(days=3), at(0.0, axis=3))]
    out = index(rt, *rows)
    assert set(out.values()) == {"new"}
    assert read == [rows[2][1]]


@pytest.mark.parametrize("seed", range(6))
def test_runs_near_the_floor_place_as_assign_one_by_one(tmp_path, seed: int) -> None:
    """Changes at cosines within 0.01 of the floor to a fact, in one run and one by one
    (``assign``, which reads every Episode that would found a cluster): the same places."""
    rng = np.random.default_rng(seed)
    rows = [JOB_ROW]
    for n in range(24):
        cos = VERSION_FLOOR + float(rng.uniform(-0.01, 0.01))
        text = [LET_GO, FLIGHTS, "Noor moved to York."][n % 3]
        rows.append((f"ep_20260303_{n:04d}", text, T0 + timedelta(hours=6 * (n + 1)),
                     at(cos, axis=1 + n % 5)))
    together = FakeRuntime(tmp_path / "run", ClusteringSettings())
    out = index(together, *rows)
    one = FakeRuntime(tmp_path / "one", ClusteringSettings())
    store_rows(one, [episode(i, text, w) for i, text, w, _ in rows], [r[3] for r in rows])
    svc = ClusterService(one)
    alone = {i: svc.assign(REF, i, v, w).reason for i, _, w, v in rows}
    assert alone == out
    assert snapshot(one) == snapshot(together)


def test_past_the_pairs_it_scores_every_episode_that_would_found_a_cluster_is_read(
        rt, read: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A run whose items and clusters before it make more than :data:`matrix._REACH_PAIRS`
    pairs asks every Episode that would found a cluster."""
    monkeypatch.setattr(matrix, "_REACH_PAIRS", 0)
    later = ("ep_20260306_0001", LET_GO, T0 + timedelta(days=4), at(0.0))
    out = index(rt, JOB_ROW) | index(rt, later)
    assert out == {"ep_20260302_0001": "new", "ep_20260306_0001": "new"}
    assert read == [LET_GO]


def _one_by_one(rt: FakeRuntime, *rows: tuple) -> dict[str, str]:
    """``assign`` for each row in turn (the path of an Episode placed on its own)."""
    store_rows(rt, [episode(i, text, w) for i, text, w, _ in rows], [r[3] for r in rows])
    svc = ClusterService(rt)
    return {i: svc.assign(REF, i, v, w).reason for i, _, w, v in rows}


@pytest.mark.parametrize(("vec", "days"), [
    (at(VERSION_FLOOR - 0.01), 4),  # under the floor
    (at(0.0), 1),  # nothing in common
    (at(0.40), 8),  # near enough, out of the time window
])
def test_one_episode_placed_alone_with_no_cluster_near_enough_is_not_read_for_a_change(
        rt, read: list[str], vec: np.ndarray, days: int) -> None:
    """``assign`` (and ``recluster``) read the text of an Episode that would found a cluster
    only when a cluster scored the floor: under it the join takes none (session 41: the
    look-up of its text and ``tells_change`` came first)."""
    later = ("ep_20260320_0001", LET_GO, T0 + timedelta(days=days), vec)
    assert _one_by_one(rt, JOB_ROW, later) == {"ep_20260302_0001": "new",
                                               "ep_20260320_0001": "new"}
    ClusterService(rt).recluster(REF)
    assert read == []


@pytest.mark.parametrize("cos", [VERSION_FLOOR, 0.40])
def test_one_episode_placed_alone_near_enough_is_read_and_joins_as_the_newer_version(
        rt, read: list[str], cos: float) -> None:
    later = ("ep_20260306_0001", LET_GO, T0 + timedelta(days=4), at(cos))
    assert _one_by_one(rt, JOB_ROW, later) == {"ep_20260302_0001": "new",
                                               "ep_20260306_0001": "version"}
    before = snapshot(rt)
    ClusterService(rt).recluster(REF)
    assert snapshot(rt) == before
    assert read == [LET_GO, LET_GO]  # placed, then placed again by recluster
