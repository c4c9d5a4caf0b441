"""Migration 0011: members indexed by an integer cluster key in creation order (issue 15).

A root clustered before it keeps every membership, each under the key of the cluster it names;
the member index serves the look-ups by cluster; deleting a cluster still takes its members."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from everos_reflect.clustering.service import ClusterService
from everos_reflect.index import db as dbmod

from .db_support import system_db_at
from .test_cluster_matrix import DAY, REF, _Runtime


def _old_root(root: Path) -> None:
    """A system.db at migration 0010 holding two clusters of ``REF`` and three members."""
    conn = system_db_at(root, "0010_commit_intents")
    user = (REF.app, REF.project, REF.user_id)
    for n, cid in enumerate(["cl_bbbbbbbbbbbb", "cl_aaaaaaaaaaaa"]):
        centroid = np.zeros(8, dtype="<f4")
        centroid[n] = 1.0
        conn.execute("INSERT INTO clusters (cluster_id, app_id, project_id, user_id, centroid, "
                     "member_count, first_ts, last_ts, created_at) VALUES (?,?,?,?,?,?,?,?,?)",
                     (cid, *user, centroid.tobytes(), 2 - n, 1000.0, 1000.0 + DAY, "t"))
    for eid, cid, ts in [("ep_1", "cl_bbbbbbbbbbbb", 1000.0), ("ep_2", "cl_aaaaaaaaaaaa", 1000.0),
                         ("ep_3", "cl_bbbbbbbbbbbb", 1000.0 + DAY)]:
        conn.execute("INSERT INTO cluster_members (app_id, project_id, user_id, entry_id, "
                     "cluster_id, ts, joined_at) VALUES (?,?,?,?,?,?,?)",
                     (*user, eid, cid, ts, "t"))
    conn.commit()
    conn.close()


def test_an_existing_root_keeps_its_members_under_their_clusters_keys(tmp_path: Path) -> None:
    _old_root(tmp_path)
    rt = _Runtime(tmp_path)
    conn = rt.db()  # migrates
    keys = dict(conn.execute("SELECT cluster_id, cluster_key FROM clusters").fetchall())
    assert sorted(keys.values()) == [1, 2]
    rows = conn.execute("SELECT entry_id, cluster_id, cluster_key FROM cluster_members "
                        "ORDER BY entry_id").fetchall()
    assert [tuple(r) for r in rows] == [
        ("ep_1", "cl_bbbbbbbbbbbb", keys["cl_bbbbbbbbbbbb"]),
        ("ep_2", "cl_aaaaaaaaaaaa", keys["cl_aaaaaaaaaaaa"]),
        ("ep_3", "cl_bbbbbbbbbbbb", keys["cl_bbbbbbbbbbbb"])]
    svc = ClusterService(rt)
    assert [m.entry_id for m in svc.members("cl_bbbbbbbbbbbb")] == ["ep_1", "ep_3"]
    assert {c.cluster_id: c.size for c in svc.clusters(REF)} == {
        "cl_bbbbbbbbbbbb": 2, "cl_aaaaaaaaaaaa": 1}
    # a new Episode joins an old cluster under its key; a new cluster gets the next key
    v = np.zeros(8, dtype=np.float32)
    v[1] = 1.0
    joined = svc.assign(REF, "ep_4", v, 1000.0 + 2 * DAY)
    assert joined.cluster_id == "cl_aaaaaaaaaaaa"
    w = np.zeros(8, dtype=np.float32)
    w[5] = 1.0
    founded = svc.assign(REF, "ep_5", w, 1000.0 + 2 * DAY)
    assert founded.reason == "new"
    member_keys = dict(conn.execute("SELECT entry_id, cluster_key FROM cluster_members"))
    assert member_keys["ep_4"] == keys["cl_aaaaaaaaaaaa"]
    assert member_keys["ep_5"] == 3 == conn.execute(
        "SELECT cluster_key FROM clusters WHERE cluster_id=?", (founded.cluster_id,)).fetchone()[0]
    # deleting a cluster still deletes its members (the foreign key is on the key now)
    with dbmod.transaction(conn):
        conn.execute("DELETE FROM clusters WHERE cluster_id='cl_bbbbbbbbbbbb'")
    assert conn.execute("SELECT COUNT(*) FROM cluster_members WHERE cluster_id="
                        "'cl_bbbbbbbbbbbb'").fetchone()[0] == 0
    assert dbmod.migrate(conn) == []


def test_lookups_by_cluster_go_through_the_member_index(tmp_path: Path) -> None:
    conn = _Runtime(tmp_path).db()
    plan = " ".join(r[3] for r in conn.execute(
        "EXPLAIN QUERY PLAN SELECT entry_id FROM cluster_members WHERE "
        "cluster_key=(SELECT cluster_key FROM clusters WHERE cluster_id=?) "
        "AND deprecated_by IS NULL ORDER BY ts, entry_id", ("cl_x",)))
    assert "SEARCH cluster_members USING INDEX cluster_members_by_cluster (cluster_key=?)" in plan


def test_member_rows_carry_the_key_of_the_cluster_they_name(tmp_path: Path) -> None:
    """Keys come from memory now (no look-up by hash id per member row): whatever placed a
    member — a new cluster, a join of a cluster loaded from SQLite, a key freed by a deleted
    cluster and given again, another connection's change, a rebuild — its row names the key
    of its own cluster."""
    a, b = _Runtime(tmp_path), _Runtime(tmp_path)
    sa, sb = ClusterService(a), ClusterService(b)

    def axis(i: int) -> np.ndarray:
        v = np.zeros(8, dtype=np.float32)
        v[i] = 1.0
        a.vectors.data[(REF, f"ep_{i}")] = v
        return v

    sa.assign(REF, "ep_a0", axis(0), 1000.0)
    last = sa.assign(REF, "ep_a1", axis(1), 1000.0)  # the newest cluster: the highest key
    sa.on_entries_removed(REF, ["ep_a1"])  # its cluster goes, its key is free again
    sa.assign(REF, "ep_a2", axis(2), 1000.0 + DAY)  # takes that key
    sb.assign(REF, "ep_b0", axis(0), 1000.0 + DAY)  # another connection joins the first
    sa.assign(REF, "ep_a3", axis(0), 1000.0 + 2 * DAY)  # a reloads, joins under the key
    fresh = ClusterService(_Runtime(tmp_path))  # a new process: state loaded from SQLite
    fresh.assign(REF, "ep_c0", axis(2), 1000.0 + 2 * DAY)
    fresh.assign(REF, "ep_c1", axis(3), 1000.0 + 2 * DAY)
    conn = a.db()
    assert last.cluster_id not in {c.cluster_id for c in sa.clusters(REF)}

    def mismatched() -> list[tuple]:
        return [tuple(r) for r in conn.execute(
            "SELECT m.entry_id, m.cluster_id, c.cluster_id FROM cluster_members m "
            "LEFT JOIN clusters c ON c.cluster_key = m.cluster_key "
            "WHERE c.cluster_id IS NOT m.cluster_id")]

    assert conn.execute("SELECT COUNT(*) FROM cluster_members").fetchone()[0] == 6
    assert mismatched() == []
    with dbmod.transaction(conn):  # entries rows for a rebuild
        for eid, i, ts in [("ep_a0", 0, 1000.0), ("ep_a2", 2, 1000.0 + DAY),
                           ("ep_c1", 3, 1000.0 + 2 * DAY)]:
            a.vectors.data[(REF, eid)] = axis(i)
            conn.execute("INSERT INTO entries (app_id, project_id, user_id, id, kind, path, ts,"
                         " content_hash, text_hash) VALUES (?,?,?,?,?,?,?,?,?)",
                         (REF.app, REF.project, REF.user_id, eid, "episode", "x.md", ts, "c",
                          "t"))
    sa.recluster(REF)
    sa.assign(REF, "ep_a4", axis(3), 1000.0 + 3 * DAY)  # joins a rebuilt cluster
    assert conn.execute("SELECT COUNT(*) FROM cluster_members").fetchone()[0] == 4
    assert mismatched() == []
