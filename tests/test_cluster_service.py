"""ClusterService against a real system.db: online updates, consolidation, rebuild."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from everos_reflect.clustering.online import cluster_id_for
from everos_reflect.clustering.service import ClusterService, UnknownCluster
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.index import db as dbmod
from everos_reflect.markdown.store import MarkdownStore
from everos_reflect.model import Entry, Kind, UserRef, format_timestamp
from everos_reflect.settings import ClusteringSettings, Settings

REF = UserRef.of("u_andrew")
T0 = datetime(2026, 8, 3, 10, 0, tzinfo=UTC)
EMB = HashEmbedder(64)


class MemoryVectors:
    """The one VectorIndex method clustering reads, backed by a dict."""

    def __init__(self) -> None:
        self.data: dict[tuple[UserRef, str], np.ndarray] = {}

    def get_vectors(self, kind, ref, ids):
        assert kind is Kind.EPISODE
        return {i: self.data[(ref, i)] for i in ids if (ref, i) in self.data}


class FakeRuntime:
    def __init__(self, root: Path, clustering: ClusteringSettings) -> None:
        self.root = root
        self.settings = Settings(clustering=clustering)
        self.vectors = MemoryVectors()
        self.store = MarkdownStore(root)  # recluster reads the narratives' merge times
        self._conn: sqlite3.Connection | None = None

    def db(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = dbmod.connect(self.root)
        return self._conn


@pytest.fixture
def rt(tmp_path: Path) -> FakeRuntime:
    return FakeRuntime(tmp_path, ClusteringSettings(threshold=0.5, time_window_days=7.0,
                                                    rejoin_threshold=0.7, member_threshold=0.0))


@pytest.fixture
def svc(rt: FakeRuntime) -> ClusterService:
    return ClusterService(rt)


def episode(eid: str, text: str, when: datetime, *, parent_type: str = "memcell",
            parent_id: str | None = None, deprecated_by: str | None = None) -> Entry:
    meta = {"owner_id": REF.user_id, "timestamp": format_timestamp(when),
            "parent_type": parent_type}
    if parent_id:
        meta["parent_id"] = parent_id
    return Entry(eid, Kind.EPISODE, meta, {"Subject": text.split(".")[0], "Content": text},
                 deprecated_by=deprecated_by)


def store_rows(rt: FakeRuntime, entries: list[Entry], vecs: list[np.ndarray]) -> None:
    """The indexer's writes before it tells the clustering: each entry's row and vector."""
    conn = rt.db()
    with dbmod.transaction(conn):
        for e, v in zip(entries, vecs, strict=True):
            rt.vectors.data[(REF, e.id)] = v
            conn.execute(
                "INSERT OR REPLACE INTO entries (app_id, project_id, user_id, id, kind, path, ts,"
                " timestamp, subject, text, parent_type, parent_id, deprecated_by, content_hash,"
                " text_hash) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (REF.app, REF.project, REF.user_id, e.id, "episode", "x.md",
                 e.timestamp.timestamp(), e.meta["timestamp"], e.subject, e.content,
                 e.parent_type, e.parent_id, e.deprecated_by, e.content_hash, e.text_hash))


def index(rt: FakeRuntime, svc: ClusterService, *entries: Entry) -> dict[str, str]:
    """What the indexer does: write entries rows and vectors, then tell clustering."""
    vecs = EMB.embed([e.search_text for e in entries])
    store_rows(rt, list(entries), vecs)
    return svc.on_entries_indexed(REF, list(entries), vecs)


def snapshot(rt: FakeRuntime) -> tuple[list[tuple], list[tuple]]:
    conn = rt.db()
    clusters = [tuple(r) for r in conn.execute(
        "SELECT cluster_id, centroid, centroid_norm, member_count, first_ts, last_ts, "
        "consolidated_entry_id FROM clusters ORDER BY cluster_id")]
    members = [tuple(r) for r in conn.execute(
        "SELECT entry_id, cluster_id, ts, similarity, deprecated_by FROM cluster_members "
        "ORDER BY entry_id")]
    return clusters, members


DOG = "Andrew talks about adopting a dog named Toby from the shelter"
DOG2 = "Andrew talks about adopting a dog named Toby and walking the dog"
WORK = "Quarterly budget spreadsheet review meeting with finance team"


def test_similar_episodes_in_the_window_share_a_cluster_and_unrelated_ones_do_not(rt, svc):
    out = index(rt, svc, episode("ep_20260803_0001", DOG, T0),
                episode("ep_20260804_0001", DOG2, T0 + timedelta(days=1)),
                episode("ep_20260804_0002", WORK, T0 + timedelta(days=1)))
    assert out == {"ep_20260803_0001": "new", "ep_20260804_0001": "join",
                   "ep_20260804_0002": "new"}
    infos = {c.preview: c for c in svc.clusters(REF)}
    dog = infos["Andrew talks about adopting a dog named Toby from the shelter"]
    assert dog.size == 2 and not dog.consolidated
    assert [m.entry_id for m in svc.members(dog.cluster_id)] == [
        "ep_20260803_0001", "ep_20260804_0001"]


def test_window_edge_is_inclusive_in_the_service_too(rt, svc):
    index(rt, svc, episode("ep_20260803_0001", DOG, T0))
    vec = EMB.embed([DOG2])[0]
    edge = svc.assign(REF, "ep_20260810_0001", vec, T0 + timedelta(days=7))
    late = svc.assign(REF, "ep_20260820_0001", vec,
                      T0 + timedelta(days=7) + timedelta(days=7, seconds=1))
    assert edge.reason == "join"
    assert late.reason == "new" and late.cluster_id != edge.cluster_id


def test_a_narrative_is_attached_to_its_parent_cluster_never_clustered_by_similarity(rt, svc):
    index(rt, svc, episode("ep_20260803_0001", DOG, T0),
          episode("ep_20260804_0001", DOG2, T0 + timedelta(days=1)))
    (dog,) = svc.clusters(REF)
    out = index(rt, svc, episode("ep_20260810_0001", WORK, T0 + timedelta(days=1),
                                 parent_type="cluster", parent_id=dog.cluster_id))
    assert out == {"ep_20260810_0001": "narrative"}
    info = svc.cluster(dog.cluster_id)
    assert info.consolidated_entry_id == "ep_20260810_0001"
    # the dog Episodes, unlike it, are placed as a rebuild places them after its seed
    assert [c.size for c in svc.clusters(REF)] == [1, 2]
    placed = snapshot(rt)
    svc.recluster(REF)
    assert snapshot(rt) == placed


def test_mark_consolidated_retires_sources_and_counts_new_members(rt, svc):
    index(rt, svc, episode("ep_20260803_0001", DOG, T0),
          episode("ep_20260804_0001", DOG2, T0 + timedelta(days=1)))
    (dog,) = svc.eligible_for_reflection(REF, 10)
    narrative = EMB.embed([DOG + " " + DOG2])[0]
    info = svc.mark_consolidated(dog.cluster_id, "ep_20260805_0001", narrative,
                                 ["ep_20260803_0001", "ep_20260804_0001"])
    assert (info.size, info.consolidated, info.new_since_consolidation) == (1, True, 0)
    assert info.last_ts == (T0 + timedelta(days=1)).timestamp()  # the latest source's time
    assert svc.eligible_for_reflection(REF, 10) == []
    history = svc.members(dog.cluster_id, live_only=False)
    assert {m.entry_id: m.deprecated_by for m in history} == {
        "ep_20260803_0001": "ep_20260805_0001", "ep_20260804_0001": "ep_20260805_0001",
        "ep_20260805_0001": None}
    stored = np.frombuffer(rt.db().execute("SELECT centroid FROM clusters").fetchone()[0],
                           dtype="<f4")
    np.testing.assert_allclose(stored, narrative, atol=1e-6)
    index(rt, svc, episode("ep_20260806_0001", DOG2, T0 + timedelta(days=3)))
    (again,) = svc.eligible_for_reflection(REF, 10)
    assert (again.cluster_id, again.size, again.new_since_consolidation) == (
        dog.cluster_id, 2, 1)


def test_recurring_topic_rejoins_its_consolidated_cluster_after_the_window(rt, svc):
    index(rt, svc, episode("ep_20260803_0001", DOG, T0),
          episode("ep_20260804_0001", DOG2, T0 + timedelta(days=1)))
    (dog,) = svc.clusters(REF)
    svc.mark_consolidated(dog.cluster_id, "ep_20260805_0001", EMB.embed([DOG])[0],
                          ["ep_20260803_0001", "ep_20260804_0001"])
    out = index(rt, svc, episode("ep_20261005_0001", DOG, T0 + timedelta(days=60)),
                episode("ep_20261006_0001", WORK, T0 + timedelta(days=61)))
    assert out == {"ep_20261005_0001": "rejoin", "ep_20261006_0001": "new"}
    assert svc.cluster_of(REF, "ep_20261005_0001") == dog.cluster_id


def test_unconsolidated_cluster_is_not_rejoined_after_the_window(rt, svc):
    index(rt, svc, episode("ep_20260803_0001", DOG, T0))
    out = index(rt, svc, episode("ep_20261005_0001", DOG, T0 + timedelta(days=60)))
    assert out == {"ep_20261005_0001": "new"}


def test_edited_text_reassigns_and_metadata_only_change_keeps_the_cluster(rt, svc):
    first = episode("ep_20260803_0001", DOG, T0)
    index(rt, svc, first, episode("ep_20260804_0001", DOG2, T0 + timedelta(days=1)))
    same = episode("ep_20260804_0001", DOG2, T0 + timedelta(days=1))
    same.meta["importance"] = 7
    assert index(rt, svc, same) == {"ep_20260804_0001": "unchanged"}
    edited = episode("ep_20260804_0001", WORK, T0 + timedelta(days=1))
    assert index(rt, svc, edited) == {"ep_20260804_0001": "new"}
    assert svc.cluster_of(REF, "ep_20260804_0001") != svc.cluster_of(REF, "ep_20260803_0001")
    assert sorted(c.size for c in svc.clusters(REF)) == [1, 1]


def test_removing_members_recomputes_and_an_empty_cluster_disappears(rt, svc):
    first = episode("ep_20260803_0001", DOG, T0)
    index(rt, svc, first, episode("ep_20260804_0001", DOG2, T0 + timedelta(days=1)))
    svc.on_entries_removed(REF, ["ep_20260804_0001"])
    (c,) = svc.clusters(REF)
    assert (c.size, c.first_ts, c.last_ts) == (1, T0.timestamp(), T0.timestamp())
    np.testing.assert_allclose(
        np.frombuffer(rt.db().execute("SELECT centroid FROM clusters").fetchone()[0], "<f4"),
        EMB.embed([first.search_text])[0], atol=1e-6)
    svc.on_entries_removed(REF, ["ep_20260803_0001"])
    assert svc.clusters(REF) == []


def test_undo_returns_sources_to_their_cluster(rt, svc):
    index(rt, svc, episode("ep_20260803_0001", DOG, T0),
          episode("ep_20260804_0001", DOG2, T0 + timedelta(days=1)))
    (dog,) = svc.clusters(REF)
    svc.mark_consolidated(dog.cluster_id, "ep_20260805_0001", EMB.embed([DOG])[0],
                          ["ep_20260803_0001", "ep_20260804_0001"])
    svc.on_entries_removed(REF, ["ep_20260805_0001"])  # undo deletes the narrative...
    svc.on_entries_deprecated(REF, {"ep_20260803_0001": None, "ep_20260804_0001": None})
    info = svc.cluster(dog.cluster_id)
    assert (info.size, info.consolidated) == (2, False)


def test_mark_consolidated_of_an_unknown_cluster_is_a_domain_error(svc):
    with pytest.raises(UnknownCluster, match="cl_000000000000"):
        svc.mark_consolidated("cl_000000000000", "ep_20260805_0001", np.ones(64), [])


def _timeline() -> list[Entry]:
    topics = [DOG, WORK, "Andrew plans a hiking trip to the mountains with friends",
              "Andrew cooks pasta with tomato sauce for dinner guests"]
    out, when = [], T0
    for n in range(36):
        when += timedelta(hours=9 + (n * 37) % 70)
        text = f"{topics[(n * 7) % 4]} note {n % 5}"
        out.append(episode(f"ep_{when:%Y%m%d}_{n:04d}", text, when))
    return out


def test_incremental_in_time_order_equals_recluster_and_recluster_is_deterministic(rt, svc):
    for e in _timeline():  # one at a time, as a live daemon would see them
        index(rt, svc, e)
    incremental = snapshot(rt)
    assert 1 < len(incremental[0]) < 36
    assert svc.recluster(REF)["members"] == 36
    assert snapshot(rt) == incremental
    svc.recluster()
    assert snapshot(rt) == incremental


def test_recluster_keeps_narrative_cluster_ids_and_history(rt, svc):
    index(rt, svc, episode("ep_20260803_0001", DOG, T0),
          episode("ep_20260804_0001", DOG2, T0 + timedelta(days=1)))
    (dog,) = svc.clusters(REF)
    narrative = episode("ep_20260805_0001", DOG, T0 + timedelta(days=1),
                        parent_type="cluster", parent_id=dog.cluster_id)
    index(rt, svc, narrative)
    svc.mark_consolidated(dog.cluster_id, narrative.id, EMB.embed([narrative.search_text])[0],
                          ["ep_20260803_0001", "ep_20260804_0001"])
    with dbmod.transaction(rt.db()) as conn:
        conn.execute("UPDATE entries SET deprecated_by='ep_20260805_0001' "
                     "WHERE id IN ('ep_20260803_0001', 'ep_20260804_0001')")
    index(rt, svc, episode("ep_20260806_0001", DOG2, T0 + timedelta(days=3)))
    before = snapshot(rt)
    svc.recluster()
    assert snapshot(rt) == before
    assert svc.cluster(dog.cluster_id).consolidated_entry_id == "ep_20260805_0001"


def test_a_blank_database_migrates_with_cluster_state_columns(tmp_path):
    conn = dbmod.connect(tmp_path)
    cols = {r[1] for r in conn.execute("PRAGMA table_info(cluster_members)")}
    assert {"deprecated_by", "text_hash"} <= cols
    assert "centroid_norm" in {r[1] for r in conn.execute("PRAGMA table_info(clusters)")}


def test_a_narrative_naming_another_users_cluster_holds_the_id_and_that_one_takes_the_next(
        rt, svc):
    """A narrative hand-edited (or its user's folder renamed) to name another user's cluster,
    one an Episode founded: the narrative holds the id, online and by recluster, and the
    Episode's cluster takes its next free id, as a rebuild founds it whatever the order it
    takes the users in. One id names one cluster (migration 0012: the id is no longer UNIQUE
    in SQLite, so a copy under the second user made every look-up by that id answer for
    either user). Before, online refused the narrative and a rebuild refused it only when
    the Episode's user came first: the other way round, both held the id."""
    other = UserRef.of("u_beth")
    index(rt, svc, episode("ep_20260803_0001", DOG, T0),
          episode("ep_20260804_0001", DOG2, T0 + timedelta(days=1)))
    (dog,) = svc.clusters(REF)
    # the same narrative filed (by hand) under another user, naming REF's cluster
    narrative = episode("ep_20260805_0001", WORK, T0 + timedelta(days=2),
                        parent_type="cluster", parent_id=dog.cluster_id)
    conn = rt.db()
    v = EMB.embed([narrative.search_text])[0]
    rt.vectors.data[(other, narrative.id)] = v
    with dbmod.transaction(conn):
        conn.execute(
            "INSERT INTO entries (app_id, project_id, user_id, id, kind, path, ts, timestamp,"
            " subject, text, parent_type, parent_id, deprecated_by, content_hash, text_hash)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (other.app, other.project, other.user_id, narrative.id, "episode", "y.md",
             narrative.timestamp.timestamp(), narrative.meta["timestamp"], narrative.subject,
             narrative.content, "cluster", dog.cluster_id, None, narrative.content_hash,
             narrative.text_hash))
    assert svc.on_entries_indexed(other, [narrative], [v]) == {
        narrative.id: "narrative-new-cluster"}
    next_id = cluster_id_for(REF.app, REF.project, REF.user_id, "ep_20260803_0001", 1)

    def owners() -> list[tuple[str, str]]:
        return [(r[0], r[1]) for r in conn.execute(
            "SELECT cluster_id, user_id FROM clusters ORDER BY user_id")]

    online = owners()
    assert online == [(next_id, REF.user_id), (dog.cluster_id, other.user_id)]
    svc.recluster()
    assert owners() == online
    assert svc.cluster(dog.cluster_id).ref == other
    assert [m.entry_id for m in svc.members(next_id)] == [
        "ep_20260803_0001", "ep_20260804_0001"]


def test_a_narrative_without_a_vector_does_not_keep_a_later_user_s_from_its_cluster(rt, svc):
    """Two users' live narratives name one cluster id (a log copied by hand); the first
    user's has no vector (its embedding lost), so it founds nothing, in a rebuild or online.
    The later user's was refused as naming an id an earlier user's narrative holds, where a
    rebuild attaches it."""
    cid = "cl_0123456789ab"
    amy, beth = UserRef.of("u_amy"), UserRef.of("u_beth")
    conn = rt.db()
    narratives = {}
    for ref, text in ((amy, DOG), (beth, WORK)):
        n = episode("ep_20260805_0001", text, T0 + timedelta(days=2), parent_type="cluster",
                    parent_id=cid)
        narratives[ref] = n
        with dbmod.transaction(conn):
            conn.execute(
                "INSERT INTO entries (app_id, project_id, user_id, id, kind, path, ts, timestamp,"
                " subject, text, parent_type, parent_id, deprecated_by, content_hash, text_hash)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (ref.app, ref.project, ref.user_id, n.id, "episode", f"{ref.user_id}.md",
                 n.timestamp.timestamp(), n.meta["timestamp"], n.subject, n.content, "cluster",
                 cid, None, n.content_hash, n.text_hash))
    v = EMB.embed([narratives[beth].search_text])[0]
    rt.vectors.data[(beth, narratives[beth].id)] = v  # amy's: none

    assert svc.on_entries_indexed(beth, [narratives[beth]], [v]) == {
        narratives[beth].id: "narrative-new-cluster"}
    online = conn.execute("SELECT cluster_id, user_id, consolidated_entry_id, member_count "
                          "FROM clusters").fetchall()
    assert [tuple(r) for r in online] == [(cid, beth.user_id, narratives[beth].id, 1)]
    svc.recluster()
    assert [tuple(r) for r in conn.execute(
        "SELECT cluster_id, user_id, consolidated_entry_id, member_count FROM clusters")] == [
        tuple(r) for r in online]


def test_mark_consolidated_retires_more_sources_than_the_builds_parameter_limit(rt, svc):
    many = [episode(f"ep_20260803_{i:04d}", DOG, T0 + timedelta(minutes=i)) for i in range(1_100)]
    index(rt, svc, *many)
    (dog,) = svc.clusters(REF)
    assert dog.size == 1_100
    rt.db().setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)
    info = svc.mark_consolidated(dog.cluster_id, "ep_20260805_0001", EMB.embed([DOG])[0],
                                 [e.id for e in many])
    assert (info.size, info.consolidated) == (1, True)
    assert info.last_ts == (T0 + timedelta(minutes=1_099)).timestamp()  # the latest source's
    history = svc.members(dog.cluster_id, live_only=False)
    assert {m.entry_id: m.deprecated_by for m in history} == {
        **{e.id: "ep_20260805_0001" for e in many}, "ep_20260805_0001": None}
