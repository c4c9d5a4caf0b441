"""A run asks once whether other users' narratives name its Episodes' own cluster ids.

An Episode founds the cluster named after it unless its user holds that id or a live
narrative of another user names it (``service._free_id``). The run placed by
``on_entries_indexed`` asked SQLite that for each cluster it founded, one statement per
Episode that founds one (most of them: 364 clusters for LoCoMo's 544 Episodes). It now asks
it of every item's own id at once, before the rule runs; an id found named still takes the
next free one, as before."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from everos_reflect.clustering.online import cluster_id_for
from everos_reflect.clustering.service import ClusterService
from everos_reflect.index import db as dbmod
from everos_reflect.model import UserRef
from everos_reflect.settings import ClusteringSettings
from tests.test_cluster_service import REF, FakeRuntime
from tests.test_cluster_version_join import DIM, T0, index

OTHER = UserRef.of("u_other")


@pytest.fixture
def rt(tmp_path: Path) -> FakeRuntime:
    return FakeRuntime(tmp_path, ClusteringSettings())


def _vec() -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[1] = 1.0
    return v


def _founders(count: int) -> list[tuple[str, str, object, np.ndarray]]:
    """Episodes 8 days apart (past the 7-day window): each founds a cluster."""
    return [(f"ep_{(T0 + timedelta(days=8 * n)):%Y%m%d}_0001", f"Note {n} of the day.",
             T0 + timedelta(days=8 * n), _vec()) for n in range(count)]


def _narrative_of_other_user_naming(rt: FakeRuntime, cluster_id: str) -> None:
    conn = rt.db()
    with dbmod.transaction(conn):
        conn.execute(
            "INSERT INTO entries (app_id, project_id, user_id, id, kind, path, ts, text, "
            "parent_type, parent_id, content_hash, text_hash) "
            "VALUES (?,?,?,'ep_20250101_0001','episode','x.md',0,'n','cluster',?,'','')",
            (OTHER.app, OTHER.project, OTHER.user_id, cluster_id))


def _narrative_checks(rt: FakeRuntime) -> list[str]:
    asked: list[str] = []
    rt.db().set_trace_callback(
        lambda sql: asked.append(sql) if "parent_type='cluster'" in sql and "parent_id" in sql
        else None)
    return asked


@pytest.mark.parametrize("count", [5, 70])
def test_a_run_of_founders_asks_once_about_other_users_narratives(rt, count) -> None:
    asked = _narrative_checks(rt)
    out = index(rt, *_founders(count))
    assert list(out.values()) == ["new"] * count
    assert len(asked) == 1  # was one per Episode that founds a cluster


@pytest.mark.parametrize("count", [5, 70])
def test_an_own_id_another_user_s_narrative_names_takes_the_next(rt, count) -> None:
    rows = _founders(count)
    named = cluster_id_for(REF.app, REF.project, REF.user_id, rows[2][0])
    _narrative_of_other_user_naming(rt, named)
    index(rt, *rows)
    got = {c.cluster_id for c in ClusterService(rt).clusters(REF)}
    want = {cluster_id_for(REF.app, REF.project, REF.user_id, eid, 1 if n == 2 else 0)
            for n, (eid, _, _, _) in enumerate(rows)}
    assert named not in got
    assert got == want
