"""Cluster state in ``system.db``: online assignment, consolidation bookkeeping, full rebuild.

The rule lives in :mod:`online`; this module loads the candidates it needs, applies its answer
and keeps ``clusters`` / ``cluster_members`` consistent. The rules it applies to changing data:

- Order: a batch is processed in (timestamp, id) order; :meth:`ClusterService.recluster`
  replays every live Episode of a user in that order, so incremental assignment in timestamp
  order and a rebuild give the same clusters, ids and centroids.
- Out of order: an Episode older than a cluster's first member may still join it — the window is
  checked against both ends of the cluster's span (see :mod:`online`). Arrival order can then
  differ from a rebuild; ``recluster`` restores the canonical result.
- Edited late: a changed text or timestamp takes the Episode out of its cluster (centroid
  recomputed from the rest) and assigns it again as if new; a metadata-only change keeps it.
- Narratives (``parent_type: cluster``) are never assigned by similarity: they are attached to
  the cluster their ``parent_id`` names (recreated under that id if needed) and make it
  *consolidated*. Members they replace stay listed as history with ``deprecated_by`` set.
- Undo: a member whose deprecation is lifted returns to the cluster it was in, if it still exists.
- Centroid of a cluster = normalised mean of its live members, folded in canonical order: the
  consolidated narrative first, then the rest by (timestamp, id).
"""

from __future__ import annotations

import logging
import re
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from everos_reflect.clustering.online import (
    NEW,
    Candidate,
    Decision,
    choose_cluster,
    cluster_id_for,
    fold,
    in_window,
    mean_of,
    normalize,
)
from everos_reflect.errors import EverosError
from everos_reflect.index.db import transaction, utcnow_iso
from everos_reflect.model import Entry, EntryId, Kind, UserRef

if TYPE_CHECKING:
    from everos_reflect.runtime import Runtime

log = logging.getLogger(__name__)

CLUSTER_ID_RE = re.compile(r"^cl_[0-9a-f]{12}$")
DAY = 86400.0


class UnknownCluster(EverosError, KeyError):
    """No cluster with that id exists."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown cluster"


@dataclass(frozen=True)
class ClusterInfo:
    """One cluster as the CLI, API and Reflection see it."""

    cluster_id: str
    ref: UserRef
    size: int  # live members, the narrative included
    first_ts: float
    last_ts: float
    preview: str
    consolidated_entry_id: str | None
    consolidated_at: str | None
    new_since_consolidation: int  # live members other than the narrative (0 if not consolidated)

    @property
    def consolidated(self) -> bool:
        return self.consolidated_entry_id is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster_id": self.cluster_id,
            "app_id": self.ref.app,
            "project_id": self.ref.project,
            "user_id": self.ref.user_id,
            "size": self.size,
            "first": _iso(self.first_ts),
            "last": _iso(self.last_ts),
            "preview": self.preview,
            "consolidated": self.consolidated,
            "consolidated_entry_id": self.consolidated_entry_id,
            "consolidated_at": self.consolidated_at,
            "new_since_consolidation": self.new_since_consolidation,
        }


@dataclass(frozen=True)
class Member:
    entry_id: str
    cluster_id: str
    ts: float
    similarity: float | None
    deprecated_by: str | None

    @property
    def live(self) -> bool:
        return self.deprecated_by is None


@dataclass
class _Cluster:
    """Mutable working copy of one ``clusters`` row."""

    cluster_id: str
    centroid: np.ndarray
    norm: float
    count: int
    first_ts: float
    last_ts: float
    consolidated_entry_id: str | None = None

    @classmethod
    def new(cls, cluster_id: str, vector: np.ndarray, ts: float,
            narrative: str | None = None) -> _Cluster:
        """A one-member cluster; built with :func:`fold` like every later update, so a
        rebuild reproduces the stored centroid bit for bit."""
        centroid, norm = fold(None, 0.0, 0, vector)
        return cls(cluster_id, centroid, norm, 1, ts, ts, narrative)

    def candidate(self) -> Candidate:
        return Candidate(self.cluster_id, self.centroid, self.first_ts, self.last_ts,
                         self.consolidated_entry_id is not None)

    def add(self, vector: np.ndarray, ts: float) -> None:
        self.centroid, self.norm = fold(self.centroid, self.norm, self.count, vector)
        self.count += 1
        self.first_ts = min(self.first_ts, ts)
        self.last_ts = max(self.last_ts, ts)


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


def entry_epoch(entry_id: str, ts: float | datetime | None) -> float:
    """Epoch seconds of an Episode; without a usable timestamp, midnight UTC of its id's day
    (the day of the file holding it), so every Episode has a deterministic place in time."""
    if isinstance(ts, datetime):
        return ts.timestamp()
    if ts is not None:
        return float(ts)
    day = EntryId.parse(entry_id).day
    return datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()


def _where_ref(ref: UserRef | None, alias: str = "") -> tuple[str, tuple[str, ...]]:
    if ref is None:
        return "1=1", ()
    p = f"{alias}." if alias else ""
    return (f"{p}app_id=? AND {p}project_id=? AND {p}user_id=?",
            (ref.app, ref.project, ref.user_id))


class ClusterService:
    """Clusters of one memory root. Every mutation runs in one ``BEGIN IMMEDIATE`` transaction,
    so the daemon, a CLI command and a Reflection run never interleave their updates."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        cfg = runtime.settings.clustering
        self.threshold = float(cfg.threshold)
        self.rejoin_threshold = float(cfg.rejoin_threshold)
        self.window_seconds = float(cfg.time_window_days) * DAY

    @property
    def _db(self) -> sqlite3.Connection:
        return self.runtime.db()

    # ------------------------------------------------------------------ online path

    def assign(
        self,
        ref: UserRef,
        entry_id: str,
        vector: np.ndarray,
        ts: float | datetime,
        *,
        text_hash: str | None = None,
    ) -> Decision:
        """Place one live Episode (taking it out of its current cluster first, if any)."""
        with transaction(self._db) as conn:
            return self._assign(conn, ref, entry_id, normalize(vector),
                                entry_epoch(entry_id, ts), text_hash)

    def on_entries_indexed(
        self,
        ref: UserRef,
        entries: Sequence[Entry],
        vectors: Mapping[str, np.ndarray] | np.ndarray,
    ) -> dict[str, str]:
        """Bring clusters up to date with new or changed Episodes (called by the indexer).

        Ordinary Episodes are (re)assigned, narratives attached to their cluster, deprecated
        ones retired. ``vectors`` is either ``{entry_id: vector}`` or an array aligned with
        ``entries``; vectors not given are read from the vector index when needed. Returns
        ``{entry_id: what happened}`` for logging and tests.
        """
        if not isinstance(vectors, Mapping):
            matrix = np.asarray(vectors)
            if matrix.ndim != 2 or len(matrix) != len(entries):
                raise ValueError(f"expected {len(entries)} vectors, got shape {matrix.shape}")
            vectors = {e.id: matrix[n] for n, e in enumerate(entries)}
        episodes = [e for e in entries if e.kind is Kind.EPISODE]
        episodes.sort(key=lambda e: (entry_epoch(e.id, e.timestamp), e.id))
        outcome: dict[str, str] = {}
        if not episodes:
            return outcome
        with transaction(self._db) as conn:
            members = self._member_rows(conn, ref, [e.id for e in episodes])
            missing = [e.id for e in episodes if e.id not in vectors and e.deprecated_by is None]
            stored = self._vectors(ref, missing) if missing else {}
            for e in episodes:
                ts = entry_epoch(e.id, e.timestamp)
                row = members.get(e.id)
                if e.deprecated_by is not None:
                    outcome[e.id] = self._retire(conn, ref, e.id, e.deprecated_by)
                    continue
                vec = vectors.get(e.id)
                vec = vec if vec is not None else stored.get(e.id)
                if vec is None:
                    log.warning("no vector for %s %s: not clustered", ref, e.id)
                    outcome[e.id] = "no-vector"
                    continue
                vec = normalize(vec)
                if e.parent_type == "cluster":
                    outcome[e.id] = self._attach_narrative(conn, ref, e.id, e.parent_id, vec, ts,
                                                           e.text_hash)
                elif row is not None and row["deprecated_by"] is not None:
                    outcome[e.id] = self._revive(conn, ref, e.id, vec, ts, e.text_hash)
                elif row is not None and row["text_hash"] == e.text_hash and row["ts"] == ts:
                    outcome[e.id] = "unchanged"
                else:
                    decision = self._assign(conn, ref, e.id, vec, ts, e.text_hash)
                    outcome[e.id] = decision.reason
        return outcome

    def on_entries_deprecated(self, ref: UserRef, mapping: Mapping[str, str | None]) -> None:
        """``{entry_id: deprecated_by}``: a non-None value retires the member (kept as history);
        None lifts the deprecation (undo) and the member returns to its cluster."""
        with transaction(self._db) as conn:
            lifted = [eid for eid, by in mapping.items() if by is None]
            stored = self._vectors(ref, lifted) if lifted else {}
            for eid, by in sorted(mapping.items()):
                if by is not None:
                    self._retire(conn, ref, eid, by)
                elif eid in stored:
                    row = conn.execute(
                        "SELECT ts, text_hash FROM entries WHERE app_id=? AND project_id=? "
                        "AND user_id=? AND id=?", (ref.app, ref.project, ref.user_id, eid)
                    ).fetchone()
                    ts = entry_epoch(eid, row["ts"] if row else None)
                    self._revive(conn, ref, eid, normalize(stored[eid]), ts,
                                 row["text_hash"] if row else None)

    def on_entries_removed(self, ref: UserRef, ids: Iterable[str]) -> None:
        """Entries deleted from Markdown: drop their membership and fix up their clusters."""
        ids = list(ids)
        if not ids:
            return
        with transaction(self._db) as conn:
            touched: set[str] = set()
            for eid in ids:
                row = conn.execute(
                    "SELECT cluster_id FROM cluster_members WHERE app_id=? AND project_id=? "
                    "AND user_id=? AND entry_id=?", (ref.app, ref.project, ref.user_id, eid)
                ).fetchone()
                if row is None:
                    continue
                conn.execute(
                    "DELETE FROM cluster_members WHERE app_id=? AND project_id=? AND user_id=? "
                    "AND entry_id=?", (ref.app, ref.project, ref.user_id, eid))
                conn.execute("UPDATE clusters SET consolidated_entry_id=NULL, "
                             "consolidated_at=NULL WHERE cluster_id=? AND consolidated_entry_id=?",
                             (row["cluster_id"], eid))
                touched.add(row["cluster_id"])
            for cluster_id in sorted(touched):
                self._recompute(conn, ref, cluster_id)

    # ------------------------------------------------------------------ Reflection

    def mark_consolidated(
        self,
        cluster_id: str,
        narrative_id: str,
        narrative_vector: np.ndarray,
        member_ids: Iterable[str],
    ) -> ClusterInfo:
        """The cluster now holds ``narrative_id``; ``member_ids`` (its sources) stop being live
        members and stay listed as history. Members that joined meanwhile stay live (they are the
        "new since consolidation" of the next run). Idempotent."""
        sources = sorted(set(member_ids) - {narrative_id})
        with transaction(self._db) as conn:
            row = conn.execute("SELECT * FROM clusters WHERE cluster_id=?",
                               (cluster_id,)).fetchone()
            if row is None:
                raise UnknownCluster(f"unknown cluster {cluster_id!r}")
            ref = UserRef(row["app_id"], row["project_id"], row["user_id"])
            if sources:
                marks = ",".join("?" * len(sources))
                ts_row = conn.execute(
                    f"SELECT MAX(ts) AS ts FROM cluster_members WHERE cluster_id=? "
                    f"AND entry_id IN ({marks})", (cluster_id, *sources)).fetchone()
                conn.execute(
                    f"UPDATE cluster_members SET deprecated_by=?, similarity=NULL "
                    f"WHERE cluster_id=? "
                    f"AND entry_id IN ({marks})", (narrative_id, cluster_id, *sources))
            else:
                ts_row = None
            existing = self._member_rows(conn, ref, [narrative_id]).get(narrative_id)
            if existing is not None and existing["cluster_id"] == cluster_id:
                ts = existing["ts"]
            else:
                if existing is not None:
                    self._detach(conn, ref, narrative_id)
                ts = ts_row["ts"] if ts_row and ts_row["ts"] is not None else row["last_ts"]
                self._insert_member(conn, ref, narrative_id, cluster_id, ts, None, None)
            conn.execute("UPDATE clusters SET consolidated_entry_id=?, consolidated_at=? "
                         "WHERE cluster_id=?", (narrative_id, utcnow_iso(), cluster_id))
            known = {narrative_id: normalize(narrative_vector)}
            self._recompute(conn, ref, cluster_id, known=known)
        return self.cluster(cluster_id)

    def eligible_for_reflection(self, ref: UserRef, max_clusters: int) -> list[ClusterInfo]:
        """Clusters worth a merge: ≥ 2 live members never consolidated, or consolidated and
        since joined by new members; largest first (ties by id), at most ``max_clusters``."""
        eligible = [
            c for c in self.clusters(ref)
            if (c.consolidated and c.new_since_consolidation > 0)
            or (not c.consolidated and c.size >= 2)
        ]
        eligible.sort(key=lambda c: (-c.size, c.cluster_id))
        return eligible[: max(0, max_clusters)]

    # ------------------------------------------------------------------ reading

    def clusters(self, ref: UserRef | None = None) -> list[ClusterInfo]:
        """Every cluster (of ``ref``, else of the root), most recent activity first."""
        where, params = _where_ref(ref, "c")
        return self._clusters_where(where, params, "ORDER BY c.last_ts DESC, c.cluster_id")

    def cluster(self, cluster_id: str) -> ClusterInfo:
        for info in self._clusters_where("c.cluster_id=?", (cluster_id,)):
            return info
        raise UnknownCluster(f"unknown cluster {cluster_id!r}")

    def members(self, cluster_id: str, live_only: bool = True) -> list[Member]:
        """Members in chronological order (then id); history too unless ``live_only``."""
        live = " AND deprecated_by IS NULL" if live_only else ""
        rows = self._db.execute(
            "SELECT entry_id, cluster_id, ts, similarity, deprecated_by FROM cluster_members "
            f"WHERE cluster_id=?{live} ORDER BY ts, entry_id", (cluster_id,)).fetchall()
        return [Member(r["entry_id"], r["cluster_id"], r["ts"], r["similarity"],
                       r["deprecated_by"]) for r in rows]

    def cluster_of(self, ref: UserRef, entry_id: str) -> str | None:
        row = self._db.execute(
            "SELECT cluster_id FROM cluster_members WHERE app_id=? AND project_id=? AND "
            "user_id=? AND entry_id=?", (ref.app, ref.project, ref.user_id, entry_id)).fetchone()
        return row["cluster_id"] if row else None

    # ------------------------------------------------------------------ rebuild

    def recluster(self, ref: UserRef | None = None) -> dict[str, int]:
        """Rebuild clusters from ``entries`` + stored vectors, deterministically.

        Per user: every live narrative re-creates the cluster its ``parent_id`` names, then all
        other live Episodes are assigned in (timestamp, id) order by the online rule. Returns
        counts (users, clusters, members, skipped for lack of a vector).
        """
        where, params = _where_ref(ref)
        refs = sorted({
            UserRef(r[0], r[1], r[2]) for r in self._db.execute(
                f"SELECT app_id, project_id, user_id FROM entries WHERE kind='episode' AND "
                f"{where} UNION SELECT app_id, project_id, user_id FROM clusters WHERE {where}",
                params + params)
        })
        totals = {"users": 0, "clusters": 0, "members": 0, "skipped": 0}
        rows = {user: self._episode_rows(user) for user in refs}
        vectors = self.runtime.vectors.get_vectors_many(Kind.EPISODE, {
            user: [r["id"] for r in user_rows if r["deprecated_by"] is None]
            for user, user_rows in rows.items()
        }) if len(refs) > 1 else {}
        for user in refs:
            counts = self._recluster_user(user, rows[user], vectors.get(user))
            totals["users"] += 1
            for key in ("clusters", "members", "skipped"):
                totals[key] += counts[key]
        return totals

    def _episode_rows(self, ref: UserRef) -> list[sqlite3.Row]:
        return self._db.execute(
            "SELECT id, ts, parent_type, parent_id, deprecated_by, text_hash FROM entries "
            "WHERE kind='episode' AND app_id=? AND project_id=? AND user_id=?",
            (ref.app, ref.project, ref.user_id)).fetchall()

    def _recluster_user(self, ref: UserRef, rows: list[sqlite3.Row],
                        vectors: dict[str, np.ndarray] | None = None) -> dict[str, int]:
        live = sorted((r for r in rows if r["deprecated_by"] is None),
                      key=lambda r: (entry_epoch(r["id"], r["ts"]), r["id"]))
        if vectors is None:
            vectors = self._vectors(ref, [r["id"] for r in live])
        plan = _Rebuild(ref, self.threshold, self.window_seconds, self.rejoin_threshold)
        skipped = 0
        narratives = [r for r in live if r["parent_type"] == "cluster"]
        # The newest live narrative of each cluster seeds it (it is the consolidated one).
        seeds: dict[str, Any] = {}
        for r in narratives:
            seeds[plan.narrative_cluster_id(r["id"], r["parent_id"])] = r
        for cid in sorted(seeds):
            r = seeds[cid]
            if r["id"] not in vectors:
                skipped += 1
                continue
            plan.seed(cid, r, normalize(vectors[r["id"]]))
        for r in live:
            if r["id"] in plan.member_of or r["id"] not in vectors:
                skipped += r["id"] not in vectors
                continue
            vec = normalize(vectors[r["id"]])
            if r["parent_type"] == "cluster":
                plan.attach(plan.narrative_cluster_id(r["id"], r["parent_id"]), r, vec)
            else:
                plan.assign(r, vec)
        plan.history([r for r in rows if r["deprecated_by"] is not None])
        with transaction(self._db) as conn:
            conn.execute("DELETE FROM clusters WHERE app_id=? AND project_id=? AND user_id=?",
                         (ref.app, ref.project, ref.user_id))
            conn.execute("DELETE FROM cluster_members WHERE app_id=? AND project_id=? AND "
                         "user_id=?", (ref.app, ref.project, ref.user_id))
            now = utcnow_iso()
            for c in plan.clusters.values():
                self._insert_cluster(conn, ref, c, now)
                if c.consolidated_entry_id is not None:
                    conn.execute("UPDATE clusters SET consolidated_at=? WHERE cluster_id=?",
                                 (now, c.cluster_id))
            conn.executemany(
                "INSERT INTO cluster_members (app_id, project_id, user_id, entry_id, cluster_id,"
                " ts, similarity, joined_at, deprecated_by, text_hash) VALUES "
                "(?,?,?,?,?,?,?,?,?,?)",
                [(ref.app, ref.project, ref.user_id, m[0], m[1], m[2], m[3], now, m[4], m[5])
                 for m in plan.members])
        return {"clusters": len(plan.clusters), "members": len(plan.members), "skipped": skipped}

    # ------------------------------------------------------------------ internals

    def _vectors(self, ref: UserRef, ids: Sequence[str]) -> dict[str, np.ndarray]:
        if not ids:
            return {}
        return self.runtime.vectors.get_vectors(Kind.EPISODE, ref, ids)

    def _candidates(self, conn: sqlite3.Connection, ref: UserRef, ts: float) -> list[_Cluster]:
        """Clusters in the time window of ``ts`` plus the user's consolidated ones — never the
        user's whole history (``clusters_by_user_time`` and ``clusters_consolidated``)."""
        base = (ref.app, ref.project, ref.user_id)
        rows = conn.execute(
            "SELECT * FROM clusters WHERE app_id=? AND project_id=? AND user_id=? "
            "AND last_ts >= ? AND first_ts <= ? "
            "UNION SELECT * FROM clusters WHERE app_id=? AND project_id=? AND user_id=? "
            "AND consolidated_entry_id IS NOT NULL",
            (*base, ts - self.window_seconds, ts + self.window_seconds, *base)).fetchall()
        return [_row_cluster(r) for r in rows]

    def _assign(self, conn: sqlite3.Connection, ref: UserRef, entry_id: str,
                vec: np.ndarray, ts: float, text_hash: str | None) -> Decision:
        self._detach(conn, ref, entry_id)
        candidates = self._candidates(conn, ref, ts)
        decision = choose_cluster(
            vec, ts, [c.candidate() for c in candidates], threshold=self.threshold,
            window_seconds=self.window_seconds, rejoin_threshold=self.rejoin_threshold)
        if decision.cluster_id is None:
            cid = self._free_cluster_id(conn, ref, entry_id)
            cluster = _Cluster.new(cid, vec, ts)
            self._insert_cluster(conn, ref, cluster, utcnow_iso())
            self._insert_member(conn, ref, entry_id, cid, ts, None, text_hash)
            return Decision(cid, decision.similarity, NEW)
        cluster = next(c for c in candidates if c.cluster_id == decision.cluster_id)
        cluster.add(vec, ts)
        self._save_cluster(conn, cluster)
        self._insert_member(conn, ref, entry_id, cluster.cluster_id, ts, decision.similarity,
                            text_hash)
        return decision

    def _attach_narrative(self, conn: sqlite3.Connection, ref: UserRef, entry_id: str,
                          parent_id: str | None, vec: np.ndarray, ts: float,
                          text_hash: str | None) -> str:
        cid = parent_id if parent_id and CLUSTER_ID_RE.fullmatch(parent_id) else \
            cluster_id_for(ref.app, ref.project, ref.user_id, entry_id)
        row = self._member_rows(conn, ref, [entry_id]).get(entry_id)
        if row is not None and row["cluster_id"] != cid:
            self._detach(conn, ref, entry_id)
            row = None
        cluster = conn.execute("SELECT * FROM clusters WHERE cluster_id=?", (cid,)).fetchone()
        if cluster is not None and (cluster["app_id"], cluster["project_id"],
                                    cluster["user_id"]) != (ref.app, ref.project, ref.user_id):
            log.warning("narrative %s names cluster %s of another user; not attached",
                        entry_id, cid)
            return "foreign-cluster"
        if cluster is None:
            self._insert_cluster(conn, ref, _Cluster.new(cid, vec, ts, entry_id),
                                 utcnow_iso())
            conn.execute("UPDATE clusters SET consolidated_at=? WHERE cluster_id=?",
                         (utcnow_iso(), cid))
            self._insert_member(conn, ref, entry_id, cid, ts, None, text_hash)
            return "narrative-new-cluster"
        if row is None:
            self._insert_member(conn, ref, entry_id, cid, ts, None, text_hash)
        else:
            conn.execute("UPDATE cluster_members SET ts=?, text_hash=?, deprecated_by=NULL "
                         "WHERE cluster_id=? AND entry_id=?", (ts, text_hash, cid, entry_id))
        current = cluster["consolidated_entry_id"]
        newer = current is None or current == entry_id or self._newer_than(conn, cid, entry_id,
                                                                           current)
        if newer:
            conn.execute("UPDATE clusters SET consolidated_entry_id=?, consolidated_at="
                         "COALESCE(CASE WHEN consolidated_entry_id=? THEN consolidated_at END, ?)"
                         " WHERE cluster_id=?", (entry_id, entry_id, utcnow_iso(), cid))
        self._recompute(conn, ref, cid, known={entry_id: vec})
        return "narrative"

    def _newer_than(self, conn: sqlite3.Connection, cid: str, a: str, b: str) -> bool:
        """True if member ``a`` sorts after member ``b`` by (ts, id), or ``b`` is not live."""
        rows = {r["entry_id"]: r for r in conn.execute(
            "SELECT entry_id, ts, deprecated_by FROM cluster_members WHERE cluster_id=? AND "
            "entry_id IN (?, ?)", (cid, a, b))}
        if b not in rows or rows[b]["deprecated_by"] is not None:
            return True
        return (rows[a]["ts"], a) > (rows[b]["ts"], b)

    def _retire(self, conn: sqlite3.Connection, ref: UserRef, entry_id: str, by: str) -> str:
        row = self._member_rows(conn, ref, [entry_id]).get(entry_id)
        if row is None or row["deprecated_by"] == by:
            return "not-member" if row is None else "unchanged"
        cid = row["cluster_id"]
        conn.execute("UPDATE cluster_members SET deprecated_by=?, similarity=NULL "
                     "WHERE cluster_id=? AND entry_id=?", (by, cid, entry_id))
        # A superseded narrative hands over to its successor when that is already attached.
        successor = conn.execute(
            "SELECT 1 FROM cluster_members WHERE cluster_id=? AND entry_id=? AND "
            "deprecated_by IS NULL", (cid, by)).fetchone()
        conn.execute("UPDATE clusters SET consolidated_entry_id=?, consolidated_at="
                     "CASE WHEN ? IS NULL THEN NULL ELSE consolidated_at END "
                     "WHERE cluster_id=? AND consolidated_entry_id=?",
                     (by if successor else None, by if successor else None, cid, entry_id))
        self._recompute(conn, ref, cid)
        return "retired"

    def _revive(self, conn: sqlite3.Connection, ref: UserRef, entry_id: str, vec: np.ndarray,
                ts: float, text_hash: str | None) -> str:
        row = self._member_rows(conn, ref, [entry_id]).get(entry_id)
        if row is None:
            return self._assign(conn, ref, entry_id, vec, ts, text_hash).reason
        if row["deprecated_by"] is None:
            return "unchanged"
        conn.execute("UPDATE cluster_members SET deprecated_by=NULL, ts=?, text_hash=? "
                     "WHERE cluster_id=? AND entry_id=?", (ts, text_hash, row["cluster_id"],
                                                          entry_id))
        self._recompute(conn, ref, row["cluster_id"], known={entry_id: vec})
        return "revived"

    def _detach(self, conn: sqlite3.Connection, ref: UserRef, entry_id: str) -> None:
        row = self._member_rows(conn, ref, [entry_id]).get(entry_id)
        if row is None:
            return
        conn.execute("DELETE FROM cluster_members WHERE app_id=? AND project_id=? AND user_id=? "
                     "AND entry_id=?", (ref.app, ref.project, ref.user_id, entry_id))
        if row["deprecated_by"] is None:
            self._recompute(conn, ref, row["cluster_id"])

    def _recompute(self, conn: sqlite3.Connection, ref: UserRef, cluster_id: str,
                   known: Mapping[str, np.ndarray] | None = None) -> None:
        """Rebuild a cluster's centroid, count and span from its live members; delete it when
        none is left (its history rows go with it)."""
        row = conn.execute("SELECT consolidated_entry_id FROM clusters WHERE cluster_id=?",
                           (cluster_id,)).fetchone()
        if row is None:
            return
        members = conn.execute(
            "SELECT entry_id, ts FROM cluster_members WHERE cluster_id=? AND deprecated_by IS "
            "NULL", (cluster_id,)).fetchall()
        if not members:
            conn.execute("DELETE FROM clusters WHERE cluster_id=?", (cluster_id,))
            return
        narrative = row["consolidated_entry_id"]
        order = sorted(members, key=lambda m: (m["entry_id"] != narrative, m["ts"],
                                               m["entry_id"]))
        known = dict(known or {})
        need = [m["entry_id"] for m in order if m["entry_id"] not in known]
        known.update({k: normalize(v) for k, v in self._vectors(ref, need).items()})
        vecs = [known[m["entry_id"]] for m in order if m["entry_id"] in known]
        if len(vecs) < len(order):
            log.warning("cluster %s: %d member vector(s) missing; centroid from the rest",
                        cluster_id, len(order) - len(vecs))
        centroid, norm, _ = mean_of(vecs)
        if centroid is None:
            return
        cluster = _Cluster(cluster_id, centroid, norm, len(order),
                           min(m["ts"] for m in order), max(m["ts"] for m in order), narrative)
        self._save_cluster(conn, cluster)

    def _free_cluster_id(self, conn: sqlite3.Connection, ref: UserRef, first: str) -> str:
        attempt = 0
        while True:
            cid = cluster_id_for(ref.app, ref.project, ref.user_id, first, attempt)
            if conn.execute("SELECT 1 FROM clusters WHERE cluster_id=?", (cid,)).fetchone() is None:
                return cid
            attempt += 1

    @staticmethod
    def _member_rows(conn: sqlite3.Connection, ref: UserRef,
                     ids: Sequence[str]) -> dict[str, sqlite3.Row]:
        out: dict[str, sqlite3.Row] = {}
        for start in range(0, len(ids), 500):
            chunk = list(ids[start:start + 500])
            marks = ",".join("?" * len(chunk))
            for r in conn.execute(
                f"SELECT * FROM cluster_members WHERE app_id=? AND project_id=? AND user_id=? "
                f"AND entry_id IN ({marks})", (ref.app, ref.project, ref.user_id, *chunk)):
                out[r["entry_id"]] = r
        return out

    @staticmethod
    def _insert_cluster(conn: sqlite3.Connection, ref: UserRef, c: _Cluster, now: str) -> None:
        conn.execute(
            "INSERT INTO clusters (cluster_id, app_id, project_id, user_id, centroid, "
            "centroid_norm, member_count, first_ts, last_ts, consolidated_entry_id, created_at) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (c.cluster_id, ref.app, ref.project, ref.user_id, _blob(c.centroid), c.norm,
             c.count, c.first_ts, c.last_ts, c.consolidated_entry_id, now))

    @staticmethod
    def _save_cluster(conn: sqlite3.Connection, c: _Cluster) -> None:
        conn.execute(
            "UPDATE clusters SET centroid=?, centroid_norm=?, member_count=?, first_ts=?, "
            "last_ts=? WHERE cluster_id=?",
            (_blob(c.centroid), c.norm, c.count, c.first_ts, c.last_ts, c.cluster_id))

    @staticmethod
    def _insert_member(conn: sqlite3.Connection, ref: UserRef, entry_id: str, cluster_id: str,
                       ts: float, similarity: float | None, text_hash: str | None) -> None:
        conn.execute(
            "INSERT INTO cluster_members (app_id, project_id, user_id, entry_id, cluster_id, ts,"
            " similarity, joined_at, text_hash) VALUES (?,?,?,?,?,?,?,?,?)",
            (ref.app, ref.project, ref.user_id, entry_id, cluster_id, ts, similarity,
             utcnow_iso(), text_hash))

    def _clusters_where(self, where: str, params: tuple[Any, ...],
                        order: str = "") -> list[ClusterInfo]:
        rows = self._db.execute(
            f"""SELECT c.*,
                   (SELECT COUNT(*) FROM cluster_members m WHERE m.cluster_id=c.cluster_id
                      AND m.deprecated_by IS NULL
                      AND m.entry_id IS NOT c.consolidated_entry_id) AS new_since,
                   COALESCE(c.consolidated_entry_id,
                     (SELECT m.entry_id FROM cluster_members m WHERE m.cluster_id=c.cluster_id
                        AND m.deprecated_by IS NULL ORDER BY m.ts, m.entry_id LIMIT 1))
                     AS preview_id
                FROM clusters c WHERE {where} {order}""", params).fetchall()
        subjects = self._subjects(rows)
        return [self._info(r, subjects) for r in rows]

    def _subjects(self, rows: Sequence[sqlite3.Row]) -> dict[tuple[str, str, str, str], str]:
        keys = [(r["app_id"], r["project_id"], r["user_id"], r["preview_id"]) for r in rows
                if r["preview_id"]]
        out: dict[tuple[str, str, str, str], str] = {}
        for start in range(0, len(keys), 200):
            chunk = keys[start:start + 200]
            cond = " OR ".join(["(app_id=? AND project_id=? AND user_id=? AND id=?)"] * len(chunk))
            flat = [v for k in chunk for v in k]
            for r in self._db.execute(
                    f"SELECT app_id, project_id, user_id, id, subject FROM entries WHERE {cond}",
                    flat):
                out[(r["app_id"], r["project_id"], r["user_id"], r["id"])] = r["subject"]
        return out

    @staticmethod
    def _info(r: sqlite3.Row, subjects: Mapping[tuple[str, str, str, str], str]) -> ClusterInfo:
        ref = UserRef(r["app_id"], r["project_id"], r["user_id"])
        preview = subjects.get((r["app_id"], r["project_id"], r["user_id"], r["preview_id"]), "")
        consolidated = r["consolidated_entry_id"]
        return ClusterInfo(
            cluster_id=r["cluster_id"], ref=ref, size=r["member_count"], first_ts=r["first_ts"],
            last_ts=r["last_ts"], preview=preview, consolidated_entry_id=consolidated,
            consolidated_at=r["consolidated_at"],
            new_since_consolidation=r["new_since"] if consolidated else 0)


def _blob(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def _row_cluster(r: sqlite3.Row) -> _Cluster:
    return _Cluster(r["cluster_id"], np.frombuffer(r["centroid"], dtype="<f4").copy(),
                    float(r["centroid_norm"]), int(r["member_count"]), float(r["first_ts"]),
                    float(r["last_ts"]), r["consolidated_entry_id"])


class _Rebuild:
    """In-memory replay of the online rule for one user (``recluster``)."""

    def __init__(self, ref: UserRef, threshold: float, window: float, rejoin: float) -> None:
        self.ref, self.threshold, self.window, self.rejoin = ref, threshold, window, rejoin
        self.clusters: dict[str, _Cluster] = {}
        self.recent: dict[str, _Cluster] = {}  # may still be in the window of later Episodes
        self.consolidated: dict[str, _Cluster] = {}
        # (entry_id, cluster_id, ts, similarity, deprecated_by, text_hash)
        self.members: list[tuple[str, str, float, float | None, str | None, str | None]] = []
        self.member_of: dict[str, str] = {}

    def narrative_cluster_id(self, entry_id: str, parent_id: str | None) -> str:
        if parent_id and CLUSTER_ID_RE.fullmatch(parent_id):
            return parent_id
        return cluster_id_for(self.ref.app, self.ref.project, self.ref.user_id, entry_id)

    def seed(self, cid: str, r: Any, vec: np.ndarray) -> None:
        ts = entry_epoch(r["id"], r["ts"])
        c = _Cluster.new(cid, vec, ts, r["id"])
        self.clusters[cid] = self.consolidated[cid] = c
        self._member(r, cid, ts, None)

    def attach(self, cid: str, r: Any, vec: np.ndarray) -> None:
        ts = entry_epoch(r["id"], r["ts"])
        c = self.clusters.get(cid)
        if c is None:  # a narrative whose vector was missing for the seed
            self.seed(cid, r, vec)
            return
        c.add(vec, ts)
        self._member(r, cid, ts, None)

    def assign(self, r: Any, vec: np.ndarray) -> None:
        ts = entry_epoch(r["id"], r["ts"])
        horizon = ts - self.window
        for cid in [cid for cid, c in self.recent.items() if c.last_ts < horizon]:
            del self.recent[cid]  # timestamps only grow from here: it can never be in window
        pool = {c.cluster_id: c for c in self.recent.values()
                if in_window(ts, c.first_ts, c.last_ts, self.window)}
        pool.update(self.consolidated)
        decision = choose_cluster(vec, ts, [c.candidate() for c in pool.values()],
                                  threshold=self.threshold, window_seconds=self.window,
                                  rejoin_threshold=self.rejoin)
        if decision.cluster_id is None:
            attempt = 0
            while True:
                cid = cluster_id_for(self.ref.app, self.ref.project, self.ref.user_id, r["id"],
                                     attempt)
                if cid not in self.clusters:
                    break
                attempt += 1
            c = _Cluster.new(cid, vec, ts)
            self.clusters[cid] = self.recent[cid] = c
            self._member(r, cid, ts, None)
            return
        c = pool[decision.cluster_id]
        c.add(vec, ts)
        self.recent[c.cluster_id] = c
        self._member(r, c.cluster_id, ts, decision.similarity)

    def history(self, deprecated: Sequence[Any]) -> None:
        """Record replaced Episodes as non-live members of the cluster their replacement (or
        its replacement, for chains of updates) lives in."""
        by = {r["id"]: r["deprecated_by"] for r in deprecated}
        for r in sorted(deprecated, key=lambda r: (entry_epoch(r["id"], r["ts"]), r["id"])):
            target, hops = r["deprecated_by"], 0
            while target in by and hops < 64:
                target, hops = by[target], hops + 1
            cid = self.member_of.get(target)
            if cid is not None and self.clusters[cid].consolidated_entry_id is not None:
                self.members.append((r["id"], cid, entry_epoch(r["id"], r["ts"]), None,
                                     r["deprecated_by"], r["text_hash"]))

    def _member(self, r: Any, cid: str, ts: float, similarity: float | None) -> None:
        self.members.append((r["id"], cid, ts, similarity, None, r["text_hash"]))
        self.member_of[r["id"]] = cid


__all__ = ["ClusterInfo", "ClusterService", "Member", "UnknownCluster"]
