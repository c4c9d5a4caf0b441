"""Cluster state in ``system.db``: online assignment, consolidation bookkeeping, full rebuild.

The rule lives in :mod:`online`; this module loads the candidates it needs, applies its answer
and keeps ``clusters`` / ``cluster_members`` consistent. The rules it applies to changing data:

- Order: a batch is processed in (timestamp, id) order; :meth:`ClusterService.recluster`
  replays every live Episode of a user in that order, so incremental assignment in timestamp
  order and a rebuild give the same clusters, ids and centroids.
- Out of order: an Episode older than a cluster's first member may still join it — the window is
  checked against both ends of the cluster's span (see :mod:`online`). A cluster joined before
  members placed after it is replayed as a rebuild has it (centroid, similarities, id); which
  cluster each Episode lands in can still differ from a rebuild, and ``recluster`` restores
  the canonical result.
- Ids: a cluster is named after its first live member (:func:`online.cluster_id_for`), a
  consolidated one after its narrative's ``parent_id``; one whose first member changed is
  renamed before COMMIT, as a rebuild names it (audit rows keep the id they named). An id
  names one cluster across users: an Episode founds no id another user's live narrative
  names (:func:`_free_id`).
- Edited late: a changed text or timestamp takes the Episode out of its cluster (centroid
  recomputed from the rest) and assigns it again as if new; a metadata-only change keeps it.
- Narratives (``parent_type: cluster``) are never assigned by similarity: they are attached to
  the cluster their ``parent_id`` names (recreated under that id if needed) and make it
  *consolidated*. Members they replace stay listed as history with ``deprecated_by`` set.
  One written by hand into a cluster that holds live Episodes places its user's Episodes as
  a rebuild does, once its transaction is committed: a rebuild seeds the cluster with it
  first, and those unlike it found clusters of their own.
- After Reflection: a run places the Episodes of each user it merged for as a rebuild does
  (:meth:`ClusterService.place_after_merges`), once its merges are done.
- Undo: a member whose deprecation is lifted returns to the cluster it was in if the rule puts
  it there (a rebuild replays it so); else it is placed by the rule, a new cluster included.
  An ``undo`` then places the user's Episodes as a rebuild does
  (:meth:`ClusterService.place_after_undo`).
- Centroid of a cluster = normalised mean of its live members, folded in canonical order: the
  consolidated narrative first, then the rest by (timestamp, id).
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from everos_reflect.clustering.matrix import BLAS_STEP, ClusterRow, UserClusters, one_blas_thread
from everos_reflect.clustering.online import (
    NEW,
    VERSION_FLOOR,
    Decision,
    cluster_id_for,
    fold,
    in_window,
    in_window_rows,
    mean_of,
    normalize,
    normalize_rows,
    similarities,
    window_start,
)
from everos_reflect.errors import EverosError
from everos_reflect.index import events, meta_users, rebuild
from everos_reflect.index.db import (
    CLUSTER_KEY_OF_ID,
    cluster_key_of_id,
    id_batches,
    transaction,
    utcnow_iso,
)
from everos_reflect.llm.extractive import tells_change, tells_newer_version
from everos_reflect.model import Entry, EntryId, Kind, UserRef, parse_timestamp, quoted_value
from everos_reflect.problem_words import counted

if TYPE_CHECKING:
    from everos_reflect.runtime import Runtime

log = logging.getLogger(__name__)

CLUSTER_ID_RE = re.compile(r"^cl_[0-9a-f]{12}$")
DAY = 86400.0
#: Episodes per group of users rebuilt together by ``recluster`` (bounds its memory)
REBUILD_GROUP = 20_000
#: clusters kept in memory across users (~1.6 KB each at 384 dims: ~80 MB at the cap)
MAX_CACHED_CLUSTERS = 50_000
#: the ``merge_journal`` step of an ``undo``'s row (``strategies.journal.UNDOING``, not
#: imported: strategies import clustering)
_UNDOING = "undoing"
#: ``index_meta`` key of the users owed their placing after merges
#: (:meth:`ClusterService.owe_placing`): noted where it becomes due, removed as each is placed
PLACING_OWED_KEY = "placing_owed"


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


_Cluster = ClusterRow


#: sort key of ``(epoch, entry_id, ...)`` tuples: (timestamp, id) order
_BY_TS_ID = itemgetter(0, 1)


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


def _episodes_of(entries: Iterable[Entry]) -> list[tuple[float, str, Entry]]:
    """``(epoch, id, entry)`` of each Episode of ``entries``, in (timestamp, id) order (stable:
    an id given twice keeps its order). Entry properties parse or hash on every access: the
    epoch is read here once per Episode and carried."""
    return sorted(((entry_epoch(e.id, e.timestamp), e.id, e) for e in entries
                   if e.kind is Kind.EPISODE), key=_BY_TS_ID)


class _Episodes(list[Entry]):
    """Entries :meth:`ClusterService.on_entries_indexed_many` hands over with their
    :func:`_episodes_of` already read (``episodes``), which ``on_entries_indexed`` takes
    instead of reading every Episode's epoch a second time, and which of them the index
    held as narratives (``unparented``, None when not known)."""

    __slots__ = ("episodes", "unparented")

    def __init__(self, entries: Iterable[Entry],
                 episodes: list[tuple[float, str, Entry]],
                 unparented: set[str] | None = None) -> None:
        super().__init__(entries)
        self.episodes = episodes
        self.unparented = unparented


#: The narrative metadata key a Reflection merge writes its time to (ISO 8601, UTC).
MERGED_AT_KEY = "merged_at"


def consolidated_time(entry_id: str, meta: Mapping[str, Any]) -> str:
    """A cluster's ``consolidated_at`` while ``entry_id`` (with metadata ``meta``) is its
    narrative, per the Markdown: the narrative's ``merged_at``, else (a narrative written
    before merges recorded it, or one a person wrote) midnight UTC of its id's day, the day
    the merge wrote it. The online index and a rebuild read the same value: the index's
    clock gave the rebuild's time to every consolidated cluster after ``reindex``."""
    at = parse_timestamp(meta.get(MERGED_AT_KEY))  # naive: taken as UTC
    if at is None:
        day = EntryId.parse(entry_id).day
        at = datetime(day.year, day.month, day.day, tzinfo=UTC)
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def _where_ref(ref: UserRef | None, alias: str = "") -> tuple[str, tuple[str, ...]]:
    if ref is None:
        return "1=1", ()
    p = f"{alias}." if alias else ""
    return (f"{p}app_id=? AND {p}project_id=? AND {p}user_id=?",
            (ref.app, ref.project, ref.user_id))


class _Cache:
    """The in-memory cluster state of one runtime, shared by every ``ClusterService`` made on
    it (the indexer, Reflection and the CLI each construct their own). Bounded: past
    ``MAX_CACHED_CLUSTERS`` clusters, the users used least recently are dropped (and reloaded
    from SQLite when next needed), so a daemon serving many users stays within its budget."""

    def __init__(self, generation: int = 0) -> None:
        #: the runtime's ``index_generation`` this cache was made for
        self.generation = generation
        self.lock = threading.RLock()
        self.users: OrderedDict[UserRef, UserClusters] = OrderedDict()
        #: each held user's clusters as last counted (when its state came in, and at the
        #: end of each transaction that touched it), and their sum
        self.counted: dict[UserRef, int] = {}
        self.held = 0
        #: (connection, its ``PRAGMA data_version``, its ``total_changes``) when it last
        #: committed through the cache: while all three still hold, every cached state is
        #: current (``_Write._unchanged``)
        self.seen: tuple[sqlite3.Connection, int, int] | None = None

    def use(self, ref: UserRef, st: UserClusters, keep: Iterable[UserRef]) -> None:
        """Mark ``ref`` most recently used; a state new to the cache may push others out
        (one already held grows only by what a transaction adds: ``finish`` counts and
        trims then)."""
        known = self.users.get(ref) is st
        self.users[ref] = st
        self.users.move_to_end(ref)
        if not known:
            self._count(ref, len(st))
            self.trim({ref, *keep})

    def _count(self, ref: UserRef, size: int) -> None:
        self.held += size - self.counted.get(ref, 0)
        self.counted[ref] = size

    def recount(self, touched: Mapping[UserRef, UserClusters]) -> None:
        """Count again the users a transaction touched (and still held): what it added to
        or took from their states. The users it did not touch are not read: the total is
        kept, not summed over every user held, which cost every transaction ~1 µs per
        user held (one Episode's: 4.4 ms with 4,000 users held, 0.6 ms now,
        ``bench/live_transaction.py``), and a batch over many users that much per user."""
        for ref, st in touched.items():
            if self.users.get(ref) is st:
                self._count(ref, len(st))

    def drop(self, ref: UserRef) -> None:
        """Let go of ``ref``'s state (reloaded from SQLite when next needed)."""
        if self.users.pop(ref, None) is not None:
            self.held -= self.counted.pop(ref)

    def trim(self, keep: Iterable[UserRef] = ()) -> None:
        """Drop least recently used users (never those in ``keep``) beyond the cap."""
        if self.held <= MAX_CACHED_CLUSTERS:
            return
        keep = set(keep)
        for old in list(self.users):
            if self.held <= MAX_CACHED_CLUSTERS:
                break
            if old not in keep:
                self.drop(old)


_CACHES: weakref.WeakKeyDictionary[Any, _Cache] = weakref.WeakKeyDictionary()
_CACHES_LOCK = threading.Lock()


def _cache_for(runtime: Any) -> _Cache:
    """``runtime``'s cache; a new one once its index was found deleted or replaced (its
    ``index_generation`` moved): the old one holds clusters of an index that is gone, whose
    version counters a rebuilt index may reach again."""
    generation = getattr(runtime, "index_generation", 0)
    with _CACHES_LOCK:
        cache = _CACHES.get(runtime)
        if cache is None or cache.generation != generation:
            cache = _CACHES[runtime] = _Cache(generation)
        return cache


#: members of one cluster by its id, through the member index (on the key, migration 0011)
_OF_CLUSTER = f"cluster_key={CLUSTER_KEY_OF_ID}"
#: one cluster row by its id (its key is the rowid, migration 0012)
_BY_ID = f"cluster_key={CLUSTER_KEY_OF_ID}"
#: a member row; its ``cluster_key`` is read from the cluster it names (inserted first)
_INSERT_MEMBER = (
    "INSERT INTO cluster_members (app_id, project_id, user_id, entry_id, cluster_id, cluster_key,"
    " ts, similarity, text_hash, joined_at) VALUES "
    f"(?1,?2,?3,?4,?5,{cluster_key_of_id('?5')},?6,?7,?8,?9)")
#: the same with the key known in memory (:attr:`UserClusters.keys`): no look-up by hash id
_INSERT_MEMBER_KEYED = (
    "INSERT INTO cluster_members (app_id, project_id, user_id, entry_id, cluster_id, ts, "
    "similarity, text_hash, joined_at, cluster_key) VALUES (?,?,?,?,?,?,?,?,?,?)")

#: an archived member's row (history: no similarity), placed by :meth:`_place_history`
_INSERT_HISTORY = (
    "INSERT INTO cluster_members (app_id, project_id, user_id, entry_id, cluster_id, cluster_key,"
    " ts, similarity, text_hash, joined_at, deprecated_by) VALUES "
    f"(?1,?2,?3,?4,?5,{cluster_key_of_id('?5')},?6,NULL,?7,?8,?9)")
#: the longest chain of updates followed to an archived Episode's last successor (as rebuilt)
_MAX_HOPS = 64


#: membership look-ups of up to this many ids use an IN list (padded to a power of two)
_MEMBERS_IN_MAX = 64
_MEMBERS_IN = {
    size: "SELECT * FROM cluster_members WHERE app_id=? AND project_id=? AND user_id=? "
          f"AND entry_id IN ({','.join('?' * size)})"
    for size in (1 << b for b in range(7))
}


def _next_cluster_key(conn: sqlite3.Connection) -> int:
    """The key the next new cluster gets: keys follow creation order, so the member index
    (by key) takes a batch's rows at its end instead of on random pages (migration 0011)."""
    return int(conn.execute("SELECT COALESCE(MAX(cluster_key), 0) + 1 FROM clusters")
               .fetchone()[0])


_CLUSTER_COLUMNS = ("cluster_id, centroid, centroid_norm, member_count, first_ts, last_ts, "
                    "consolidated_entry_id, cluster_key")


class _Write:
    """One write transaction of the service, seen through the in-memory state.

    ``state(ref)`` is the user's :class:`UserClusters`, reloaded from SQLite when its
    ``cluster_versions`` row (bumped by triggers on every change to ``clusters``, whoever makes
    it) says another connection changed it. The assignment hot path changes memory and queues
    its rows; they are written in bulk before any other statement runs (``execute`` flushes
    first) and before COMMIT, so SQL always sees what memory holds.
    """

    def __init__(self, conn: sqlite3.Connection, cache: _Cache) -> None:
        self.conn = conn
        self.cache = cache
        self.touched: dict[UserRef, UserClusters] = {}
        self._new: dict[str, UserRef] = {}
        self._dirty: dict[str, UserRef] = {}
        #: queued member rows per user, ``(entry_id, cluster_id, ts, similarity, text_hash)``;
        #: per user so that neither the queue nor its look-ups hash a UserRef per Episode
        self._members: dict[UserRef, list[tuple[Any, ...]]] = {}
        self._member_ids: dict[UserRef, set[str]] = {}
        self._changes = conn.total_changes
        self._quiet: bool | None = None
        self._dv: int | None = None
        #: per user, entries whose archived Episodes' history rows may have to move before
        #: COMMIT (:meth:`ClusterService._place_history`), and those of them known live
        self.history: dict[UserRef, set[str]] = {}
        self.history_live: dict[UserRef, set[str]] = {}
        #: per user, clusters whose members changed: their ids are checked before COMMIT
        #: (:meth:`ClusterService._rename_for_founder`), once every sync of the transaction
        #: is in (an undo revives the narrative that names the cluster after archiving the
        #: one that held it)
        self.founders: dict[UserRef, set[str]] = {}
        #: cluster ids this transaction freed (a cluster deleted or renamed): the live
        #: narratives naming one are attached before COMMIT (:meth:`ClusterService.
        #: _attach_freed`), once every sync of the transaction is in
        self.freed: set[str] = set()
        #: per cluster id, the clusters (per user) a rename to it was denied because another
        #: user's cluster held it: asked again once that one lets it go
        #: (:meth:`ClusterService._rename_for_founder`)
        self.denied: dict[str, dict[UserRef, set[str]]] = {}
        #: users whose Episodes are placed as a rebuild places them once this transaction
        #: is committed (:meth:`ClusterService._attach_narrative`)
        self.place: set[UserRef] = set()
        #: per user, the unit vectors and epochs of their live Episodes (not narratives),
        #: read once per transaction (:meth:`ClusterService._draws_an_episode`): the
        #: entries and vectors of a flush are written before its clusters
        self.episode_vectors: dict[UserRef, tuple[np.ndarray, np.ndarray]] = {}
        #: the live narratives whose ``parent_id`` is not a cluster id, by their own id's
        #: cluster (:meth:`ClusterService._naming_own_ids`), read once per transaction: the
        #: entries of a flush are written before its clusters, and nothing here writes them
        self.own_ids: dict[str, list[dict[str, Any]]] | None = None

    def recheck_history(self, ref: UserRef, ids: Iterable[str], *, live: bool = False) -> None:
        """Note that the Episodes archived toward ``ids`` (directly or along a chain of
        updates), and those of ``ids`` that are archived, may belong elsewhere as history.
        ``live``: ``ids`` are live Episodes (an indexed batch's, its rows just written so):
        only what is archived toward them is looked up."""
        (self.history_live if live else self.history).setdefault(ref, set()).update(ids)

    def pop_history(self) -> tuple[UserRef, set[str], set[str]] | None:
        """A user noted by :meth:`recheck_history`, the ids noted that may be archived and
        those known live (not among the others); None when none is left."""
        ref = next(iter(self.history or self.history_live), None)
        if ref is None:
            return None
        ids = self.history.pop(ref, set())
        return ref, ids, self.history_live.pop(ref, set()) - ids

    def _unchanged(self) -> bool:
        """True when nothing can have changed SQLite behind the cache since this connection
        last wrote and checked it (:meth:`finish`): no other connection has committed since
        (``PRAGMA data_version`` is as it was then) and this connection has changed no row
        since, in this transaction or between (``total_changes``: ``reindex`` empties the
        cluster tables on the same connection, which ``data_version`` does not count).
        Every cached state then matches its ``cluster_versions`` row, so its look-up (one per
        user per transaction: most of a small batch's fixed cost) is skipped."""
        if self.conn.total_changes != self._changes:
            return False  # our own SQL may have changed a user the cache holds
        if self._quiet is None:
            seen = self.cache.seen
            self._quiet = (seen is not None and seen[0] is self.conn
                           and seen[2] == self._changes
                           and seen[1] == self._data_version())
        return self._quiet

    def _data_version(self) -> int:
        """``PRAGMA data_version``, read once per transaction: it moves only when another
        connection commits, which none can while this one holds the write lock (taken by
        ``BEGIN IMMEDIATE`` before this object exists), so the value :meth:`_unchanged`
        read at the start is the one :meth:`finish` records (a lone Episode's transaction
        asked it twice)."""
        if self._dv is None:
            self._dv = _data_version(self.conn)
        return self._dv

    # sqlite3.Connection look-alike for the code that works in SQL
    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        self.flush()
        return self.conn.execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> sqlite3.Cursor:
        self.flush()
        return self.conn.executemany(sql, rows)

    def state(self, ref: UserRef) -> UserClusters:
        st = self.touched.get(ref)
        if st is not None:
            return st
        st = self.cache.users.get(ref)
        if st is not None and st.version is not None and self._unchanged():
            self.cache.use(ref, st, self.touched)
            self.touched[ref] = st
            return st
        version = _version(self.conn, ref)
        if version is None:
            # No row yet: create it, so the triggers (a plain UPDATE, migration 0014) count
            # every change from now on. A cached state is reloaded: changes made while there
            # was no row were counted nowhere.
            self.conn.execute("INSERT OR IGNORE INTO cluster_versions (app_id, project_id, "
                              "user_id, version) VALUES (?,?,?,0)",
                              (ref.app, ref.project, ref.user_id))
            version = 0
            self.cache.drop(ref)
        st = self.cache.users.get(ref)
        if st is None or st.version != version:
            st = self._load(ref)
            st.version = version
        self.cache.use(ref, st, self.touched)
        self.touched[ref] = st
        return st

    def named_elsewhere(self, ref: UserRef, cluster_id: str) -> bool:
        """Does a live narrative of another user name ``cluster_id`` (:func:`_free_id`)? Read
        without writing the queue: it reads ``entries`` only."""
        return self.conn.execute(_NAMED_ELSEWHERE, (cluster_id, ref.app, ref.project,
                                                    ref.user_id)).fetchone() is not None

    def named_elsewhere_of(self, ref: UserRef, cluster_ids: Sequence[str]) -> set[str]:
        """Those of ``cluster_ids`` a live narrative of another user names, in one statement
        (:meth:`named_elsewhere` for each: a run asks it of its items' own ids up front,
        where asking each new cluster's cost a statement per Episode that founds one)."""
        if not cluster_ids:
            return set()
        if len(cluster_ids) <= _MEMBERS_IN_MAX:
            size = 1 << (len(cluster_ids) - 1).bit_length()
            rows = self.conn.execute(_NAMED_ELSEWHERE_IN[size], (
                ref.app, ref.project, ref.user_id, *cluster_ids,
                *[cluster_ids[-1]] * (size - len(cluster_ids))))
        else:
            rows = self.conn.execute(_NAMED_ELSEWHERE_JSON, (
                ref.app, ref.project, ref.user_id, json.dumps(list(cluster_ids))))
        return {r[0] for r in rows}

    def hold(self, ref: UserRef) -> None:
        """Take ``ref``'s state into this transaction before its own SQL changes the user's
        clusters (the service then mirrors each change in memory, as it does for the ones it
        queues). Taken after such a change, the version bump the triggers made for it would
        read as another writer's and reload every cluster of the user from SQLite: O(history)
        for each Reflection merge (``mark_consolidated``), and the next batch would walk the
        reloaded state's whole time heap."""
        self.state(ref)

    def _load(self, ref: UserRef) -> UserClusters:
        st = UserClusters()
        for r in self.conn.execute(
                f"SELECT {_CLUSTER_COLUMNS} FROM clusters WHERE app_id=? AND project_id=? "
                "AND user_id=? ORDER BY cluster_id", (ref.app, ref.project, ref.user_id)):
            st.put(_row_cluster(r))
            st.keys[r["cluster_id"]] = r["cluster_key"]
        return st

    def replace_state(self, ref: UserRef, st: UserClusters) -> None:
        """``recluster``: the rebuilt clusters become the user's state once committed."""
        self.touched[ref] = st
        self.cache.use(ref, st, self.touched)

    def refresh(self, ref: UserRef, cluster_id: str) -> None:
        """Re-read one cluster after SQL changed it (or removed it)."""
        st = self.state(ref)
        r = self.execute(f"SELECT {_CLUSTER_COLUMNS} FROM clusters WHERE {_BY_ID}",
                         (cluster_id,)).fetchone()
        if r is None:
            st.remove(cluster_id)
        else:
            st.put(_row_cluster(r))
            st.keys[cluster_id] = r["cluster_key"]

    # queued writes
    def insert_cluster(self, ref: UserRef, c: ClusterRow) -> None:
        self.state(ref).put(c)
        self._new[c.cluster_id] = ref
        self._dirty.pop(c.cluster_id, None)

    def save_cluster(self, ref: UserRef, c: ClusterRow) -> None:
        self.state(ref).put(c)
        if c.cluster_id not in self._new:
            self._dirty[c.cluster_id] = ref

    def placed_run(self, ref: UserRef, entry_ids: Sequence[str], times: Sequence[float],
                   text_hashes: Sequence[str | None],
                   placed: Sequence[tuple[str, float | None, str]]) -> None:
        """Queue the rows of a run placed in the state (:meth:`UserClusters.assign_run` put
        its clusters there): an insert for a cluster it created, else an update, and a member
        row per Episode. The run's Episodes come as aligned columns (ids, epochs, text
        hashes), ``placed`` is what ``assign_run`` answered for each; the member rows are
        zipped from the columns without a Python loop per Episode."""
        new, dirty = self._new, self._dirty
        for cid, _, reason in placed:
            if reason == NEW:
                new[cid] = ref
                dirty.pop(cid, None)
            elif cid not in new:
                dirty[cid] = ref
        cids, sims, _ = zip(*placed, strict=True)
        self._members.setdefault(ref, []).extend(
            zip(entry_ids, cids, times, sims, text_hashes, strict=True))
        self._member_ids.setdefault(ref, set()).update(entry_ids)

    def delete_cluster(self, ref: UserRef, cluster_id: str) -> None:
        self.execute(f"DELETE FROM clusters WHERE {_BY_ID}", (cluster_id,))
        self.state(ref).remove(cluster_id)
        self.freed.add(cluster_id)

    def insert_member(self, ref: UserRef, entry_id: str, cluster_id: str, ts: float,
                      similarity: float | None, text_hash: str | None) -> None:
        self._members.setdefault(ref, []).append((entry_id, cluster_id, ts, similarity,
                                                   text_hash))
        self._member_ids.setdefault(ref, set()).add(entry_id)

    def unwritten(self, cluster_id: str) -> bool:
        """Is ``cluster_id`` a cluster this transaction created and has not written yet? No
        member row in SQLite can name it then (a member row takes its ``cluster_key`` from
        the cluster's row), so its written members need no look-up."""
        return cluster_id in self._new

    def queued_members(self, ref: UserRef, since: float,
                       until: float) -> dict[str, list[tuple[str, float]]]:
        """The member rows of ``ref`` queued and not yet written, placed at ``since`` to
        ``until`` (both included, as SQL compares them), as ``(entry_id, epoch)`` per
        cluster id. A queued row is a new live membership (``deprecated_by`` NULL)."""
        out: dict[str, list[tuple[str, float]]] = {}
        for entry_id, cluster_id, ts, _, _ in self._members.get(ref, ()):
            if since <= ts <= until:
                out.setdefault(cluster_id, []).append((entry_id, ts))
        return out

    def flush_members_of(self, ref: UserRef, ids: Iterable[str]) -> None:
        """Write the queue if it holds a membership of one of ``ids`` (before reading them:
        a lookup of other entries need not wait for the batch)."""
        queued = self._member_ids.get(ref)
        if queued and not queued.isdisjoint(ids):
            self.flush()

    def flush(self) -> None:
        if not (self._new or self._dirty or self._members):
            return
        now = utcnow_iso()
        new, dirty, members = self._new, self._dirty, self._members
        self._new, self._dirty, self._members = {}, {}, {}
        self._member_ids = {}
        conn = self.conn
        if new:
            key = _next_cluster_key(conn)
            # keys in the order the clusters were created; columns read per user in bulk
            order = list(new.items())
            rows: list[tuple[Any, ...]] = [()] * len(order)
            for ref, ns in _positions_by_user(order).items():
                st = self.touched[ref]
                cids = [order[n][0] for n in ns]
                keys = [key + n for n in ns]
                # (repeat() never ends: the columns bound the zip)
                for n, row in zip(ns, zip(cids, repeat(ref.app), repeat(ref.project),
                                          repeat(ref.user_id), *st.stored_columns(cids),
                                          repeat(now), keys, strict=False), strict=True):
                    rows[n] = row
                st.keys.update(zip(cids, keys, strict=True))
            conn.executemany(
                "INSERT INTO clusters (cluster_id, app_id, project_id, user_id, centroid, "
                "centroid_norm, member_count, first_ts, last_ts, consolidated_entry_id, "
                "created_at, cluster_key) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        if dirty:
            # by key (the rowid, known in memory for every cluster already in SQLite); the id
            # look-up probes every bucket of clusters_by_id, the key one page
            keyed_rows, by_id = [], []
            changed = list(dirty.items())
            for ref, ns in _positions_by_user(changed).items():
                st = self.touched[ref]
                cids = [cid for cid in (changed[n][0] for n in ns) if cid in st]
                keys = st.keys
                for cid, cols in zip(cids, st.stored_many(cids), strict=True):
                    k = keys.get(cid)
                    (by_id if k is None else keyed_rows).append(
                        (*cols[:5], cid if k is None else k))
            if keyed_rows:
                conn.executemany(
                    "UPDATE clusters SET centroid=?, centroid_norm=?, member_count=?, "
                    "first_ts=?, last_ts=? WHERE cluster_key=?", keyed_rows)
            if by_id:
                conn.executemany(
                    "UPDATE clusters SET centroid=?, centroid_norm=?, member_count=?, "
                    f"first_ts=?, last_ts=? WHERE {_BY_ID}", by_id)
        if members:
            keyed: list[tuple[Any, ...]] = []
            looked_up: list[tuple[Any, ...]] = []
            for ref, rows in members.items():
                st = self.touched.get(ref)
                keys = st.keys if st is not None else {}
                app, project, user = ref.app, ref.project, ref.user_id
                found = [keys.get(row[1]) for row in rows]
                if None not in found:  # the usual case: every cluster's key is in memory
                    # (repeat() never ends: the rows and their keys bound the zip)
                    keyed.extend(zip(repeat(app), repeat(project), repeat(user),
                                     *zip(*rows, strict=True), repeat(now), found,
                                     strict=False))
                    continue
                for (entry_id, cid, ts, similarity, text_hash), k in zip(rows, found,
                                                                          strict=True):
                    if k is None:
                        looked_up.append((app, project, user, entry_id, cid, ts, similarity,
                                          text_hash, now))
                    else:
                        keyed.append((app, project, user, entry_id, cid, ts, similarity,
                                      text_hash, now, k))
            if keyed:
                conn.executemany(_INSERT_MEMBER_KEYED, keyed)
            if looked_up:
                conn.executemany(_INSERT_MEMBER, looked_up)

    def finish(self) -> None:
        """Before COMMIT: write what is queued and note the versions memory now matches."""
        self.flush()
        versions = _versions(self.conn, list(self.touched))
        for ref, st in self.touched.items():
            st.version = versions.get(ref)
        self.cache.recount(self.touched)
        self.cache.trim(keep=list(self.touched)[-1:])
        # we hold the write lock until COMMIT: nobody else can commit in between
        self.cache.seen = (self.conn, self._data_version(), self.conn.total_changes)


def _positions_by_user(order: Sequence[tuple[str, UserRef]]) -> dict[UserRef, list[int]]:
    """Positions in ``order`` (``(cluster_id, user)`` pairs) grouped by user, in order."""
    out: dict[UserRef, list[int]] = {}
    last: UserRef | None = None
    group: list[int] = []
    for n, (_, ref) in enumerate(order):
        if ref is not last:  # a run's clusters are consecutive: one dict probe per run
            group = out.setdefault(ref, [])
            last = ref
        group.append(n)
    return out


def _versions(conn: sqlite3.Connection, refs: Sequence[UserRef]) -> dict[UserRef, int]:
    """``cluster_versions`` of several users in one statement (an index batch touches many
    users; one look-up each would cost more than the batch's own writes). The users go in as
    one JSON array, so the statement text, and its compiled plan, is the same for any number
    of them: a primary-key probe each (an ``OR`` of 20 conditions cost ~9 µs per user)."""
    if len(refs) == 1:
        version = _version(conn, refs[0])
        return {} if version is None else {refs[0]: version}
    out: dict[UserRef, int] = {}
    by_key = {(r.app, r.project, r.user_id): r for r in refs}
    for r in conn.execute(
            "SELECT v.app_id, v.project_id, v.user_id, v.version FROM json_each(?) j "
            "JOIN cluster_versions v ON v.app_id = json_extract(j.value, '$[0]') "
            "AND v.project_id = json_extract(j.value, '$[1]') "
            "AND v.user_id = json_extract(j.value, '$[2]')",
            (json.dumps(list(by_key)),)):
        out[by_key[(r[0], r[1], r[2])]] = int(r[3])
    return out


def _data_version(conn: sqlite3.Connection) -> int:
    """``PRAGMA data_version``: changes when another connection commits, never for our own."""
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


def _version(conn: sqlite3.Connection, ref: UserRef) -> int | None:
    row = conn.execute("SELECT version FROM cluster_versions WHERE app_id=? AND project_id=? "
                       "AND user_id=?", (ref.app, ref.project, ref.user_id)).fetchone()
    return None if row is None else int(row[0])


class ClusterService:
    """Clusters of one memory root. Every mutation runs in one ``BEGIN IMMEDIATE`` transaction,
    so the daemon, a CLI command and a Reflection run never interleave their updates."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        cfg = runtime.settings.clustering
        self.threshold = float(cfg.threshold)
        self.rejoin_threshold = float(cfg.rejoin_threshold)
        self.member_threshold = float(cfg.member_threshold)
        self.window_seconds = float(cfg.time_window_days) * DAY
        #: cosine floor of the join of a fact's newer version (online.choose_version)
        self.version_floor = VERSION_FLOOR
        self._cache = _cache_for(runtime)
        self._session: _Write | None = None

    @property
    def _db(self) -> sqlite3.Connection:
        return self.runtime.db()

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Run every update made inside in one transaction: the indexer's flush writes all
        its assignments at once instead of one commit per file."""
        with self._writing():
            yield

    @contextmanager
    def _writing(self) -> Iterator[_Write]:
        """One ``BEGIN IMMEDIATE`` transaction with the in-memory state (or the open
        :meth:`batch`); if it fails, the users it touched are dropped from memory (reloaded
        from SQLite next time)."""
        if self._session is not None:
            yield self._session
            return
        place: set[UserRef] = set()
        held = self._placing_held()
        with self._cache.lock:
            session: _Write | None = None
            try:
                with transaction(self._db) as conn:
                    session = self._session = _Write(conn, self._cache)
                    if held:  # placed at the pass end already: not asked again
                        session.place.update(held)
                    yield session
                    while True:
                        released = self._attach_freed(session)
                        while (noted := session.pop_history()) is not None:
                            self._place_history(session, *noted)
                        while session.founders:
                            ref, cids = session.founders.popitem()
                            self._rename_for_founders(session, ref, cids)
                        # every id let go since the last look, by the syncs or the attaches
                        # as by a rename or a history move: a cluster denied one takes it now
                        for cid in sorted(session.denied.keys() & (released | session.freed)):
                            for ref, cids in session.denied.pop(cid).items():
                                session.founders.setdefault(ref, set()).update(cids)
                        if not (session.freed or session.founders):
                            break
                    session.finish()
                    place = session.place
                    if place:  # owed in the transaction that makes it due: a kill keeps it
                        self._owe(conn, place)
            except BaseException:
                if session is not None:
                    for ref in session.touched:
                        self._cache.drop(ref)
                raise
            finally:
                self._session = None
        if held is not None:
            held.update(place)
        elif place:  # planned outside the write lock, as a Reflection run's placing
            self.place_after_merges(place)

    def _placing_held(self) -> set[UserRef] | None:
        """The users whose placing (:meth:`place_after_merges`) the indexer's pass on this
        thread holds to its end (:func:`events.one_pass`), None outside one. A copied root's
        first scan founds the clusters its narratives name flush after flush: each user one
        draws an Episode to was placed again, O(history), once per flush of 256 entries where
        once after the last gives the same clusters (``bench/copied_root_scan_cost.py``)."""
        runtime = self.runtime
        return events.held_to_pass_end(
            runtime, "clustering", set,
            lambda refs: ClusterService(runtime).place_after_merges(refs) if refs else None)

    def owe_placing(self, refs: Iterable[UserRef]) -> None:
        """Note, in a transaction of its own, that ``refs`` are owed their placing after
        merges (:meth:`place_after_merges`): a Reflection run notes its users before it
        commits their merges, and places them at its end. Killed in between, the process
        leaves the note, and :meth:`settle_owed` places them (a user noted whose merge never
        committed is placed as a rebuild would place it: nothing changes but the order a
        ``recluster`` would give)."""
        refs = set(refs)
        if refs:
            with transaction(self._db) as conn:
                self._owe(conn, refs)

    def owed_placing(self) -> list[UserRef]:
        """The users whose placing after merges is owed (:meth:`owe_placing`), oldest first."""
        return list(meta_users.listed(self._db, PLACING_OWED_KEY))

    def settle_owed(self, also: Iterable[UserRef] = ()) -> None:
        """Place the users owed their placing (and ``also``): what a process killed between
        a merge, or a sync pass that founded a narrative's cluster, and the placing after
        it left undone, which no later sync would do (the logs have not changed since)."""
        if getattr(self.runtime, "read_only", False):
            return  # a reader writes no index: the next writer's recovery places them
        refs = {*self.owed_placing(), *also}
        if refs:
            self.place_after_merges(refs)

    @staticmethod
    def _owe(conn: sqlite3.Connection, refs: Iterable[UserRef]) -> None:
        """Add ``refs`` to the users owed their placing, in the caller's transaction."""
        owed = meta_users.listed(conn, PLACING_OWED_KEY)
        new = [ref for ref in refs if ref not in owed]
        if new:
            meta_users.keep(conn, PLACING_OWED_KEY, [*owed, *sorted(new)])

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
        with self._writing() as conn:
            return self._assign(conn, ref, entry_id, normalize(vector),
                                entry_epoch(entry_id, ts), text_hash)

    def on_entries_indexed(
        self,
        ref: UserRef,
        entries: Sequence[Entry],
        vectors: Mapping[str, np.ndarray] | np.ndarray,
        unparented: Collection[str] | None = None,
    ) -> dict[str, str]:
        """Bring clusters up to date with new or changed Episodes (called by the indexer).

        Ordinary Episodes are (re)assigned, narratives attached to their cluster, deprecated
        ones retired. ``vectors`` is either ``{entry_id: vector}`` or an array aligned with
        ``entries``; vectors not given are read from the vector index when needed.
        ``unparented``: the ids of ``entries`` the index held as narratives before this
        change and that are narratives no longer (:attr:`events.ChangeSet.unparented`);
        None when not known, and then a member is read as a former narrative by its row
        (:meth:`_was_narrative`). Returns ``{entry_id: what happened}`` for logging and
        tests.
        """
        if not isinstance(vectors, Mapping):
            matrix = np.asarray(vectors)
            if matrix.ndim != 2 or len(matrix) != len(entries):
                raise ValueError(f"expected {len(entries)} vectors, got shape {matrix.shape}")
            vectors = {e.id: matrix[n] for n, e in enumerate(entries)}
        # read once (by on_entries_indexed_many, when it hands them over)
        episodes = (entries.episodes if isinstance(entries, _Episodes)
                    else _episodes_of(entries))
        if unparented is None and isinstance(entries, _Episodes):
            unparented = entries.unparented
        outcome: dict[str, str] = {}
        if not episodes:
            return outcome
        with self._writing() as conn:
            # an Episode archived toward one of these (by hand) is history of its cluster;
            # an archived one is noted by _retire, below
            conn.recheck_history(ref, [eid for _, eid, e in episodes if e.deprecated_by is None],
                                 live=True)
            members = self._member_rows(conn, ref, [eid for _, eid, _ in episodes])
            missing = [eid for _, eid, e in episodes
                       if eid not in vectors and e.deprecated_by is None]
            stored = self._vectors(ref, missing) if missing else {}
            # Consecutive Episodes that are simply new are placed as one run (same result as
            # one by one, see UserClusters.assign_run); anything else goes alone, in order.
            run: list[tuple[str, float, np.ndarray, str | None, str]] = []
            for ts, _, e in episodes:
                row = members.get(e.id)
                if e.deprecated_by is not None:
                    self._assign_run(conn, ref, run, outcome)
                    outcome[e.id] = self._retire(conn, ref, e.id, e.deprecated_by)
                    continue
                vec = vectors.get(e.id)
                vec = vec if vec is not None else stored.get(e.id)
                if vec is None:
                    log.warning("no vector for %s %s: not clustered", ref, e.id)
                    outcome[e.id] = "no-vector"
                    continue
                text_hash = e.text_hash
                if row is None and e.parent_type != "cluster":
                    # its ``entries.text``: read for a change only if it would found a
                    # cluster (the join of a fact's newer version, asked inside the run)
                    run.append((e.id, ts, vec, text_hash, e.content or e.search_text))
                    continue
                self._assign_run(conn, ref, run, outcome)
                vec = normalize(vec)
                if e.parent_type == "cluster":
                    outcome[e.id] = self._attach_narrative(conn, ref, e.id, e.parent_id, vec, ts,
                                                           text_hash,
                                                           consolidated_time(e.id, e.meta))
                elif row is not None and row["deprecated_by"] is not None:
                    outcome[e.id] = self._revive(conn, ref, e.id, vec, ts, text_hash)
                elif row is not None and (e.id in unparented if unparented is not None
                                          else self._was_narrative(conn, row)):
                    # a narrative made a plain Episode by hand (its parent_type taken out):
                    # it leaves its cluster, as if deleted, and is placed by the rule, as a
                    # rebuild places it; read as unchanged (its text and time are), it kept
                    # consolidating the cluster, or stayed in it with no similarity
                    cid = self._leave(conn, ref, e.id)
                    if cid is not None:
                        self._recompute(conn, ref, cid)
                    outcome[e.id] = self._assign(conn, ref, e.id, vec, ts, text_hash,
                                                 member=False).reason
                elif row is not None and row["text_hash"] == text_hash and row["ts"] == ts:
                    outcome[e.id] = "unchanged"
                else:
                    outcome[e.id] = self._assign(conn, ref, e.id, vec, ts, text_hash).reason
            self._assign_run(conn, ref, run, outcome)
        return outcome

    def on_entries_indexed_many(
        self,
        batches: Sequence[tuple[UserRef, Sequence[Entry], Mapping[str, np.ndarray]]
                          | tuple[UserRef, Sequence[Entry], Mapping[str, np.ndarray],
                                  Collection[str] | None]],
    ) -> None:
        """:meth:`on_entries_indexed` for each ``(ref, entries, vectors)`` or ``(ref,
        entries, vectors, unparented)`` in turn (one per indexed file), in one transaction.
        Consecutive batches of one user are handed over as one when that places the same
        Episodes in the same order: when each batch's Episodes all sort (by timestamp, then
        id) after the previous batch's and no id is in both — a scan's daily logs of one
        user, in file order. One call per user instead of one per file: a call's fixed cost
        (the membership look-up, the run's set-up) was most of the cost of a file holding
        one Episode."""
        merged: list[tuple[UserRef, _Episodes, dict[str, np.ndarray]]] = []
        last: tuple[float, str] | None = None
        ids: set[str] = set()
        for ref, entries, vectors, *rest in batches:
            known = rest[0] if rest else None
            episodes = _episodes_of(entries)
            if not episodes:
                continue
            fresh = {eid for _, eid, _ in episodes}
            if (merged and merged[-1][0] == ref and last is not None
                    and last < episodes[0][:2] and not ids & fresh):
                # every key sorts after the previous batch's: the joined list stays sorted
                joined = merged[-1][1]
                joined.extend(entries)
                joined.episodes.extend(episodes)
                # not known for one of them: read from the rows for all
                joined.unparented = None if joined.unparented is None or known is None \
                    else joined.unparented | set(known)
                merged[-1][2].update(vectors)
                ids |= fresh
            else:
                merged.append((ref, _Episodes(entries, episodes,
                                              None if known is None else set(known)),
                               dict(vectors)))
                ids = fresh
            last = episodes[-1][:2]
        with self._writing():
            for ref, entries, vectors in merged:
                self.on_entries_indexed(ref, entries, vectors)

    @staticmethod
    def _was_narrative(conn: _Write, row: sqlite3.Row) -> bool:
        """Is the member ``row`` of an Episode placed as a narrative: the one consolidating
        its cluster, or one with no similarity in a consolidated cluster (a rebuild seeds it
        with its newest narrative, and every Episode joins it with a similarity)? Read from
        the row only when the indexer did not say which Episodes were narratives
        (``unparented`` None: a change handed over again after a kill, a direct call): a
        change applied before it in the same flush (a member of its cluster deleted in the
        same save) recomputes the cluster, which gives a former narrative a similarity, and
        it read as an unchanged member. One look-up by the cluster's key."""
        found = conn.execute(f"SELECT consolidated_entry_id FROM clusters WHERE {_BY_ID}",
                             (row["cluster_id"],)).fetchone()
        narrative = None if found is None else found[0]
        return narrative is not None and (narrative == row["entry_id"]
                                          or row["similarity"] is None)

    def _assign_run(self, conn: _Write, ref: UserRef,
                    run: list[tuple[str, float, np.ndarray, str | None, str]],
                    outcome: dict[str, str]) -> None:
        """Place ``run`` (new Episodes in no cluster yet: ``(id, epoch, vector, text_hash,
        text)`` in (timestamp, id) order) as :meth:`_assign` would one by one, and empty it.

        An Episode that would found a cluster is read for a change there and then, inside
        the run (:meth:`UserClusters.assign_run`'s ``version_of``); one that tells a change
        looks for the cluster of the fact it changes (:meth:`_version_join`). That look-up
        reads members' texts from SQLite, so the members the run placed before it are
        queued first (the look-up's statement writes the queue)."""
        if not run:
            return
        ids, times, vecs, hashes, texts = zip(*run, strict=True)
        st = conn.state(ref)
        later = st.ending_at_or_after(times[0])  # clusters the run may join out of order
        units = normalize_rows(np.stack(vecs))
        queued = 0

        def version_of(q: int, placed: list[tuple[str, float | None, str]]) -> Decision | None:
            nonlocal queued
            if not tells_change(texts[q]):
                return None
            if q > queued:
                conn.placed_run(ref, ids[queued:q], times[queued:q], hashes[queued:q],
                                placed[queued:q])
                queued = q
            return self._version_join(conn, ref, ids[q], units[q], times[q], st, texts[q])

        # each item's own id (the one it founds unless its user holds it or another user's
        # live narrative names it, :func:`_free_id`), all checked against the narratives
        # in one statement: one per Episode that founds a cluster, before
        own = [cluster_id_for(ref.app, ref.project, ref.user_id, i) for i in ids]
        named = conn.named_elsewhere_of(ref, own)

        def new_id(i: int) -> str:
            cid = own[i]
            if cid in st or cid in named:
                return self._free_cluster_id(conn, ref, ids[i], st)
            return cid

        placed = st.assign_run(
            units, times, new_id,
            threshold=self.threshold, window_seconds=self.window_seconds,
            rejoin_threshold=self.rejoin_threshold, member_threshold=self.member_threshold,
            version_of=version_of, version_floor=self.version_floor)
        if len(ids) > queued:
            conn.placed_run(ref, ids[queued:], times[queued:], hashes[queued:],
                            placed[queued:])
        outcome.update(zip(ids, [reason for _, _, reason in placed], strict=True))
        run.clear()
        if later:
            # joined before members placed earlier: their similarities, the centroid's fold
            # and (joined before the first) the cluster's id replayed as a rebuild has them
            late = {cid for (cid, _, reason), ts in zip(placed, times, strict=True)
                    if reason != NEW and ts <= later.get(cid, -np.inf)}
            for cid in sorted(late):
                self._recompute(conn, ref, cid, known={
                    i: u for i, u, (c, _, _) in zip(ids, units, placed, strict=True) if c == cid})

    def on_entries_deprecated(self, ref: UserRef, mapping: Mapping[str, str | None]) -> None:
        """``{entry_id: deprecated_by}``: a non-None value retires the member (kept as history);
        None lifts the deprecation (undo) and the member returns to its cluster."""
        with self._writing() as conn:
            lifted = [eid for eid, by in mapping.items() if by is None]
            stored = self._vectors(ref, lifted) if lifted else {}
            for eid, by in sorted(mapping.items()):
                if by is not None:
                    self._retire(conn, ref, eid, by)
                elif eid in stored:
                    row = conn.execute(
                        "SELECT ts, text_hash, parent_type, parent_id FROM entries WHERE "
                        "app_id=? AND project_id=? AND user_id=? AND id=?",
                        (ref.app, ref.project, ref.user_id, eid)).fetchone()
                    ts = entry_epoch(eid, row["ts"] if row else None)
                    if row is not None and row["parent_type"] == "cluster":
                        # a narrative revived by hand: attached where its parent_id says,
                        # as a rebuild attaches it, never placed by similarity
                        self._attach_narrative(
                            conn, ref, eid, row["parent_id"], normalize(stored[eid]), ts,
                            row["text_hash"], self._consolidated_times(ref, [eid])[eid])
                        continue
                    self._revive(conn, ref, eid, normalize(stored[eid]), ts,
                                 row["text_hash"] if row else None)

    def on_entries_removed(self, ref: UserRef, ids: Iterable[str]) -> None:
        """Entries deleted from Markdown: drop their membership and fix up their clusters."""
        ids = list(ids)
        if not ids:
            return
        with self._writing() as conn:
            conn.recheck_history(ref, ids)  # archived toward them: no successor left
            touched = {cid for cid in (self._leave(conn, ref, eid) for eid in ids)
                       if cid is not None}
            for cluster_id in sorted(touched):
                self._recompute(conn, ref, cluster_id)

    def _leave(self, conn: _Write, ref: UserRef, entry_id: str) -> str | None:
        """Take ``entry_id``'s member row out of its cluster; one it consolidated is handed
        to the newest narrative left there, else no longer consolidated (its history goes).
        Returns the cluster's id (None: in none), for the caller to recompute."""
        row = conn.execute(
            "SELECT cluster_id FROM cluster_members WHERE app_id=? AND project_id=? "
            "AND user_id=? AND entry_id=?", (ref.app, ref.project, ref.user_id, entry_id)
        ).fetchone()
        if row is None:
            return None
        conn.hold(ref)
        conn.execute(
            "DELETE FROM cluster_members WHERE app_id=? AND project_id=? AND user_id=? "
            "AND entry_id=?", (ref.app, ref.project, ref.user_id, entry_id))
        cur = conn.execute("UPDATE clusters SET consolidated_entry_id=NULL, "
                           f"consolidated_at=NULL WHERE {_BY_ID} AND "
                           "consolidated_entry_id=?", (row["cluster_id"], entry_id))
        if cur.rowcount and not self._hand_over(conn, ref, row["cluster_id"]):
            self._recheck_cluster_history(conn, ref, row["cluster_id"])
        return str(row["cluster_id"])

    def on_user_gone(self, ref: UserRef) -> None:
        """``ref``'s folder is gone (removed or renamed by hand): once no Episode of theirs
        is indexed, every cluster of theirs goes, as a rebuild has none. The removal of
        their logs took the member rows the logs gave, not one no log gave: a narrative a
        merge put into its cluster before its log was indexed (a crash at ``deprecated``,
        then ``mv users/u_andrew users/u_bob``) kept the old user's cluster, and the id the
        moved narrative names, until ``recluster``. Freed, that narrative is attached in its
        new folder (:meth:`_attach_freed`)."""
        user = (ref.app, ref.project, ref.user_id)
        with self._writing() as conn:
            if conn.execute("SELECT 1 FROM entries WHERE app_id=? AND project_id=? AND "
                            "user_id=? AND kind='episode' LIMIT 1", user).fetchone():
                return  # some of their logs are still indexed: the flush dropping them does it
            gone = [r[0] for r in conn.execute(
                "SELECT cluster_id FROM clusters WHERE app_id=? AND project_id=? AND "
                "user_id=? ORDER BY cluster_id", user)]
            if gone:
                conn.hold(ref)
            for cluster_id in gone:
                conn.delete_cluster(ref, cluster_id)

    # ------------------------------------------------------------------ Reflection

    def mark_consolidated(
        self,
        cluster_id: str,
        narrative_id: str,
        narrative_vector: np.ndarray,
        member_ids: Iterable[str],
        at: str | None = None,
    ) -> ClusterInfo:
        """The cluster now holds ``narrative_id``; ``member_ids`` (its sources) stop being live
        members and stay listed as history. Members that joined meanwhile stay live (they are the
        "new since consolidation" of the next run). Idempotent. ``consolidated_at`` stays the
        one the indexer set attaching the narrative (:func:`consolidated_time`), else ``at``
        (else now)."""
        sources = sorted(set(member_ids) - {narrative_id})
        with self._writing() as conn:
            row = conn.execute(f"SELECT * FROM clusters WHERE {_BY_ID}",
                               (cluster_id,)).fetchone()
            if row is None:
                raise UnknownCluster(f"unknown cluster {quoted_value(cluster_id)}")
            ref = UserRef(row["app_id"], row["project_id"], row["user_id"])
            conn.hold(ref)
            latest: float | None = None  # the latest source's time
            for chunk, marks in id_batches(sources):
                ts_row = conn.execute(
                    f"SELECT MAX(ts) AS ts FROM cluster_members WHERE {_OF_CLUSTER} "
                    f"AND entry_id IN ({marks})", (cluster_id, *chunk)).fetchone()
                if ts_row["ts"] is not None:
                    latest = ts_row["ts"] if latest is None else max(latest, ts_row["ts"])
                conn.execute(
                    f"UPDATE cluster_members SET deprecated_by=?, similarity=NULL "
                    f"WHERE {_OF_CLUSTER} "
                    f"AND entry_id IN ({marks})", (narrative_id, cluster_id, *chunk))
            existing = self._member_rows(conn, ref, [narrative_id]).get(narrative_id)
            if existing is not None and existing["cluster_id"] == cluster_id:
                ts = existing["ts"]
            else:
                if existing is not None:
                    self._detach(conn, ref, narrative_id)
                ts = latest if latest is not None else row["last_ts"]
                conn.insert_member(ref, narrative_id, cluster_id, ts, None, None)
            # the indexer attached the narrative first, at its time per the Markdown
            # (consolidated_time): kept, so a rebuild reads the same
            conn.execute("UPDATE clusters SET consolidated_entry_id=?, consolidated_at="
                         "COALESCE(CASE WHEN consolidated_entry_id=? THEN consolidated_at END, "
                         f"?) WHERE {_BY_ID}",
                         (narrative_id, narrative_id, at or utcnow_iso(), cluster_id))
            known = {narrative_id: normalize(narrative_vector)}
            self._recompute(conn, ref, cluster_id, known=known)
        return self.cluster(cluster_id)

    def eligible_for_reflection(self, ref: UserRef, max_clusters: int) -> list[ClusterInfo]:
        """Clusters worth a merge: ≥ 2 live members never consolidated, or consolidated and
        since joined by new members; largest first (ties by id), at most ``max_clusters``.

        SQLite keeps only those (:data:`_ELIGIBLE`), in that order, before any row is read into
        Python: building every cluster of the owner and filtering here cost ~75 ms a call at
        7,364 clusters (one owner ×20), most of it rows that were then dropped."""
        where, params = _where_ref(ref, "c")
        limit = min(max(0, max_clusters), _NO_LIMIT)  # SQLite's integers stop at 2^63 - 1
        return self._clusters_where(f"{where} AND {_ELIGIBLE}", (*params, limit),
                                    "ORDER BY c.member_count DESC, c.cluster_id LIMIT ?")

    # ------------------------------------------------------------------ reading

    def clusters(self, ref: UserRef | None = None) -> list[ClusterInfo]:
        """Every cluster (of ``ref``, else of the root), most recent activity first."""
        where, params = _where_ref(ref, "c")
        return self._clusters_where(where, params, "ORDER BY c.last_ts DESC, c.cluster_id")

    def cluster(self, cluster_id: str) -> ClusterInfo:
        for info in self._clusters_where(f"c.{_BY_ID}", (cluster_id,)):
            return info
        raise UnknownCluster(f"unknown cluster {quoted_value(cluster_id)}")

    def members(self, cluster_id: str, live_only: bool = True) -> list[Member]:
        """Members in chronological order (then id); history too unless ``live_only``."""
        live = " AND deprecated_by IS NULL" if live_only else ""
        rows = self._db.execute(
            "SELECT entry_id, cluster_id, ts, similarity, deprecated_by FROM cluster_members "
            f"WHERE {_OF_CLUSTER}{live} "
            "ORDER BY ts, entry_id", (cluster_id,)).fetchall()
        return [Member(r["entry_id"], r["cluster_id"], r["ts"], r["similarity"],
                       r["deprecated_by"]) for r in rows]

    def cluster_of(self, ref: UserRef, entry_id: str) -> str | None:
        row = self._db.execute(
            "SELECT cluster_id FROM cluster_members WHERE app_id=? AND project_id=? AND "
            "user_id=? AND entry_id=?", (ref.app, ref.project, ref.user_id, entry_id)).fetchone()
        return row["cluster_id"] if row else None

    # ------------------------------------------------------------------ rebuild

    def recluster_exclusive(self, ref: UserRef | None = None,
                            on_wait: Callable[[], None] | None = None, *,
                            app: str | None = None,
                            project: str | None = None) -> dict[str, int]:
        """:meth:`recluster` holding the rebuild lock exclusive, as ``reindex`` does (the
        ``recluster`` command): it rewrites the clusters a Reflection run selects from and
        archives into, so it first waits for the runs in flight (``on_wait`` is told) and a
        run that starts meanwhile is skipped as ``busy``. ``reindex`` calls :meth:`recluster`
        itself, under the lock it already holds."""
        with rebuild.rebuilding(self.runtime.index_dir, on_wait):
            return self.recluster(ref, app=app, project=project)

    def recluster(self, ref: UserRef | None = None, *, app: str | None = None,
                  project: str | None = None) -> dict[str, int]:
        """Rebuild clusters from ``entries`` + stored vectors, deterministically.

        Per user: every live narrative re-creates the cluster its ``parent_id`` names, then all
        other live Episodes are assigned in (timestamp, id) order by the online rule. Returns
        counts (users, clusters, members, skipped for lack of a vector). Without ``ref``,
        ``app`` and ``project`` (when given) narrow the users to that app or project.
        """
        where, params = _where_ref(ref)
        refs = sorted(
            u for u in {
                UserRef(r[0], r[1], r[2]) for r in self._db.execute(
                    f"SELECT app_id, project_id, user_id FROM entries WHERE kind='episode' AND "
                    f"{where} UNION SELECT app_id, project_id, user_id FROM clusters WHERE "
                    f"{where}", params + params)
            } if app in (None, u.app) and project in (None, u.project))
        totals = {"users": 0, "clusters": 0, "members": 0, "skipped": 0}
        named = self._narrative_namers()
        many = getattr(self.runtime.vectors, "get_vectors_many", None)
        # Users in groups of about REBUILD_GROUP Episodes: one vector scan per group, and
        # only one group's rows and vectors in memory at a time.
        sizes = {UserRef(r[0], r[1], r[2]): r[3] for r in self._db.execute(
            "SELECT app_id, project_id, user_id, COUNT(*) FROM entries WHERE kind='episode' "
            "GROUP BY app_id, project_id, user_id")}
        group: list[UserRef] = []
        size = 0
        for n, user in enumerate(refs):
            group.append(user)
            size += sizes.get(user, 0)
            if size < REBUILD_GROUP and n + 1 < len(refs):
                continue
            rows = {u: self._episode_rows(u) for u in group}
            vectors = many(Kind.EPISODE, {
                u: [r["id"] for r in user_rows if r["deprecated_by"] is None]
                for u, user_rows in rows.items()
            }) if many is not None else {}
            for u in group:
                counts = self._recluster_user(u, rows[u], vectors.get(u), named)
                totals["users"] += 1
                for key in ("clusters", "members", "skipped"):
                    totals[key] += counts[key]
            group, size = [], 0
        return totals

    def place_after_merges(self, refs: Iterable[UserRef]) -> None:
        """Place each of ``refs``' Episodes as a rebuild places them, once Reflection has
        merged clusters of theirs (a run calls it at its end, not between its merges: the
        clusters it selected keep their ids and members until then).

        A narrative stands for its sources: a rebuild seeds its cluster with the narrative's
        vector before it places any Episode, so an Episode placed before the merge in
        another cluster may join the narrative's (the next run folds it in, ``update``),
        and the clusters after it are founded and named as that makes them. Online, the
        merge re-placed nobody: the live clusters differed from a ``reindex`` of the same
        Markdown until the next ``recluster``.

        The placing is planned outside the index's write lock, which is taken only to write
        it: planned inside, a user with 40,000 Episodes held the lock for tens of seconds
        (``bench/place_after_merges_cost.py``), so the watcher's writes and another
        process's ``add`` waited, past SQLite's 30 s busy timeout under load. Under the lock
        the inputs are read again; if an Episode was synced meanwhile (or a narrative
        written elsewhere), the plan is made again there, so nothing synced is dropped."""
        for ref in sorted(set(refs)):
            named = self._narrative_namers()
            rows = self._episode_rows(ref)
            planned = self._plan_user(ref, rows, self._user_vectors(ref, rows), named)
            with self._writing() as conn:
                again = self._episode_rows(ref)
                now_named = self._narrative_namers()
                if ([tuple(r) for r in again] != [tuple(r) for r in rows] or now_named != named
                        or self._foreign_cluster_ids(ref, planned.named_ids) != planned.foreign):
                    planned = self._plan_user(ref, again, self._user_vectors(ref, again),
                                              now_named)
                self._write_user(conn, ref, planned)
                owed = meta_users.listed(conn.conn, PLACING_OWED_KEY)
                if ref in owed:
                    del owed[ref]
                    meta_users.keep(conn.conn, PLACING_OWED_KEY, owed)

    def _user_vectors(self, ref: UserRef, rows: list[sqlite3.Row]) -> dict[str, np.ndarray]:
        """The vectors of ``rows``' live Episodes, read as :meth:`recluster` reads them (one
        scan filtered on the user, not a filter listing every id of a long history)."""
        ids = [r["id"] for r in rows if r["deprecated_by"] is None]
        many = getattr(self.runtime.vectors, "get_vectors_many", None)
        if many is None or not ids:
            return self._vectors(ref, ids)
        return many(Kind.EPISODE, {ref: ids}).get(ref, {})

    def place_after_undo(self, ref: UserRef) -> None:
        """Place ``ref``'s Episodes as a rebuild places them, once an ``undo`` has restored
        a merge's sources (and, undoing an ``update``, the narrative it replaced). Revived
        one by one, each source went back to its cluster, and the Episodes synced after the
        merge stayed where they joined: beside the narrative, or in a cluster founded next
        to it, where a rebuild places them after the restored sources (a source's centroid
        may take an Episode a narrative's did not). The live clusters differed from a
        ``reindex`` until ``recluster``."""
        self.place_after_merges([ref])

    def _episode_rows(self, ref: UserRef) -> list[sqlite3.Row]:
        return self._db.execute(
            "SELECT id, ts, parent_type, parent_id, deprecated_by, text_hash, text FROM entries "
            "WHERE kind='episode' AND app_id=? AND project_id=? AND user_id=?",
            (ref.app, ref.project, ref.user_id)).fetchall()

    def _narrative_namers(self) -> dict[str, set[UserRef]]:
        """Per cluster id a live narrative names, the users whose narratives name it (read
        once per ``recluster``: an Episode founds no id another user's narrative names)."""
        named: dict[str, set[UserRef]] = {}
        for r in self._db.execute(
                # the partial index of narratives (migration 0027): not a scan of every entry
                "SELECT parent_id, app_id, project_id, user_id FROM entries INDEXED BY "
                "entries_narratives_by_parent WHERE parent_type='cluster' AND kind='episode' "
                "AND deprecated_by IS NULL AND parent_id IS NOT NULL"):
            named.setdefault(r[0], set()).add(UserRef(r[1], r[2], r[3]))
        return named

    def _recluster_user(self, ref: UserRef, rows: list[sqlite3.Row],
                        vectors: dict[str, np.ndarray] | None = None,
                        named: dict[str, set[UserRef]] | None = None) -> dict[str, int]:
        planned = self._plan_user(ref, rows, vectors, named)
        with self._writing() as conn:
            self._write_user(conn, ref, planned)
        plan = planned.plan
        return {"clusters": len(plan.clusters), "members": len(plan.members),
                "skipped": planned.skipped}

    def _plan_user(self, ref: UserRef, rows: list[sqlite3.Row],
                   vectors: dict[str, np.ndarray] | None = None,
                   named: dict[str, set[UserRef]] | None = None) -> _PlannedUser:
        """How a rebuild places ``rows`` (one user's Episodes), nothing written yet."""
        live = sorted((r for r in rows if r["deprecated_by"] is None),
                      key=lambda r: (entry_epoch(r["id"], r["ts"]), r["id"]))
        if vectors is None:
            vectors = self._vectors(ref, [r["id"] for r in live])
        if named is None:
            named = self._narrative_namers()
        plan = _Rebuild(ref, self.threshold, self.window_seconds, self.rejoin_threshold,
                        self.member_threshold, self.version_floor,
                        lambda cid: any(u != ref for u in named.get(cid, ())))
        skipped = 0
        narratives = [r for r in live if r["parent_type"] == "cluster"]
        # A narrative naming another user's cluster is attached nowhere, as online: copying
        # that id here would give two users one id (not UNIQUE in SQLite since migration
        # 0012), and every look-up by it would answer for either.
        named_ids = {plan.narrative_cluster_id(r["id"], r["parent_id"]) for r in narratives}
        foreign = self._foreign_cluster_ids(ref, named_ids)
        if foreign:
            log.warning("%s: %s held by another user; not attached",
                        ref, counted(len(foreign), "narrative cluster id"))
            live = [r for r in live if r["parent_type"] != "cluster"
                    or plan.narrative_cluster_id(r["id"], r["parent_id"]) not in foreign]
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
        # Each Episode's rule takes BLAS to one thread for its product against the pivots of
        # the consolidated clusters, and back (~15 µs, more than the product): one block per
        # step of Episodes instead (matrix.one_blas_thread).
        for lo in range(0, len(live), BLAS_STEP):
            with one_blas_thread():
                for r in live[lo:lo + BLAS_STEP]:
                    if r["id"] in plan.member_of or r["id"] not in vectors:
                        skipped += r["id"] not in vectors
                        continue
                    vec = normalize(vectors[r["id"]])
                    if r["parent_type"] == "cluster":
                        plan.attach(plan.narrative_cluster_id(r["id"], r["parent_id"]), r, vec)
                    else:
                        plan.assign(r, vec)
        plan.history([r for r in rows if r["deprecated_by"] is not None])
        at = self._consolidated_times(ref, [c.consolidated_entry_id for c in plan.clusters.values()
                                            if c.consolidated_entry_id is not None])
        return _PlannedUser(plan, skipped, at, frozenset(named_ids), foreign)

    def _write_user(self, conn: _Write, ref: UserRef, planned: _PlannedUser) -> None:
        """Replace ``ref``'s cluster rows, members and in-memory state by ``planned``'s. An
        id one of the old clusters held and none of the new ones does is freed
        (:attr:`_Write.freed`): a narrative of another user naming it is attached, and a
        cluster of another user denied it in this transaction takes it, as a rebuild gives
        it. Dropped unnoted, the denied cluster kept the id after it."""
        plan, at = planned.plan, planned.at
        conn.freed.update(r[0] for r in conn.execute(
            "SELECT cluster_id FROM clusters WHERE app_id=? AND project_id=? AND user_id=?",
            (ref.app, ref.project, ref.user_id)) if r[0] not in plan.clusters)
        conn.execute("DELETE FROM clusters WHERE app_id=? AND project_id=? AND user_id=?",
                     (ref.app, ref.project, ref.user_id))
        conn.execute("DELETE FROM cluster_members WHERE app_id=? AND project_id=? AND "
                     "user_id=?", (ref.app, ref.project, ref.user_id))
        now = utcnow_iso()
        key = _next_cluster_key(conn.conn)
        conn.executemany(
            "INSERT INTO clusters (cluster_id, app_id, project_id, user_id, centroid, "
            "centroid_norm, member_count, first_ts, last_ts, consolidated_entry_id, "
            "created_at, consolidated_at, cluster_key) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [(c.cluster_id, ref.app, ref.project, ref.user_id, _blob(c.centroid), c.norm,
              c.count, c.first_ts, c.last_ts, c.consolidated_entry_id, now,
              at.get(c.consolidated_entry_id or ""), key + n)
             for n, c in enumerate(plan.clusters.values())])
        plan.state.keys.update((c, key + n) for n, c in enumerate(plan.clusters))
        conn.replace_state(ref, plan.state)
        # every member's cluster was inserted just above, its key known in memory: no
        # look-up by id per row (that probes each key bucket, migration 0012)
        keys = plan.state.keys
        conn.executemany(
            "INSERT INTO cluster_members (app_id, project_id, user_id, entry_id, cluster_id,"
            " cluster_key, ts, similarity, joined_at, deprecated_by, text_hash) VALUES "
            "(?,?,?,?,?,?,?,?,?,?,?)",
            [(ref.app, ref.project, ref.user_id, m[0], m[1], keys[m[1]], m[2], m[3], now,
              m[4], m[5]) for m in plan.members])

    # ------------------------------------------------------------------ internals

    def _consolidated_times(self, ref: UserRef, narratives: Sequence[str]) -> dict[str, str]:
        """Each narrative's :func:`consolidated_time`, read from the Markdown (each log once).
        One that cannot be read now takes its id's day, as one without ``merged_at``."""
        if not narratives:
            return {}
        try:
            found = self.runtime.store.get_many(ref, narratives)
        except (OSError, EverosError):
            log.warning("%s: cannot read the narratives' merge times; their ids' days are "
                        "used", ref, exc_info=True)
            found = {}
        return {i: consolidated_time(i, found[i].meta if i in found else {})
                for i in narratives}

    def _foreign_cluster_ids(self, ref: UserRef, ids: Iterable[str]) -> set[str]:
        """Those of ``ids`` that a cluster of another user holds (one bucket probe each)."""
        return {cid for cid in sorted(ids) if self._db.execute(
            f"SELECT 1 FROM clusters WHERE cluster_key IN {CLUSTER_KEY_OF_ID} AND NOT "
            "(app_id=? AND project_id=? AND user_id=?) LIMIT 1",
            (cid, ref.app, ref.project, ref.user_id)).fetchone()}

    def _vectors(self, ref: UserRef, ids: Sequence[str]) -> dict[str, np.ndarray]:
        if not ids:
            return {}
        return self.runtime.vectors.get_vectors(Kind.EPISODE, ref, ids)

    def _assign(self, conn: _Write, ref: UserRef, entry_id: str, vec: np.ndarray, ts: float,
                text_hash: str | None, *, member: bool = True) -> Decision:
        """Hot path: decide in memory, queue the writes. ``member=False`` when the caller knows
        the Episode is in no cluster yet (saves a lookup)."""
        if member:
            self._detach(conn, ref, entry_id)
        st = conn.state(ref)
        decision = st.choose(vec, ts, threshold=self.threshold,
                             window_seconds=self.window_seconds,
                             rejoin_threshold=self.rejoin_threshold,
                             member_threshold=self.member_threshold)
        if decision.cluster_id is None and decision.similarity >= self.version_floor:
            # the version join takes no cluster under the floor, and a new cluster's
            # similarity is the best of the rows scored (the same einsum, bit for bit): under
            # it, the text is not read (a look-up and tells_change)
            decision = self._version_join(conn, ref, entry_id, vec, ts, st) or decision
        if decision.cluster_id is None:
            cid = self._free_cluster_id(conn, ref, entry_id)
            conn.insert_cluster(ref, _Cluster.new(cid, vec, ts))
            conn.insert_member(ref, entry_id, cid, ts, None, text_hash)
            return Decision(cid, decision.similarity, NEW)
        cluster = st.get(decision.cluster_id)
        late = ts <= cluster.last_ts
        cluster.add(vec, ts)
        conn.save_cluster(ref, cluster)
        conn.insert_member(ref, entry_id, cluster.cluster_id, ts, decision.similarity, text_hash)
        if late:  # joined before members placed after it: replayed as a rebuild places them
            self._recompute(conn, ref, cluster.cluster_id, known={entry_id: vec})
        return decision

    def _version_join(self, conn: _Write, ref: UserRef, entry_id: str, vec: np.ndarray,
                      ts: float, st: UserClusters, change: str | None = None) -> Decision | None:
        """The cluster an Episode that would found a new one joins as the newer version of
        a member's fact (:func:`online.choose_version`), read from the texts SQLite holds,
        as :meth:`recluster` reads them; None when it tells no change or nothing holds.
        ``change``: the Episode's text, known to tell a change (else read here)."""
        later = change
        if later is None:
            row = conn.execute(
                "SELECT text FROM entries WHERE app_id=? AND project_id=? AND user_id=? AND "
                "id=? AND kind='episode'",
                (ref.app, ref.project, ref.user_id, entry_id)).fetchone()
            if row is None or not tells_change(row["text"]):
                return None
            later = row["text"]
        key = (ts, entry_id)
        reads = _VersionReads()

        # only members placed before it in its window: a cluster left unmerged for long
        # may hold thousands of live members, and each text would be read
        since = window_start(ts, self.window_seconds)
        queued: dict[str, list[tuple[str, float]]] | None = None
        #: the members of the clusters it will read first, read at once (read_first)
        read: dict[str, list[tuple[float, str, str]]] = {}

        def read_first(cids: list[str]) -> None:
            nonlocal queued
            queued = conn.queued_members(ref, since, ts)
            keys, first = st.keys, cids[:MAX_VERSION_READS]
            read.update(_live_members_of(
                conn.conn, ref, [(cid, keys.get(cid)) for cid in first], since, ts, queued,
                unwritten={cid for cid in first if conn.unwritten(cid)}))

        def holds_partner(cid: str) -> bool:
            nonlocal queued
            if not reads.left:
                return False
            members = read.get(cid)
            if members is None:  # past the clusters read first
                if queued is None:
                    queued = conn.queued_members(ref, since, ts)
                members = _live_members(conn.conn, ref, cid, st.keys.get(cid), since, ts,
                                        queued.get(cid, ()))
            return _holds_earlier_version(members, key, later, self.window_seconds, reads)

        return st.choose_version(vec, ts, window_seconds=self.window_seconds,
                                 floor=self.version_floor, holds_partner=holds_partner,
                                 read_first=read_first)

    def _attach_narrative(self, conn: _Write, ref: UserRef, entry_id: str,
                          parent_id: str | None, vec: np.ndarray, ts: float,
                          text_hash: str | None, at: str) -> str:
        """``at``: the narrative's :func:`consolidated_time`."""
        cid = parent_id if parent_id and CLUSTER_ID_RE.fullmatch(parent_id) else \
            cluster_id_for(ref.app, ref.project, ref.user_id, entry_id)
        conn.hold(ref)
        conn.recheck_history(ref, [entry_id])  # its sources, synced before it or archived
        row = self._member_rows(conn, ref, [entry_id]).get(entry_id)
        if row is not None and row["cluster_id"] != cid:
            self._detach(conn, ref, entry_id)
            row = None
        cluster = conn.execute(f"SELECT * FROM clusters WHERE {_BY_ID}", (cid,)).fetchone()
        if cluster is not None and (cluster["app_id"], cluster["project_id"],
                                    cluster["user_id"]) != (ref.app, ref.project, ref.user_id):
            # founded by an Episode of another user before this narrative named the id (its
            # folder renamed onto the name the id hashes): that one takes the next free id,
            # as a rebuild founds it (:func:`_free_id`); a narrative's cluster keeps its id
            other = UserRef(cluster["app_id"], cluster["project_id"], cluster["user_id"])
            if self._rename_for_founder(conn, other, cid) != cid:
                cluster = conn.execute(f"SELECT * FROM clusters WHERE {_BY_ID}",
                                       (cid,)).fetchone()
        displaced: UserRef | None = None
        if cluster is not None and (cluster["app_id"], cluster["project_id"],
                                    cluster["user_id"]) > (ref.app, ref.project, ref.user_id):
            # held by a narrative of a user a rebuild takes after this one (this log copied
            # by hand into an earlier user's folder): a rebuild seeds it here and attaches
            # that user's narrative nowhere; that user is placed again once it is (below)
            displaced = UserRef(cluster["app_id"], cluster["project_id"], cluster["user_id"])
            conn.execute("DELETE FROM cluster_members WHERE cluster_key=?",
                         (cluster["cluster_key"],))
            conn.delete_cluster(displaced, cid)
            cluster = None
        if cluster is not None and (cluster["app_id"], cluster["project_id"],
                                    cluster["user_id"]) != (ref.app, ref.project, ref.user_id):
            log.warning("narrative %s names cluster %s of another user; not attached",
                        entry_id, cid)
            return "foreign-cluster"
        if cluster is None and self._founded_before(conn, ref, cid):
            # a live narrative of a user a rebuild takes first names it too (its log copied
            # by hand): that one founds it, before COMMIT (:meth:`_attach_freed`)
            conn.freed.add(cid)
            log.warning("narrative %s names cluster %s of another user; not attached",
                        entry_id, cid)
            return "foreign-cluster"
        if cluster is None:
            seed = _Cluster.new(cid, vec, ts, entry_id)
            conn.insert_cluster(ref, seed)
            conn.execute(f"UPDATE clusters SET consolidated_at=? WHERE {_BY_ID}", (at, cid))
            conn.insert_member(ref, entry_id, cid, ts, None, text_hash)
            if displaced is not None:
                conn.flush()  # the rebuild reads this cluster as another user's
                self._recluster_user(displaced, self._episode_rows(displaced))
            if ref not in conn.place and self._draws_an_episode(conn, ref, seed):
                # a rebuild seeds it before placing any Episode: one like it joins it
                conn.place.add(ref)
            return "narrative-new-cluster"
        if row is None and not self._merging(conn, ref, cid) and conn.execute(
                f"SELECT 1 FROM cluster_members WHERE {_OF_CLUSTER} AND deprecated_by IS NULL "
                "AND entry_id != ? LIMIT 1", (cid, entry_id)).fetchone():
            # written by hand into a cluster with live members: a rebuild seeds the cluster
            # with it and places every other Episode of its user after it by the rule, so
            # those unlike it found clusters of their own. A merge's narrative is placed so
            # once its run is done (place_after_merges)
            conn.place.add(ref)
        elif (row is not None and row["text_hash"] is not None
              and row["text_hash"] != text_hash and ref not in conn.place
              and not self._merging(conn, ref, cid)
              and (conn.execute(
                  f"SELECT 1 FROM cluster_members WHERE {_OF_CLUSTER} AND deprecated_by IS "
                  "NULL AND entry_id != ? LIMIT 1", (cid, entry_id)).fetchone()
                   or self._draws_an_episode(conn, ref, _Cluster.new(cid, vec, ts, entry_id)))):
            # its text edited by hand: a rebuild seeds the cluster with the new vector before
            # it places any Episode, so one like the new text joins it, and those placed
            # against the old one (its cluster's members) are placed after it anew. Alone
            # in its cluster and like no Episode, it drew none and draws none: nothing moves
            conn.place.add(ref)
        if cluster["consolidated_entry_id"] is None:
            # consolidated now: what was archived toward a live member is history here
            conn.recheck_history(ref, [r["entry_id"] for r in conn.execute(
                f"SELECT entry_id FROM cluster_members WHERE {_OF_CLUSTER} AND "
                "deprecated_by IS NULL", (cid,))])
        if row is None:
            conn.insert_member(ref, entry_id, cid, ts, None, text_hash)
        else:
            conn.execute("UPDATE cluster_members SET ts=?, text_hash=?, deprecated_by=NULL "
                         f"WHERE {_OF_CLUSTER} AND entry_id=?", (ts, text_hash, cid, entry_id))
        current = cluster["consolidated_entry_id"]
        newer = current is None or current == entry_id or self._newer_than(conn, cid, entry_id,
                                                                           current)
        if current == entry_id and row is not None and row["ts"] != ts:
            # the one consolidating it, moved in time by hand: the newest live narrative of
            # the cluster consolidates it now (another, once this one moved before it), as a
            # rebuild seeds the cluster with the newest
            self._hand_over(conn, ref, cid)
        elif newer:
            conn.execute("UPDATE clusters SET consolidated_entry_id=?, consolidated_at=? "
                         f"WHERE {_BY_ID}", (entry_id, at, cid))
        self._recompute(conn, ref, cid, known={entry_id: vec})
        return "narrative"

    def _draws_an_episode(self, conn: _Write, ref: UserRef, seed: _Cluster) -> bool:
        """Would a live Episode of ``ref`` join ``seed`` (a narrative's cluster just founded
        online: the id it names held by no cluster, or not a cluster id) were it there before
        any Episode was placed, as a rebuild seeds it? Until one joins it the seed does not
        change and every Episode is placed as it is now, so when none would, the rebuild
        differs from the live clusters by the seed alone and the user need not be placed
        again (:meth:`place_after_merges`: O(history) per narrative, where this reads the
        user's vectors once per transaction and scores them in one product). Asked with a
        margin of 1e-6 below each threshold: a tie placed again costs time, not a wrong
        cluster."""
        known = conn.episode_vectors.get(ref)
        if known is None:
            rows = conn.execute(
                "SELECT id, ts, deprecated_by FROM entries WHERE app_id=? AND project_id=? AND "
                "user_id=? AND kind='episode' AND deprecated_by IS NULL AND parent_type IS NOT "
                "'cluster'", (ref.app, ref.project, ref.user_id)).fetchall()
            vectors = self._user_vectors(ref, rows)
            rows = [r for r in rows if r["id"] in vectors]
            units = normalize_rows(np.stack([vectors[r["id"]] for r in rows])) if rows else \
                np.zeros((0, len(seed.centroid)), dtype=np.float32)
            known = conn.episode_vectors[ref] = (
                units, np.array([entry_epoch(r["id"], r["ts"]) for r in rows], dtype=np.float64))
        units, epochs = known
        if not len(units):
            return False
        margin = 1e-6
        sims = similarities(units, seed.centroid)
        fits = sims * seed.norm >= self.member_threshold - margin
        near = in_window_rows(seed.first_ts, epochs, epochs, self.window_seconds)
        return bool(np.any(fits & ((sims >= self.rejoin_threshold - margin)
                                   | ((sims >= self.threshold - margin) & near))))

    @staticmethod
    def _merging(conn: _Write, ref: UserRef, cid: str) -> bool:
        """Is a Reflection merge of ``cid`` under way (its journal row is there until the
        merge is settled)? Its run places the user's Episodes once its merges are done. An
        ``undo``'s row (step :data:`_UNDOING`) is no merge: one refused half-way (a log it
        patches holds an id twice) keeps its row until a recovery can finish it, and no run
        places the user meanwhile; read as a merge, a narrative written by hand into its
        cluster placed nobody."""
        return conn.execute("SELECT 1 FROM merge_journal WHERE app_id=? AND project_id=? AND "
                            "user_id=? AND cluster_id=? AND step != ? LIMIT 1",
                            (ref.app, ref.project, ref.user_id, cid,
                             _UNDOING)).fetchone() is not None

    def _founded_before(self, conn: _Write, ref: UserRef, cid: str) -> bool:
        """Does a live narrative of a user a rebuild takes before ``ref`` name ``cid``, with
        a vector (:meth:`_recluster_user` seeds no cluster for one without: its embedding
        lost, it founds nothing, and a later user's narrative naming the id takes it)? One
        whose ``parent_id`` is not a cluster id names its own id's cluster
        (:meth:`_naming_own_ids`): read as written, it named none, and a later user's
        narrative took that id while it waited in no cluster."""
        rows = conn.execute(
            "SELECT app_id, project_id, user_id, id FROM entries WHERE parent_type='cluster' "
            "AND parent_id=? AND kind='episode' AND deprecated_by IS NULL AND (app_id, "
            "project_id, user_id) < (?,?,?) ORDER BY 1, 2, 3, 4",
            (cid, ref.app, ref.project, ref.user_id)).fetchall()
        by_user: dict[UserRef, list[str]] = {}
        for r in rows:
            by_user.setdefault(UserRef(r[0], r[1], r[2]), []).append(r[3])
        for r in self._naming_own_ids(conn, {cid}):
            if (r["app_id"], r["project_id"], r["user_id"]) < (ref.app, ref.project,
                                                              ref.user_id):
                by_user.setdefault(UserRef(r["app_id"], r["project_id"], r["user_id"]),
                                   []).append(r["id"])
        return any(self._vectors(other, ids) for other, ids in by_user.items())

    def _attach_freed(self, conn: _Write) -> set[str]:
        """Attach the live narratives, of any user, that name a cluster id this transaction freed
        and no cluster of another user holds now, as a rebuild attaches them (users in sorted order,
        as it takes them). One found naming a cluster another user held was attached nowhere: its
        log moved by hand into another user's folder, or the user's folder renamed, while the old
        log was still indexed. The old user's cluster goes when that log is dropped, in the same
        flush or in any later one (watcher events seconds apart, a renamed folder that had not yet
        stood still). Every live narrative of the user that takes an id is attached to it, the
        newest consolidating it, as a rebuild seeds the cluster with the newest and attaches the
        others (the first alone was, and the others stayed in no cluster), and the user's Episodes
        are placed as a rebuild places them once the transaction is committed. Until no id is freed
        (an attach may free another). Returns every id it looked at, so that a cluster denied one
        (:attr:`_Write.denied`) is asked again: they are no longer in ``conn.freed``."""
        tried: set[str] = set()  # an id is looked up once (a narrative refused re-adds it)
        while conn.freed - tried:
            freed, conn.freed = sorted(conn.freed - tried), set()
            tried.update(freed)
            found: list[dict[str, Any]] = []
            for chunk, marks in id_batches(freed):
                # the partial index of narratives by parent (migration 0027)
                found += map(dict, conn.execute(
                    "SELECT app_id, project_id, user_id, id, ts, parent_id, text_hash "
                    f"FROM entries WHERE parent_type='cluster' AND parent_id IN ({marks}) "
                    "AND kind='episode' AND deprecated_by IS NULL", chunk))
            found += self._naming_own_ids(conn, set(freed))
            # the user whose cluster holds each id now: one of theirs may have taken it in
            # this transaction, synced after the other user's log was dropped, and their
            # narratives passed over while the other held it are attached to it too
            held: dict[str, UserRef | None] = {}
            for cid in sorted({r["parent_id"] for r in found}):
                holder = conn.execute("SELECT app_id, project_id, user_id FROM clusters "
                                      f"WHERE {_BY_ID}", (cid,)).fetchone()
                if holder is not None:
                    held[cid] = UserRef(holder[0], holder[1], holder[2])
            by_user: dict[UserRef, list[dict[str, Any]]] = {}
            for r in sorted(found, key=itemgetter("app_id", "project_id", "user_id", "id")):
                user = UserRef(r["app_id"], r["project_id"], r["user_id"])
                if held.get(r["parent_id"], user) == user:
                    by_user.setdefault(user, []).append(r)
            for ref, rows in by_user.items():
                ids = [r["id"] for r in rows]
                placed = self._member_rows(conn, ref, ids)
                rows = [r for r in rows if r["id"] not in placed
                        and held.get(r["parent_id"], ref) == ref]
                vectors = self._vectors(ref, [r["id"] for r in rows])
                at = self._consolidated_times(ref, [r["id"] for r in rows if r["id"] in vectors])
                for r in rows:
                    cid = r["parent_id"]
                    if r["id"] in vectors and held.get(cid, ref) == ref:
                        if self._attach_narrative(conn, ref, r["id"], cid,
                                                  normalize(vectors[r["id"]]),
                                                  entry_epoch(r["id"], r["ts"]),
                                                  r["text_hash"],
                                                  at[r["id"]]) != "foreign-cluster":
                            # a rebuild seeds its cluster before placing any Episode: one
                            # like it, placed while another user held the id, joins it
                            conn.place.add(ref)
                            held[cid] = ref
                        else:
                            held[cid] = None  # another user's: no narrative takes it here
        released = tried | conn.freed
        conn.freed.clear()
        return released

    @staticmethod
    def _naming_own_ids(conn: _Write, ids: set[str]) -> list[dict[str, Any]]:
        """The live narratives whose ``parent_id`` is not a cluster id and whose own id's
        cluster (:meth:`_Rebuild.narrative_cluster_id`, the hash of their user and id) is one
        of ``ids``, each with that id as its ``parent_id``. Such a narrative, passed over
        while a narrative of a user a rebuild takes first named that id by hand, is attached
        once it is freed, as a rebuild seeds it then. Read from the partial index of
        narratives (migration 0027), whole, once per transaction (:attr:`_Write.own_ids`):
        a hash cannot be looked up backwards, and these are few."""
        if conn.own_ids is None:
            conn.own_ids = {}
            for r in conn.execute(
                    "SELECT app_id, project_id, user_id, id, ts, parent_id, text_hash FROM "
                    "entries INDEXED BY entries_narratives_by_parent WHERE "
                    "parent_type='cluster' AND kind='episode' AND deprecated_by IS NULL AND "
                    "NOT (parent_id IS NOT NULL AND length(parent_id)=15 AND "
                    f"parent_id GLOB 'cl_{'[0-9a-f]' * 12}')"):
                cid = cluster_id_for(r["app_id"], r["project_id"], r["user_id"], r["id"])
                conn.own_ids.setdefault(cid, []).append({**dict(r), "parent_id": cid})
        return [r for cid in sorted(ids) for r in conn.own_ids.get(cid, ())]

    def _newer_than(self, conn: _Write, cid: str, a: str, b: str) -> bool:
        """True if member ``a`` sorts after member ``b`` by (ts, id), or ``b`` is not live."""
        rows = {r["entry_id"]: r for r in conn.execute(
            f"SELECT entry_id, ts, deprecated_by FROM cluster_members WHERE {_OF_CLUSTER} "
            "AND entry_id IN (?, ?)", (cid, a, b))}
        if b not in rows or rows[b]["deprecated_by"] is not None:
            return True
        return (rows[a]["ts"], a) > (rows[b]["ts"], b)

    def _retire(self, conn: _Write, ref: UserRef, entry_id: str, by: str) -> str:
        conn.recheck_history(ref, [entry_id])  # history where its last successor is
        row = self._member_rows(conn, ref, [entry_id]).get(entry_id)
        if row is None or row["deprecated_by"] == by:
            return "not-member" if row is None else "unchanged"
        cid = row["cluster_id"]
        conn.hold(ref)
        conn.execute("UPDATE cluster_members SET deprecated_by=?, similarity=NULL "
                     f"WHERE {_OF_CLUSTER} AND entry_id=?", (by, cid, entry_id))
        # A superseded narrative hands over to its successor when that is already attached
        # and is a narrative: archived by hand toward an ordinary Episode of its cluster, the
        # cluster is no longer consolidated (a rebuild seeds clusters from narratives only)
        successor = conn.execute(
            f"SELECT 1 FROM cluster_members m WHERE m.{_OF_CLUSTER} AND m.entry_id=? "
            "AND m.deprecated_by IS NULL AND EXISTS (SELECT 1 FROM entries e WHERE "
            "e.app_id=m.app_id AND e.project_id=m.project_id AND e.user_id=m.user_id AND "
            "e.id=m.entry_id AND e.kind='episode' AND e.parent_type='cluster')",
            (cid, by)).fetchone()
        cur = conn.execute("UPDATE clusters SET consolidated_entry_id=?, consolidated_at="
                           "CASE WHEN ? IS NULL THEN NULL ELSE consolidated_at END "
                           f"WHERE {_BY_ID} AND consolidated_entry_id=?",
                           (by if successor else None, by if successor else None, cid,
                            entry_id))
        if cur.rowcount and not successor and not self._hand_over(conn, ref, cid):
            self._recheck_cluster_history(conn, ref, cid)
        self._recompute(conn, ref, cid)
        return "retired"

    def _hand_over(self, conn: _Write, ref: UserRef, cluster_id: str) -> bool:
        """``cluster_id``'s narrative is gone (deleted or archived by hand): the newest live
        narrative still attached to it, if any, consolidates it, as a rebuild seeds a cluster
        with the newest live narrative naming it (a person's written later beside a merge's).
        Left with none, the other was a live member of a cluster no longer consolidated, and
        the history of both was dropped. True if one took it."""
        row = conn.execute(
            f"SELECT m.entry_id FROM cluster_members m WHERE m.{_OF_CLUSTER} AND "
            "m.deprecated_by IS NULL AND EXISTS (SELECT 1 FROM entries e WHERE "
            "e.app_id=m.app_id AND e.project_id=m.project_id AND e.user_id=m.user_id AND "
            "e.id=m.entry_id AND e.kind='episode' AND e.parent_type='cluster' AND "
            "e.deprecated_by IS NULL) ORDER BY m.ts DESC, m.entry_id DESC LIMIT 1",
            (cluster_id,)).fetchone()
        if row is None:
            return False
        narrative = row["entry_id"]
        conn.execute(f"UPDATE clusters SET consolidated_entry_id=?, consolidated_at=? WHERE "
                     f"{_BY_ID}", (narrative, self._consolidated_times(ref, [narrative])[
                         narrative], cluster_id))
        return True

    def _recheck_cluster_history(self, conn: _Write, ref: UserRef, cluster_id: str) -> None:
        """``cluster_id`` is no longer consolidated: its history goes (a rebuild lists
        history in consolidated clusters only), and the id its narrative held may go with
        it (:meth:`_named_past_their_founder`)."""
        conn.recheck_history(ref, [r["entry_id"] for r in conn.execute(
            f"SELECT entry_id FROM cluster_members WHERE {_OF_CLUSTER} AND "
            "deprecated_by IS NOT NULL", (cluster_id,))])
        conn.founders.setdefault(ref, set()).update(self._named_past_their_founder(conn, ref))
        members = [r[0] for r in conn.execute(
            f"SELECT entry_id FROM cluster_members WHERE {_OF_CLUSTER}", (cluster_id,))]
        if cluster_id not in {cluster_id_for(ref.app, ref.project, ref.user_id, m)
                              for m in members}:
            # an id hashed for another user (the folder renamed since the merge): a cluster
            # of that user founded next to it takes it back when it goes (:func:`_free_id`)
            for other in self._users_with_clusters(conn, ref):
                conn.founders.setdefault(other, set()).update(
                    self._named_past_their_founder(conn, other))

    @staticmethod
    def _users_with_clusters(conn: _Write, ref: UserRef) -> list[UserRef]:
        """Every user but ``ref`` with a cluster not consolidated."""
        return [UserRef(r[0], r[1], r[2]) for r in conn.execute(
            "SELECT DISTINCT app_id, project_id, user_id FROM clusters WHERE "
            "consolidated_entry_id IS NULL AND NOT (app_id=? AND project_id=? AND user_id=?) "
            "ORDER BY 1, 2, 3", (ref.app, ref.project, ref.user_id))]

    @staticmethod
    def _named_past_their_founder(conn: _Write, ref: UserRef) -> list[str]:
        """The user's clusters no narrative holds whose id is not their first live member's
        own: founded while a consolidated cluster held that id (its narrative's
        ``parent_id`` names it), they are checked again before COMMIT
        (:meth:`_rename_for_founder`) once that cluster lets it go, as a rebuild, without
        that narrative, names them after their first member. Read when a cluster stops being
        consolidated (rare: its narrative deleted or archived), one member look-up each."""
        rows = conn.execute(
            "SELECT c.cluster_id, (SELECT m.entry_id FROM cluster_members m WHERE "
            "m.cluster_key=c.cluster_key AND m.deprecated_by IS NULL ORDER BY m.ts, m.entry_id "
            "LIMIT 1) AS first FROM clusters c WHERE c.app_id=? AND c.project_id=? AND "
            "c.user_id=? AND c.consolidated_entry_id IS NULL",
            (ref.app, ref.project, ref.user_id)).fetchall()
        return [r["cluster_id"] for r in rows if r["first"] is not None and r["cluster_id"]
                != cluster_id_for(ref.app, ref.project, ref.user_id, r["first"])]

    def _place_history(self, conn: _Write, ref: UserRef, ids: Iterable[str],
                       live: Iterable[str] = ()) -> None:
        """Put the archived Episodes tied to ``ids`` where a rebuild puts them
        (:meth:`_Rebuild.history`): those of ``ids`` that are archived and every Episode
        archived toward one of ``ids`` or toward those, along chains of updates. Each is
        history of the cluster its last successor is a live member of when that cluster is
        consolidated, else in no cluster. The online rules kept a source where it was when
        it was archived: synced before its narrative (the first scan of a copied root, a
        narrative's log broken and then fixed) it was in no cluster, where a ``reindex``
        lists it as history of the narrative's; archived by hand toward an entry in no
        consolidated cluster (or none at all) it stayed listed, where a ``reindex`` has
        no row of it. ``live``: more ids, known live: only what is archived toward them is
        read (an indexed batch's Episodes, most often the only ids, are not read twice)."""
        key = (ref.app, ref.project, ref.user_id)
        archived: dict[str, sqlite3.Row] = {}  # id -> its entries row (deprecated_by, ts …)
        frontier = sorted(set(ids))
        for chunk, marks in id_batches(frontier):
            archived.update((r["id"], r) for r in conn.execute(
                f"SELECT id, ts, deprecated_by, text_hash FROM entries WHERE app_id=? AND "
                f"project_id=? AND user_id=? AND id IN ({marks}) AND kind='episode' "
                "AND deprecated_by IS NOT NULL", (*key, *chunk)))
        frontier = sorted({*frontier, *live})
        for _ in range(_MAX_HOPS + 1):  # a chain of _MAX_HOPS + 1 updates: see last()
            found = conn.execute(_ARCHIVED_TOWARD, (*key, json.dumps(frontier))).fetchall()
            frontier = sorted({r["id"] for r in found} - archived.keys())
            archived.update((r["id"], r) for r in found)
            if not frontier:
                break
        if not archived:
            return
        successor: dict[str, str | None] = {i: r["deprecated_by"] for i, r in archived.items()}

        def last(entry_id: str) -> str:
            target, hops = str(successor[entry_id]), 0
            while hops < _MAX_HOPS:
                if target not in successor:  # live, or no Episode: the chain ends there
                    row = conn.execute(
                        "SELECT deprecated_by FROM entries WHERE app_id=? AND project_id=? AND "
                        "user_id=? AND id=? AND kind='episode'", (*key, target)).fetchone()
                    successor[target] = row["deprecated_by"] if row is not None else None
                after = successor[target]
                if after is None:
                    break
                target, hops = after, hops + 1
            return target

        final = {i: last(i) for i in archived}
        live = {i: r for i, r in self._member_rows(conn, ref, sorted(set(final.values()))).items()
                if r["deprecated_by"] is None}
        consolidated = {cid for cid in sorted({r["cluster_id"] for r in live.values()})
                        if conn.execute(f"SELECT 1 FROM clusters WHERE {_BY_ID} AND "
                                        "consolidated_entry_id IS NOT NULL", (cid,)).fetchone()}
        have = self._member_rows(conn, ref, sorted(archived))
        now = utcnow_iso()
        emptied: set[str] = set()
        for entry_id in sorted(archived):
            r = archived[entry_id]
            home = live.get(final[entry_id])
            want = (home["cluster_id"], r["deprecated_by"], entry_epoch(entry_id, r["ts"])) \
                if home is not None and home["cluster_id"] in consolidated else None
            row = have.get(entry_id)
            if row is not None and want == (row["cluster_id"], row["deprecated_by"], row["ts"]):
                if row["text_hash"] != r["text_hash"]:
                    # its text edited while archived: the hash a rebuild reads from the log
                    conn.hold(ref)
                    conn.execute("UPDATE cluster_members SET text_hash=? WHERE app_id=? AND "
                                 "project_id=? AND user_id=? AND entry_id=?",
                                 (r["text_hash"], *key, entry_id))
                continue
            if row is None and want is None:
                continue
            conn.hold(ref)
            if row is not None:
                conn.execute("DELETE FROM cluster_members WHERE app_id=? AND project_id=? AND "
                             "user_id=? AND entry_id=?", (*key, entry_id))
                if row["deprecated_by"] is None:
                    emptied.add(row["cluster_id"])
            if want is not None:
                conn.execute(_INSERT_HISTORY, (*key, entry_id, want[0], want[2], r["text_hash"],
                                               now, want[1]))
        for cid in sorted(emptied):
            self._recompute(conn, ref, cid)

    def _revive(self, conn: _Write, ref: UserRef, entry_id: str, vec: np.ndarray,
                ts: float, text_hash: str | None) -> str:
        conn.recheck_history(ref, [entry_id])  # what was archived toward it ends here now
        row = self._member_rows(conn, ref, [entry_id]).get(entry_id)
        if row is not None and row["deprecated_by"] is None:
            return "unchanged"
        if row is not None:
            # History of the cluster its last successor is in (:meth:`_place_history`), which
            # need not be where it came from (archived along a chain of updates, or by hand
            # toward another cluster's narrative). A source of the cluster's narrative (an
            # undo) goes back in place when the rule puts it there; any other, and one the
            # rule would found a cluster for, is placed by the rule, as a rebuild places it.
            narrative = conn.execute(
                f"SELECT consolidated_entry_id FROM clusters WHERE {_BY_ID}",
                (row["cluster_id"],)).fetchone()
            chosen = conn.state(ref).choose(
                vec, ts, threshold=self.threshold, window_seconds=self.window_seconds,
                rejoin_threshold=self.rejoin_threshold,
                member_threshold=self.member_threshold).cluster_id
            if narrative is None or narrative[0] != row["deprecated_by"] or \
                    chosen != row["cluster_id"]:
                row = None
        if row is None:  # archived in no cluster, or it belongs elsewhere: placed by the rule
            decision = self._assign(conn, ref, entry_id, vec, ts, text_hash)
            if decision.cluster_id is not None and decision.reason != NEW:
                # joined among members that may be later than it: as a rebuild replays them
                self._recompute(conn, ref, decision.cluster_id, known={entry_id: vec})
            return decision.reason
        conn.hold(ref)
        conn.execute("UPDATE cluster_members SET deprecated_by=NULL, ts=?, text_hash=? "
                     f"WHERE {_OF_CLUSTER} AND entry_id=?",
                     (ts, text_hash, row["cluster_id"], entry_id))
        self._recompute(conn, ref, row["cluster_id"], known={entry_id: vec})
        return "revived"

    def _detach(self, conn: _Write, ref: UserRef, entry_id: str) -> None:
        row = self._member_rows(conn, ref, [entry_id]).get(entry_id)
        if row is None:
            return
        conn.hold(ref)
        conn.execute("DELETE FROM cluster_members WHERE app_id=? AND project_id=? AND user_id=? "
                     "AND entry_id=?", (ref.app, ref.project, ref.user_id, entry_id))
        if row["deprecated_by"] is None:
            self._recompute(conn, ref, row["cluster_id"])

    def _recompute(self, conn: _Write, ref: UserRef, cluster_id: str,
                   known: Mapping[str, np.ndarray] | None = None) -> None:
        """Rebuild a cluster's centroid, count and span from its live members, and their
        similarities as a rebuild replays them (:meth:`_replay_similarities`); delete it when
        none is left (its history rows go with it). Its id is checked before COMMIT
        (:meth:`_rename_for_founder`)."""
        row = conn.execute(f"SELECT consolidated_entry_id FROM clusters WHERE {_BY_ID}",
                           (cluster_id,)).fetchone()
        if row is None:
            conn.state(ref).remove(cluster_id)
            return
        members = conn.execute(
            f"SELECT entry_id, ts, similarity FROM cluster_members WHERE {_OF_CLUSTER} "
            "AND deprecated_by IS NULL", (cluster_id,)).fetchall()
        if not members:
            conn.delete_cluster(ref, cluster_id)
            return
        narrative = row["consolidated_entry_id"]
        order = sorted(members, key=lambda m: (m["entry_id"] != narrative, m["ts"],
                                               m["entry_id"]))
        if narrative is None:
            conn.founders.setdefault(ref, set()).add(cluster_id)
        known = dict(known or {})
        need = [m["entry_id"] for m in order if m["entry_id"] not in known]
        known.update({k: normalize(v) for k, v in self._vectors(ref, need).items()})
        vecs = [known[m["entry_id"]] for m in order if m["entry_id"] in known]
        if len(vecs) < len(order):
            log.warning("cluster %s: %s missing; centroid from the rest",
                        cluster_id, counted(len(order) - len(vecs), "member vector"))
        centroid, norm, _ = mean_of(vecs)
        if centroid is None:  # no vector at all: the row stays, memory re-reads it
            conn.refresh(ref, cluster_id)
            return
        self._replay_similarities(conn, ref, cluster_id, order, known)
        cluster = _Cluster(cluster_id, centroid, norm, len(order),
                           min(m["ts"] for m in order), max(m["ts"] for m in order), narrative)
        conn.save_cluster(ref, cluster)

    def _rename_for_founders(self, conn: _Write, ref: UserRef, cluster_ids: set[str]) -> None:
        """:meth:`_rename_for_founder` for each of ``cluster_ids`` until none is renamed: a
        rename frees an id that another of them (founded meanwhile by the same Episode, or by
        one whose id was taken) may then take, as a rebuild gives it."""
        pending = set(cluster_ids)
        for _ in range(len(pending) + 1):
            renamed = {cid: self._rename_for_founder(conn, ref, cid) for cid in sorted(pending)}
            moved = {old: new for old, new in renamed.items() if new is not None and new != old}
            if not moved:
                return
            pending = {moved.get(cid, cid) for cid, new in renamed.items() if new is not None}

    def _rename_for_founder(self, conn: _Write, ref: UserRef, cluster_id: str) -> str | None:
        """Give a cluster no narrative holds the id a rebuild gives it: the first free id for
        its earliest live member, which founds it in a rebuild (:meth:`_Rebuild.assign`). Its
        founder archived or deleted by hand, or edited away, it kept the founder's id where
        a ``reindex`` names it after the member that comes first now: the Markdown keeps no
        trace of which Episode once founded a cluster. Audit rows (``reflection_report``)
        keep the id they named: they are history. A consolidated cluster keeps the id its
        narrative's ``parent_id`` names, as a rebuild does, and so does one that holds a
        live narrative (an undo attaches it again). Returns its id, None if it is gone.

        ``ref``'s cluster, looked up with its user: another user's may hold the id too for
        a moment (below). It takes no id another user's cluster holds; one it was denied so
        is asked again once that cluster lets it go, in the same transaction
        (:attr:`_Write.denied`). Looked up by id alone, a user's cluster gone from under an
        id another user's had just taken back was that one, renamed after the wrong user."""
        row = conn.execute(f"SELECT cluster_key, consolidated_entry_id FROM clusters WHERE "
                           f"cluster_key IN {CLUSTER_KEY_OF_ID} AND app_id=? AND project_id=? "
                           "AND user_id=?", (cluster_id, ref.app, ref.project,
                                             ref.user_id)).fetchone()
        if row is None:
            return None
        key = row["cluster_key"]
        first = conn.execute(
            "SELECT m.entry_id, e.parent_type FROM cluster_members m LEFT JOIN entries e ON "
            "e.app_id=m.app_id AND e.project_id=m.project_id AND e.user_id=m.user_id AND "
            "e.id=m.entry_id AND e.kind='episode' WHERE m.cluster_key=? AND "
            "m.deprecated_by IS NULL ORDER BY e.parent_type IS 'cluster' DESC, m.ts, "
            "m.entry_id LIMIT 1", (key,)).fetchone()
        if row["consolidated_entry_id"] is not None or first is None or \
                first["parent_type"] == "cluster":
            return cluster_id
        st = conn.state(ref)
        attempt = 0
        denied: list[str] = []  # held by another user's cluster: noted under the id it ends with
        while True:  # :func:`_free_id`'s test, the id it holds counting as free
            cid = cluster_id_for(ref.app, ref.project, ref.user_id, first[0], attempt)
            if not conn.named_elsewhere(ref, cid):
                if cid == cluster_id:
                    break
                if cid not in st:
                    if not conn.execute(
                            f"SELECT 1 FROM clusters WHERE cluster_key IN {CLUSTER_KEY_OF_ID} "
                            "AND NOT (app_id=? AND project_id=? AND user_id=?) LIMIT 1",
                            (cid, ref.app, ref.project, ref.user_id)).fetchone():
                        break
                    denied.append(cid)
            attempt += 1
        for held in denied:
            # asked again by the id it holds after this call: noted under the one it held
            # before, a cluster renamed on was looked up there and found gone
            conn.denied.setdefault(held, {}).setdefault(ref, set()).add(cid)
        if cid == cluster_id:
            return cluster_id
        conn.execute("UPDATE clusters SET cluster_id=? WHERE cluster_key=?", (cid, key))
        conn.execute("UPDATE cluster_members SET cluster_id=? WHERE cluster_key=?", (cid, key))
        conn.freed.add(cluster_id)  # a narrative of another user may name it
        _carry_set_aside(conn, ref, cluster_id, cid)
        if cluster_id in st:
            renamed = st.get(cluster_id)
            st.remove(cluster_id)
            renamed.cluster_id = cid
            st.put(renamed)
        st.keys[cid] = key
        log.info("cluster %s renamed %s after its first member %s", cluster_id, cid, first[0])
        return cid

    @staticmethod
    def _replay_similarities(conn: _Write, ref: UserRef, cluster_id: str,
                             order: Sequence[sqlite3.Row],
                             vectors: Mapping[str, np.ndarray]) -> None:
        """Set each live member's similarity to what a rebuild gives it: the cosine with the
        centroid of the members before it in ``order`` (the narrative, then by time), none for
        the first and for a narrative. A member revived by ``undo`` (or by removing its
        ``deprecated_entries`` line) kept the NULL of its archived row, and the members after
        one that left kept a similarity to a centroid that held it, where a ``reindex`` replays
        the cluster as it is now. The fold is :func:`mean_of`'s and the cosine the rule's
        (:func:`similarities`), bit for bit; a member with no vector is left as it is."""
        want: dict[str, float | None] = {}
        centroid: np.ndarray | None = None
        norm, count = 0.0, 0
        for m in order:
            vec = vectors.get(m["entry_id"])
            if vec is None:
                continue
            want[m["entry_id"]] = None if centroid is None else \
                float(similarities(centroid[None, :], vec)[0])
            centroid, norm = fold(centroid, norm, count, vec)
            count += 1
        changed = {m["entry_id"]: want[m["entry_id"]] for m in order
                   if m["entry_id"] in want and want[m["entry_id"]] != m["similarity"]}
        # a narrative (similarity NULL: only Episodes are placed by similarity) keeps its NULL
        nulls = sorted(i for i, m in ((m["entry_id"], m) for m in order)
                       if i in changed and m["similarity"] is None)
        for chunk, marks in id_batches(nulls):
            for r in conn.execute(
                    f"SELECT id FROM entries WHERE app_id=? AND project_id=? AND user_id=? "
                    f"AND id IN ({marks}) AND parent_type='cluster'",
                    (ref.app, ref.project, ref.user_id, *chunk)):
                del changed[r["id"]]
        if not changed:
            return
        conn.hold(ref)
        conn.executemany(
            f"UPDATE cluster_members SET similarity=? WHERE {_OF_CLUSTER} AND entry_id=?",
            [(sim, cluster_id, entry_id) for entry_id, sim in sorted(changed.items())])

    def _free_cluster_id(self, conn: _Write, ref: UserRef, first: str,
                         st: UserClusters | None = None) -> str:
        """The first id for ``first`` not used by this user (its in-memory state holds every
        cluster it has, queued ones included) nor named by another user's live narrative
        (:func:`_free_id`), the same test ``recluster`` makes. One that is not ``first``'s
        own id is checked again before COMMIT: the cluster holding that id may be renamed
        meanwhile (:meth:`_rename_for_founder`)."""
        cid, attempt = _free_id(conn.state(ref) if st is None else st, ref, first,
                                lambda c: conn.named_elsewhere(ref, c))
        if attempt:  # not first's own id (the one attempt 0 hashes)
            conn.founders.setdefault(ref, set()).add(cid)
        return cid

    @staticmethod
    def _member_rows(conn: _Write, ref: UserRef,
                     ids: Sequence[str]) -> dict[str, sqlite3.Row]:
        conn.flush_members_of(ref, ids)
        if not ids:
            return {}
        if len(ids) <= _MEMBERS_IN_MAX:
            # an IN list padded to a power of two (repeats change nothing): seven statement
            # texts in all, each compiled once, and no JSON to build and parse per call
            size = 1 << (len(ids) - 1).bit_length()
            params = (ref.app, ref.project, ref.user_id, *ids, *[ids[-1]] * (size - len(ids)))
            rows = conn.conn.execute(_MEMBERS_IN[size], params)
        else:
            # one statement text whatever the number of ids, so SQLite compiles it once
            rows = conn.conn.execute(
                "SELECT * FROM cluster_members WHERE app_id=? AND project_id=? AND user_id=? "
                "AND entry_id IN (SELECT value FROM json_each(?))",
                (ref.app, ref.project, ref.user_id, json.dumps(list(ids))))
        return {r["entry_id"]: r for r in rows}

    def _clusters_where(self, where: str, params: tuple[Any, ...],
                        order: str = "") -> list[ClusterInfo]:
        """The clusters ``where`` picks, ``order``ed, each with its count of live members
        other than the narrative and its preview (the subject of the narrative, else of the
        earliest live member), all read in one statement and without the centroid (1.5 KB a
        row, which the sort carried): the previews used to be looked up afterwards by a chain
        of 200 ``OR``-ed keys a statement (~35 µs a cluster)."""
        rows = self._db.execute(
            f"""SELECT c.cluster_id, c.app_id, c.project_id, c.user_id, c.member_count,
                   c.first_ts, c.last_ts, c.consolidated_entry_id, c.consolidated_at,
                   (SELECT COUNT(*) FROM cluster_members m WHERE m.cluster_key=c.cluster_key
                      AND m.deprecated_by IS NULL
                      AND m.entry_id IS NOT c.consolidated_entry_id) AS new_since,
                   COALESCE((SELECT e.subject FROM entries e
                     WHERE e.app_id=c.app_id AND e.project_id=c.project_id
                       AND e.user_id=c.user_id AND e.id=COALESCE(c.consolidated_entry_id,
                         (SELECT m.entry_id FROM cluster_members m
                          WHERE m.cluster_key=c.cluster_key AND m.deprecated_by IS NULL
                          ORDER BY m.ts, m.entry_id LIMIT 1))), '') AS preview
                FROM clusters c WHERE {where} {order}""", params).fetchall()
        return [self._info(r) for r in rows]

    @staticmethod
    def _info(r: sqlite3.Row) -> ClusterInfo:
        ref = UserRef(r["app_id"], r["project_id"], r["user_id"])
        preview = r["preview"]
        consolidated = r["consolidated_entry_id"]
        return ClusterInfo(
            cluster_id=r["cluster_id"], ref=ref, size=r["member_count"], first_ts=r["first_ts"],
            last_ts=r["last_ts"], preview=preview, consolidated_entry_id=consolidated,
            consolidated_at=r["consolidated_at"],
            new_since_consolidation=r["new_since"] if consolidated else 0)


#: more clusters than any owner has (a larger ``max_clusters`` asks for them all)
_NO_LIMIT = 1 << 62
#: a cluster :meth:`ClusterService.eligible_for_reflection` returns, as SQL over ``clusters c``:
#: never consolidated with at least two members, or consolidated with a live member other
#: than its narrative (the ``new_since`` of :meth:`ClusterService._clusters_where` above 0)
_ELIGIBLE = (
    "((c.consolidated_entry_id IS NULL AND c.member_count >= 2) OR "
    "(c.consolidated_entry_id IS NOT NULL AND EXISTS (SELECT 1 FROM cluster_members m "
    "WHERE m.cluster_key=c.cluster_key AND m.deprecated_by IS NULL "
    "AND m.entry_id IS NOT c.consolidated_entry_id)))")


#: The most member texts one Episode's placement reads for the join of a fact's newer
#: version (:func:`_holds_earlier_version`; ~0.1–0.3 ms each since session 38, ~1 ms before).
#: Unbounded, an Episode that tells a change read every earlier member of every cluster near
#: it in the window: ~150 CPU-µs per Episode on average for one owner of 10,880 LoCoMo
#: Episodes, against ~37 without the join (bench/bench_clustering.py). A fact's earlier
#: version sits in one of the clusters most like it, among its latest members: those are
#: read first.
MAX_VERSION_READS = 8


class _VersionReads:
    """What is left of :data:`MAX_VERSION_READS` for one placement (online and rebuilt alike,
    so both place an Episode the same way)."""

    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = MAX_VERSION_READS


def _holds_earlier_version(members: Iterable[tuple[float, str, str]], key: tuple[float, str],
                           later: str, window_seconds: float, reads: _VersionReads) -> bool:
    """Is one of ``members`` (``(epoch, id, text)``) placed before ``key`` (``(epoch,
    id)``), in the window of it, and a fact ``later`` tells the newer version or the end
    of (:func:`~everos_reflect.llm.extractive.tells_newer_version`)? The latest are read
    first, while ``reads`` lasts."""
    for ts, mid, text in sorted(members, reverse=True):
        if (ts, mid) >= key or not in_window(key[0], ts, ts, window_seconds):
            continue
        if not reads.left:
            return False
        reads.left -= 1
        if tells_newer_version(text, later):
            return True
    return False


def _live_members(conn: sqlite3.Connection, ref: UserRef, cluster_id: str,
                  cluster_key: int | None, since: float, until: float,
                  queued: Sequence[tuple[str, float]]) -> list[tuple[float, str, str]]:
    """The live Episodes (not narratives) of ``cluster_id`` placed at ``since`` to ``until``,
    as ``(epoch, id, text)``, with the texts ``entries`` holds: the rows written, and
    ``queued`` (``(id, epoch)`` of its memberships not yet written, :meth:`_Write
    .queued_members`), whose texts are read by id under the same conditions. Read without
    writing the queue first: a batch's writes stay one ``executemany`` each, where writing
    them before every look-up cost as much as the look-ups (one owner ×20: ~700 writes of a
    few rows each). ``cluster_key``: the cluster's key when memory holds it (one index
    probe), else it is looked up by id (a probe per key bucket, migration 0012)."""
    return _live_members_of(conn, ref, [(cluster_id, cluster_key)], since, until,
                            {cluster_id: queued})[cluster_id]


def _live_members_of(conn: sqlite3.Connection, ref: UserRef,
                     clusters: Sequence[tuple[str, int | None]], since: float, until: float,
                     queued: Mapping[str, Sequence[tuple[str, float]]],
                     unwritten: Collection[str] = ()) -> dict[str, list[tuple[float, str, str]]]:
    """:func:`_live_members` of several clusters (``(id, key)``), by cluster id: the written
    members of all those whose key memory holds in one statement, the texts of every queued
    member in another, and nothing written looked up for the clusters in ``unwritten``
    (created by this transaction and not written: :meth:`_Write.unwritten`). The version
    join reads ~2.6 clusters per Episode it places (one owner ×20), most of them made in
    the same batch, ~1.3 members each, and two statements per cluster were most of what
    reading them cost."""
    out: dict[str, list[tuple[float, str, str]]] = {cid: [] for cid, _ in clusters}
    by_key = {k: cid for cid, k in clusters if k is not None and cid not in unwritten}
    keys = list(by_key)
    for start in range(0, len(keys), _MEMBERS_IN_MAX):
        # an IN list padded to a power of two, as _member_rows: a few statement texts
        chunk = keys[start:start + _MEMBERS_IN_MAX]
        size = 1 << (len(chunk) - 1).bit_length()
        for r in conn.execute(_LIVE_MEMBERS_IN[size],
                              (*chunk, *[chunk[-1]] * (size - len(chunk)), since, until)):
            out[by_key[r[0]]].append((r[2], r[1], r[3]))
    for cid, k in clusters:
        if k is None and cid not in unwritten:  # not in memory's keys: looked up by id
            out[cid] += [(r["ts"], r["entry_id"], r["text"]) for r in conn.execute(
                f"SELECT m.entry_id, m.ts, e.text FROM cluster_members m JOIN entries e ON "
                "e.app_id=m.app_id AND e.project_id=m.project_id AND e.user_id=m.user_id AND "
                "e.id=m.entry_id AND e.kind='episode' "
                f"WHERE m.{_OF_CLUSTER} AND m.deprecated_by IS NULL AND m.ts >= ? "
                "AND m.ts <= ? AND e.parent_type IS NOT 'cluster' AND e.deprecated_by IS NULL",
                (cid, since, until))]
    texts: dict[str, str] = {}
    ids = [entry_id for cid, _ in clusters for entry_id, _ in queued.get(cid, ())]
    for start in range(0, len(ids), _MEMBERS_IN_MAX):
        # an IN list padded to a power of two, as _member_rows: a primary-key probe per id
        # (the planner scans the user's every Episode for an IN over json_each)
        chunk = ids[start:start + _MEMBERS_IN_MAX]
        size = 1 << (len(chunk) - 1).bit_length()
        texts.update((r[0], r[1]) for r in conn.execute(
            _LIVE_TEXTS_IN[size], (ref.app, ref.project, ref.user_id, *chunk,
                                   *[chunk[-1]] * (size - len(chunk)))))
    for cid, _ in clusters:
        out[cid] += [(ts, entry_id, texts[entry_id]) for entry_id, ts in queued.get(cid, ())
                     if entry_id in texts]
    return out


#: the live Episodes (not narratives) of clusters by key, placed in a span of time, with
#: their texts (:func:`_live_members_of`); the key first, to tell the clusters apart
_LIVE_MEMBERS_IN = {
    size: "SELECT m.cluster_key, m.entry_id, m.ts, e.text FROM cluster_members m JOIN "
          "entries e ON e.app_id=m.app_id AND e.project_id=m.project_id AND "
          "e.user_id=m.user_id AND e.id=m.entry_id AND e.kind='episode' "
          f"WHERE m.cluster_key IN ({','.join('?' * size)}) AND m.deprecated_by IS NULL "
          "AND m.ts >= ? AND m.ts <= ? AND e.parent_type IS NOT 'cluster' "
          "AND e.deprecated_by IS NULL"
    for size in (1 << b for b in range(7))
}


#: a live narrative of another user names this cluster id (the partial index of narratives
#: by parent, migration 0027)
_NAMED_ELSEWHERE = (
    "SELECT 1 FROM entries WHERE parent_type='cluster' AND parent_id=? AND kind='episode' AND "
    "deprecated_by IS NULL AND NOT (app_id=? AND project_id=? AND user_id=?) LIMIT 1")

#: :data:`_NAMED_ELSEWHERE` for several ids at once (:meth:`_Write.named_elsewhere_of`): an
#: IN list padded to a power of two, else the ids as one JSON array
_NAMED_ELSEWHERE_WHERE = (
    "parent_type='cluster' AND kind='episode' AND deprecated_by IS NULL "
    "AND NOT (app_id=?1 AND project_id=?2 AND user_id=?3)")
_NAMED_ELSEWHERE_IN = {
    size: "SELECT DISTINCT parent_id FROM entries WHERE parent_id IN "
          f"({','.join(f'?{4 + n}' for n in range(size))}) AND {_NAMED_ELSEWHERE_WHERE}"
    for size in (1 << b for b in range(7))
}
_NAMED_ELSEWHERE_JSON = (
    "SELECT DISTINCT parent_id FROM entries WHERE parent_id IN "
    f"(SELECT value FROM json_each(?4)) AND {_NAMED_ELSEWHERE_WHERE}")

#: the Episodes archived toward any of a JSON array of ids (:meth:`ClusterService.
#: _place_history`): one statement text whatever the number of ids, compiled once (an IN
#: list of one ``?`` per id was a text per count, compiled again for most users of a batch),
#: one probe of the partial index of archived entries (migration 0025) per id
_ARCHIVED_TOWARD = (
    "SELECT id, ts, deprecated_by, text_hash FROM entries WHERE app_id=? AND project_id=? AND "
    "user_id=? AND deprecated_by IN (SELECT value FROM json_each(?)) AND kind='episode'")

#: texts of live Episodes that are not narratives, by id (:func:`_live_members`)
_LIVE_TEXTS_IN = {
    size: "SELECT id, text FROM entries WHERE app_id=? AND project_id=? AND user_id=? "
          f"AND id IN ({','.join('?' * size)}) AND +kind='episode' "
          "AND parent_type IS NOT 'cluster' AND deprecated_by IS NULL"
    for size in (1 << b for b in range(7))
}


def _free_id(st: Collection[str], ref: UserRef, first: str,
             named_elsewhere: Callable[[str], bool] | None = None) -> tuple[str, int]:
    """The first id for ``first`` that ``st`` (every cluster of ``ref``) does not hold and
    that no live narrative of another user names (``named_elsewhere``), and its attempt (0:
    ``first``'s own id; told, so the caller need not hash it again to know: a sha256 per new
    cluster, most Episodes found one).

    A cluster id names one cluster whatever the user (``cluster``, ``members`` and the API
    look clusters up by id alone). Ids hash the user in, but a narrative keeps the id its
    ``parent_id`` names: a user's folder renamed (u_bob to u_cy), its narrative names
    u_bob's id, and another folder renamed u_bob founds that id again from the same entry
    id. The narrative, written in the Markdown, holds it first, online and in a rebuild,
    whatever the order the users are synced or rebuilt in; the Episode takes the next."""
    attempt = 0
    while True:
        cid = cluster_id_for(ref.app, ref.project, ref.user_id, first, attempt)
        if cid not in st and (named_elsewhere is None or not named_elsewhere(cid)):
            return cid, attempt
        attempt += 1


def _carry_set_aside(conn: _Write, ref: UserRef, old: str, new: str) -> None:
    """Reflection's set-aside rows of cluster ``old`` (its changes cursor, keyed by cluster
    id: :meth:`ReflectionRun._failed`) follow it to its new id ``new``. Left behind, a
    cluster the server refused for good, renamed with its members as they were (the id its
    founder's own was held by a narrative's cluster, now gone), was sent again, refused again,
    and no longer listed as set aside until then."""
    from everos_reflect.strategies.reflect import NAME

    conn.execute("UPDATE OR REPLACE change_cursor SET entry_id=? WHERE strategy=? AND app_id=? "
                 "AND project_id=? AND user_id=? AND entry_id=?",
                 (new, NAME, ref.app, ref.project, ref.user_id, old))


def _blob(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def _row_cluster(r: sqlite3.Row) -> _Cluster:
    return _Cluster(r["cluster_id"], np.frombuffer(r["centroid"], dtype="<f4").copy(),
                    float(r["centroid_norm"]), int(r["member_count"]), float(r["first_ts"]),
                    float(r["last_ts"]), r["consolidated_entry_id"])


@dataclass
class _PlannedUser:
    """One user's clusters as a rebuild makes them (:meth:`ClusterService._plan_user`), with
    what the plan was made from that another writer could change before it is written."""

    plan: _Rebuild
    skipped: int  # live Episodes without a vector
    at: dict[str, str]  # each narrative's consolidated time
    named_ids: frozenset[str]  # the cluster ids the user's live narratives name
    foreign: set[str]  # those another user's cluster holds


class _Rebuild:
    """In-memory replay of the online rule for one user (``recluster``), on the same
    :class:`UserClusters` the online path uses."""

    def __init__(self, ref: UserRef, threshold: float, window: float, rejoin: float,
                 member: float = 0.0, version_floor: float = VERSION_FLOOR,
                 named_elsewhere: Callable[[str], bool] | None = None) -> None:
        self.ref, self.threshold, self.window, self.rejoin = ref, threshold, window, rejoin
        self.member, self.version_floor = member, version_floor
        #: a live narrative of another user names this id: no Episode founds it (_free_id)
        self.named_elsewhere = named_elsewhere
        #: per cluster, its live Episodes (not narratives) as ``(epoch, id, text)``, for
        #: the join of a fact's newer version
        self.episodes: dict[str, list[tuple[float, str, str]]] = {}
        self.state = UserClusters()
        self.clusters: dict[str, _Cluster] = {}
        # (entry_id, cluster_id, ts, similarity, deprecated_by, text_hash)
        self.members: list[tuple[str, str, float, float | None, str | None, str | None]] = []
        self.member_of: dict[str, str] = {}

    def narrative_cluster_id(self, entry_id: str, parent_id: str | None) -> str:
        if parent_id and CLUSTER_ID_RE.fullmatch(parent_id):
            return parent_id
        return cluster_id_for(self.ref.app, self.ref.project, self.ref.user_id, entry_id)

    def seed(self, cid: str, r: Any, vec: np.ndarray) -> None:
        ts = entry_epoch(r["id"], r["ts"])
        self._put(_Cluster.new(cid, vec, ts, r["id"]))
        self._member(r, cid, ts, None)

    def attach(self, cid: str, r: Any, vec: np.ndarray) -> None:
        ts = entry_epoch(r["id"], r["ts"])
        c = self.clusters.get(cid)
        if c is None:  # a narrative whose vector was missing for the seed
            self.seed(cid, r, vec)
            return
        c.add(vec, ts)
        self._put(c)
        self._member(r, cid, ts, None)

    def assign(self, r: Any, vec: np.ndarray) -> None:
        ts = entry_epoch(r["id"], r["ts"])
        decision = self.state.choose(vec, ts, threshold=self.threshold,
                                     window_seconds=self.window, rejoin_threshold=self.rejoin,
                                     member_threshold=self.member)
        text = r["text"]
        if (decision.cluster_id is None and decision.similarity >= self.version_floor
                and tells_change(text)):  # under the floor no cluster could take it (_assign)
            reads = _VersionReads()
            decision = self.state.choose_version(
                vec, ts, window_seconds=self.window, floor=self.version_floor,
                holds_partner=lambda cid: _holds_earlier_version(
                    self.episodes.get(cid, ()), (ts, r["id"]), text, self.window,
                    reads)) or decision
        if decision.cluster_id is None:
            cid, _ = _free_id(self.clusters, self.ref, r["id"], self.named_elsewhere)
            self._put(_Cluster.new(cid, vec, ts))
            self._member(r, cid, ts, None)
            self.episodes.setdefault(cid, []).append((ts, r["id"], text))
            return
        c = self.clusters[decision.cluster_id]
        c.add(vec, ts)
        self._put(c)
        self._member(r, c.cluster_id, ts, decision.similarity)
        self.episodes.setdefault(c.cluster_id, []).append((ts, r["id"], text))

    def _put(self, c: _Cluster) -> None:
        self.clusters[c.cluster_id] = c
        self.state.put(c)

    def history(self, deprecated: Sequence[Any]) -> None:
        """Record replaced Episodes as non-live members of the cluster their replacement (or
        its replacement, for chains of updates) lives in."""
        by = {r["id"]: r["deprecated_by"] for r in deprecated}
        for r in sorted(deprecated, key=lambda r: (entry_epoch(r["id"], r["ts"]), r["id"])):
            target, hops = r["deprecated_by"], 0
            while target in by and hops < _MAX_HOPS:
                target, hops = by[target], hops + 1
            cid = self.member_of.get(target)
            if cid is not None and self.clusters[cid].consolidated_entry_id is not None:
                self.members.append((r["id"], cid, entry_epoch(r["id"], r["ts"]), None,
                                     r["deprecated_by"], r["text_hash"]))

    def _member(self, r: Any, cid: str, ts: float, similarity: float | None) -> None:
        self.members.append((r["id"], cid, ts, similarity, None, r["text_hash"]))
        self.member_of[r["id"]] = cid


__all__ = ["ClusterInfo", "ClusterService", "Member", "UnknownCluster"]
