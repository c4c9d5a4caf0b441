"""Migrations 0012-0014: clusters keyed by their integer key, the hash id indexed behind its
bucket, clusters indexed by user, versions bumped by a plain UPDATE of an existing row.

A root clustered before them keeps every cluster column and membership; a look-up by the
public id goes through ``clusters_by_id`` (never a scan), whichever bucket the key is in;
deleting a cluster still takes its members; no index on the bare hash id is left to take
random inserts; a user without a version row is never trusted from memory."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from everos_reflect.clustering.service import ClusterService
from everos_reflect.index import db as dbmod
from everos_reflect.index.reads import live_cluster_members

from .db_support import system_db_at
from .test_cluster_matrix import DAY, REF, _Runtime

_USER = (REF.app, REF.project, REF.user_id)


def _root_at_0011(root: Path) -> sqlite3.Connection:
    """A system.db at migration 0011 holding three clusters of ``REF`` (keys in three buckets,
    one consolidated) and their members, one of them history."""
    conn = system_db_at(root, "0011_cluster_keys")
    for n, (cid, key, narrative) in enumerate([("cl_cccccccccccc", 1, None),
                                               ("cl_aaaaaaaaaaaa", 4097, "ep_n"),
                                               ("cl_bbbbbbbbbbbb", 9000, None)]):
        centroid = np.zeros(8, dtype="<f4")
        centroid[n] = 1.0
        conn.execute("INSERT INTO clusters (cluster_id, app_id, project_id, user_id, centroid, "
                     "centroid_norm, member_count, first_ts, last_ts, consolidated_entry_id, "
                     "consolidated_at, created_at, cluster_key) "
                     "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                     (cid, *_USER, centroid.tobytes(), 0.5 + n / 10, 2, 1000.0 + n,
                      1000.0 + DAY, narrative, "c" if narrative else None, f"t{n}", key))
    for eid, cid, key, by in [("ep_1", "cl_cccccccccccc", 1, None),
                              ("ep_2", "cl_cccccccccccc", 1, None),
                              ("ep_3", "cl_aaaaaaaaaaaa", 4097, "ep_n"),
                              ("ep_n", "cl_aaaaaaaaaaaa", 4097, None),
                              ("ep_4", "cl_bbbbbbbbbbbb", 9000, None),
                              ("ep_5", "cl_bbbbbbbbbbbb", 9000, None)]:
        conn.execute("INSERT INTO cluster_members (app_id, project_id, user_id, entry_id, "
                     "cluster_id, cluster_key, ts, similarity, joined_at, deprecated_by, "
                     "text_hash) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                     (*_USER, eid, cid, key, 1000.0, 0.75, "j", by, "h"))
    conn.commit()
    return conn


def _dump(conn: sqlite3.Connection) -> tuple[list[tuple], list[tuple]]:
    clusters = [tuple(r) for r in conn.execute(
        "SELECT cluster_key, cluster_id, app_id, project_id, user_id, centroid, centroid_norm, "
        "member_count, first_ts, last_ts, consolidated_entry_id, consolidated_at, created_at "
        "FROM clusters ORDER BY cluster_key")]
    members = [tuple(r) for r in conn.execute(
        "SELECT app_id, project_id, user_id, entry_id, cluster_id, cluster_key, ts, similarity, "
        "joined_at, deprecated_by, text_hash FROM cluster_members ORDER BY entry_id")]
    return clusters, members


def test_an_existing_root_keeps_every_cluster_and_member(tmp_path: Path) -> None:
    old = _root_at_0011(tmp_path)
    before = _dump(old)
    version = old.execute("SELECT version FROM cluster_versions").fetchone()[0]
    old.close()
    rt = _Runtime(tmp_path)
    conn = rt.db()  # migrates
    assert _dump(conn) == before
    # the key is the rowid; no index on the bare hash id is left (the random inserts)
    assert [tuple(r) for r in conn.execute("SELECT rowid, cluster_key FROM clusters")] == [
        (1, 1), (4097, 4097), (9000, 9000)]
    indexes = {r[1] for r in conn.execute("PRAGMA index_list(clusters)")}
    assert indexes == {"clusters_by_id", "clusters_by_user", "clusters_consolidated"}
    # a state cached by another process before the migration is reloaded
    assert conn.execute("SELECT version FROM cluster_versions").fetchone()[0] > version
    svc = ClusterService(rt)
    assert svc.cluster("cl_aaaaaaaaaaaa").consolidated_entry_id == "ep_n"
    assert svc.cluster("cl_aaaaaaaaaaaa").new_since_consolidation == 0
    assert [m.entry_id for m in svc.members("cl_bbbbbbbbbbbb")] == ["ep_4", "ep_5"]
    assert live_cluster_members(conn, "cl_cccccccccccc") == ["ep_1", "ep_2"]
    # a new cluster takes the next key; the version triggers are back
    v = np.zeros(8, dtype=np.float32)
    v[7] = 1.0
    founded = svc.assign(REF, "ep_6", v, 1000.0 + 2 * DAY)
    assert founded.reason == "new"
    assert conn.execute("SELECT cluster_key FROM clusters WHERE cluster_key = "
                        f"{dbmod.CLUSTER_KEY_OF_ID}", (founded.cluster_id,)).fetchone()[0] == 9001
    # deleting a cluster still deletes its members (the foreign key follows the renamed table)
    with dbmod.transaction(conn):
        conn.execute(f"DELETE FROM clusters WHERE cluster_key = {dbmod.CLUSTER_KEY_OF_ID}",
                     ("cl_bbbbbbbbbbbb",))
    assert conn.execute("SELECT COUNT(*) FROM cluster_members WHERE cluster_key=9000"
                        ).fetchone()[0] == 0
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    assert dbmod.migrate(conn) == []


def test_a_look_up_by_id_probes_the_id_index_in_every_bucket(tmp_path: Path) -> None:
    conn = _Runtime(tmp_path).db()
    key_of = f"SELECT {dbmod.CLUSTER_KEY_OF_ID}"
    assert conn.execute(key_of, ("cl_000000000000",)).fetchone()[0] is None  # empty table
    with dbmod.transaction(conn):
        for key in (3, 4095, 4096, 20_000, 20_001):
            conn.execute("INSERT INTO clusters (cluster_key, cluster_id, app_id, project_id, "
                         "user_id, centroid, member_count, first_ts, last_ts, created_at) "
                         "VALUES (?,?,?,?,?,?,?,?,?,?)",
                         (key, f"cl_{key:012x}", *_USER, b"\0" * 32, 1, 0.0, 0.0, "t"))
    for key in (3, 4095, 4096, 20_000, 20_001):
        assert conn.execute(key_of, (f"cl_{key:012x}",)).fetchone()[0] == key
    assert conn.execute(key_of, ("cl_ffffffffffff",)).fetchone()[0] is None
    plan = " ".join(r[3] for r in conn.execute(
        f"EXPLAIN QUERY PLAN SELECT * FROM clusters WHERE cluster_key = "
        f"{dbmod.CLUSTER_KEY_OF_ID}", ("cl_x",)))
    assert "USING COVERING INDEX clusters_by_id (<expr>=? AND cluster_id=?)" in plan
    assert "SCAN" not in plan.replace("SCAN CONSTANT ROW", "").replace("SCAN bucket", "")


def test_a_user_without_a_version_row_is_reloaded_and_then_counted(tmp_path: Path) -> None:
    """Migration 0014: the triggers only bump an existing ``cluster_versions`` row. A state
    cached while the user had none (a rebuild of a new user) is not trusted: a raw SQL change
    made meanwhile, which bumped nothing, is seen; from then on the row exists and counts."""
    a, b = _Runtime(tmp_path), _Runtime(tmp_path)
    sa = ClusterService(a)
    v = np.zeros(8, dtype=np.float32)
    v[0] = 1.0
    a.vectors.data[(REF, "ep_a")] = v
    conn = a.db()
    with dbmod.transaction(conn):
        conn.execute("INSERT INTO entries (app_id, project_id, user_id, id, kind, path, ts, "
                     "content_hash, text_hash) VALUES (?,?,?,?,?,?,?,?,?)",
                     (*_USER, "ep_a", "episode", "x.md", 1000.0, "c", "t"))
    sa.recluster(REF)  # writes clusters without ever reading a version: no row yet
    assert conn.execute("SELECT COUNT(*) FROM cluster_versions").fetchone()[0] == 0
    with dbmod.transaction(b.db()) as other:  # another tool, behind the cache's back
        other.execute("DELETE FROM clusters")
    assert sa.assign(REF, "ep_b", v, 1000.0 + DAY).reason == "new"
    assert conn.execute("SELECT version FROM cluster_versions").fetchone()[0] >= 1
    with dbmod.transaction(b.db()) as other:  # now the row exists: the trigger counts it
        other.execute("DELETE FROM clusters")
    assert sa.assign(REF, "ep_c", v, 1000.0 + 2 * DAY).reason == "new"
    assert conn.execute("SELECT COUNT(*) FROM cluster_members").fetchone()[0] == 1
