"""Which clusters Reflection is offered (``ClusterService.eligible_for_reflection``) and the
cluster listing it is built on (``clusters``), checked against the reading they replace on
random histories: Episodes placed, clusters consolidated, members archived, lifted and
deleted, over two owners.

Session 39 (issue 15): SQLite now keeps only the eligible clusters, in order, and the
listing reads each cluster's preview in the same statement; before, every cluster of the
owner was read into Python (~75 ms a call at 7,364 clusters) and most were dropped."""

from __future__ import annotations

import random
import sqlite3
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from everos_reflect.clustering.service import ClusterInfo, ClusterService
from everos_reflect.index import db as dbmod
from everos_reflect.model import UserRef
from everos_reflect.settings import ClusteringSettings
from tests.test_cluster_service import FakeRuntime

DAY = 86400.0
T0 = 1_780_000_000.0
OWNERS = (UserRef.of("u_one"), UserRef.of("u_two"))
TOPICS = np.random.default_rng(7).normal(size=(3, 16))


def reference_clusters(conn: sqlite3.Connection, ref: UserRef) -> list[ClusterInfo]:
    """``ClusterService.clusters(ref)`` as session 38 read it: every row, then the previews'
    subjects looked up by key."""
    conn.row_factory = sqlite3.Row
    rows = conn.execute(
        """SELECT c.*,
               (SELECT COUNT(*) FROM cluster_members m WHERE m.cluster_key=c.cluster_key
                  AND m.deprecated_by IS NULL
                  AND m.entry_id IS NOT c.consolidated_entry_id) AS new_since,
               COALESCE(c.consolidated_entry_id,
                 (SELECT m.entry_id FROM cluster_members m WHERE m.cluster_key=c.cluster_key
                    AND m.deprecated_by IS NULL ORDER BY m.ts, m.entry_id LIMIT 1))
                 AS preview_id
            FROM clusters c WHERE c.app_id=? AND c.project_id=? AND c.user_id=?
            ORDER BY c.last_ts DESC, c.cluster_id""",
        (ref.app, ref.project, ref.user_id)).fetchall()
    out = []
    for r in rows:
        subject = conn.execute(
            "SELECT subject FROM entries WHERE app_id=? AND project_id=? AND user_id=? "
            "AND id=?", (r["app_id"], r["project_id"], r["user_id"], r["preview_id"])).fetchone()
        consolidated = r["consolidated_entry_id"]
        out.append(ClusterInfo(
            cluster_id=r["cluster_id"], ref=ref, size=r["member_count"],
            first_ts=r["first_ts"], last_ts=r["last_ts"],
            preview=subject[0] if subject else "", consolidated_entry_id=consolidated,
            consolidated_at=r["consolidated_at"],
            new_since_consolidation=r["new_since"] if consolidated else 0))
    return out


def reference_eligible(conn: sqlite3.Connection, ref: UserRef, limit: int) -> list[ClusterInfo]:
    """``eligible_for_reflection`` as session 38 wrote it: the listing, filtered and sorted."""
    eligible = [c for c in reference_clusters(conn, ref)
                if (c.consolidated and c.new_since_consolidation > 0)
                or (not c.consolidated and c.size >= 2)]
    eligible.sort(key=lambda c: (-c.size, c.cluster_id))
    return eligible[:max(0, limit)]


def _vector(topic: int, noise: float, seed: int) -> np.ndarray:
    v = TOPICS[topic] + np.random.default_rng(seed).normal(size=16) * noise
    return (v / np.linalg.norm(v)).astype(np.float32)


def _entry_row(conn: sqlite3.Connection, ref: UserRef, eid: str, ts: float,
               subject: str | None) -> None:
    if subject is None:  # an Episode the index has no row for: its preview is ""
        return
    conn.execute(
        "INSERT OR REPLACE INTO entries (app_id, project_id, user_id, id, kind, path, ts, "
        "subject, text, parent_type, content_hash, text_hash) "
        "VALUES (?, ?, ?, ?, 'episode', 'x.md', ?, ?, ?, 'memcell', '', '')",
        (ref.app, ref.project, ref.user_id, eid, ts, subject, subject))


def _history(seed: int, length: int) -> list[tuple[str, int, int]]:
    """``(what, owner, pick)`` steps: mostly Episodes placed, among them consolidations,
    archived members, lifted archivings and deleted Episodes (random draws in these
    proportions reach every kind of eligible cluster; hypothesis's own draws of such steps
    mostly placed a few Episodes and consolidated nothing)."""
    rng = random.Random(seed)
    kinds = ["place"] * 12 + ["consolidate"] * 3 + ["archive"] * 2 + ["lift", "delete", "delete"]
    return [(rng.choice(kinds), rng.randrange(2), rng.randrange(1000)) for _ in range(length)]


@settings(max_examples=15, deadline=None, database=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 60), st.integers(0, 6))
def test_eligible_and_listing_match_the_reading_they_replace(seed: int, length: int,
                                                              limit: int) -> None:
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory() as tmp:
        rt = FakeRuntime(Path(tmp), ClusteringSettings(
            threshold=0.6, time_window_days=7.0, rejoin_threshold=0.8, member_threshold=0.0))
        svc = ClusterService(rt)
        conn = rt.db()
        placed: dict[UserRef, list[str]] = {ref: [] for ref in OWNERS}
        archived: dict[UserRef, list[str]] = {ref: [] for ref in OWNERS}
        for n, (what, owner, pick) in enumerate(_history(seed, length)):
            ref = OWNERS[owner]
            if what == "place":
                eid = f"ep_20260803_{n + 1:04d}"
                topic = pick % len(TOPICS)
                vec = _vector(topic, float(rng.uniform(0.05, 1.5)), n)
                ts = T0 + float(rng.integers(0, 30)) * DAY
                rt.vectors.data[(ref, eid)] = vec
                with dbmod.transaction(conn):
                    _entry_row(conn, ref, eid, ts, f"topic {topic} #{n}" if pick % 5 else None)
                svc.assign(ref, eid, vec, ts)
                placed[ref].append(eid)
            elif what == "consolidate":
                offered = svc.eligible_for_reflection(ref, 100)
                if offered:
                    info = offered[pick % len(offered)]
                    live = [m.entry_id for m in svc.members(info.cluster_id)]
                    narrative = f"ep_20260901_{n + 1:04d}"
                    vec = _vector(pick % len(TOPICS), 0.3, 10_000 + n)
                    rt.vectors.data[(ref, narrative)] = vec
                    with dbmod.transaction(conn):
                        _entry_row(conn, ref, narrative, T0, f"narrative #{n}")
                    svc.mark_consolidated(info.cluster_id, narrative, vec, live)
                    placed[ref].append(narrative)  # may be archived or deleted in turn
            elif placed[ref]:
                eid = placed[ref][pick % len(placed[ref])]
                if what == "archive":
                    svc.on_entries_deprecated(ref, {eid: "ep_20990101_0001"})
                    archived[ref].append(eid)
                elif what == "lift" and archived[ref]:
                    svc.on_entries_deprecated(ref, {archived[ref].pop(): None})
                elif what == "delete":
                    svc.on_entries_removed(ref, [eid])
                    placed[ref].remove(eid)
        check = sqlite3.connect(dbmod.db_path(Path(tmp)))
        for ref in OWNERS:
            assert svc.clusters(ref) == reference_clusters(check, ref)
            for k in (limit, 100, 10**30):  # (10**30: more than SQLite's integers hold)
                assert svc.eligible_for_reflection(ref, k) == reference_eligible(check, ref, k)
        assert svc.eligible_for_reflection(OWNERS[0], -1) == []
        check.close()


class _CountingConnection:
    """A connection that counts the rows its statements hand to Python."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn, self.rows, self.statements = conn, 0, 0

    def execute(self, sql: str, params: Sequence[object] = ()) -> _CountingConnection:
        self.statements += 1
        self._cursor = self.conn.execute(sql, params)
        return self

    def fetchall(self) -> list[sqlite3.Row]:
        rows = self._cursor.fetchall()
        self.rows += len(rows)
        return rows

    def __iter__(self) -> Iterator[sqlite3.Row]:
        return iter(self.fetchall())


def test_only_the_eligible_clusters_are_read_into_python(tmp_path: Path) -> None:
    """Of 38 one-Episode clusters and two of two, the two are read, in one statement."""
    rt = FakeRuntime(tmp_path, ClusteringSettings(
        threshold=0.6, time_window_days=7.0, rejoin_threshold=0.8, member_threshold=0.0))
    svc = ClusterService(rt)
    ref = OWNERS[0]
    for n in range(42):  # 40 days apart: no join, but for the two pairs (0 and 40, 1 and 41)
        day = 40 * n if n < 40 else 40 * (n - 40) + 1
        eid = f"ep_20260803_{n + 1:04d}"
        vec = _vector(n % 40 % 3, 0.05, n % 40)
        rt.vectors.data[(ref, eid)] = vec
        svc.assign(ref, eid, vec, T0 + day * DAY)
    counting = _CountingConnection(rt.db())
    rt.db = lambda: counting  # type: ignore[method-assign]
    offered = svc.eligible_for_reflection(ref, 10)
    assert [c.size for c in offered] == [2, 2]
    assert (counting.statements, counting.rows) == (1, 2)
