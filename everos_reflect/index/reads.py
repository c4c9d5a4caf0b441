"""The index's read interface: every question strategies, the engine and the edges ask SQLite.

The tables under ``.index/`` are derived state whose layout belongs to :mod:`index`; code above
it (strategies, CLI, API) asks through these functions instead of writing SQL, so a change of
schema is a change in one package. Each function takes the connection (``runtime.db()``) and
returns plain values; none writes.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from everos_reflect.index.db import CLUSTER_KEY_OF_ID, connect_to_read, db_path, id_batches
from everos_reflect.model import UserRef, text_hash

#: Seconds in a week, and the shift that makes epoch weeks start on Monday (1970-01-01 was a
#: Thursday), so an epoch-week number is the ISO week.
_WEEK = 7 * 86400
_MONDAY_SHIFT = 3 * 86400


def _ref(row: sqlite3.Row | Sequence[Any]) -> UserRef:
    return UserRef(row[0], row[1], row[2])


def _id_list(text: str | None) -> list[str]:
    """A JSON list column as ids; an unreadable one (a damaged index) as none."""
    try:
        value = json.loads(text or "[]")
    except ValueError:
        return []
    return [str(v) for v in value] if isinstance(value, list) else []


# -- entries ------------------------------------------------------------------------------------


def live_episode_weeks(conn: sqlite3.Connection) -> dict[UserRef, int]:
    """Per owner, in how many different (UTC, Monday-based) weeks their live Episodes fall."""
    rows = conn.execute(
        "SELECT app_id, project_id, user_id, "
        "COUNT(DISTINCT CAST((ts + ?) / ? AS INTEGER)) FROM entries "
        "WHERE kind = 'episode' AND deprecated_by IS NULL AND ts IS NOT NULL "
        "GROUP BY app_id, project_id, user_id", (_MONDAY_SHIFT, _WEEK))
    return {_ref(r): int(r[3]) for r in rows}


def holds_any_log(conn: sqlite3.Connection) -> bool:
    """Whether any log was ever synced into the index (an empty ``files`` table: never)."""
    return conn.execute("SELECT 1 FROM files LIMIT 1").fetchone() is not None


def entry_counts(conn: sqlite3.Connection) -> dict[tuple[UserRef, str, bool], int]:
    """``(owner, kind, archived) → number of entries`` over the whole index."""
    rows = conn.execute(
        "SELECT app_id, project_id, user_id, kind, deprecated_by IS NOT NULL, COUNT(*) "
        "FROM entries GROUP BY 1, 2, 3, 4, 5")
    return {(_ref(r), r[3], bool(r[4])): int(r[5]) for r in rows}


def live_entry_ids(conn: sqlite3.Connection, ref: UserRef, ids: Sequence[str]) -> set[str]:
    """Those of ``ids`` that are live (not archived) entries of ``ref`` (:func:`id_batches`)."""
    live: set[str] = set()
    for chunk, marks in id_batches(ids):
        live.update(r[0] for r in conn.execute(
            f"SELECT id FROM entries WHERE app_id=? AND project_id=? AND user_id=? AND "
            f"deprecated_by IS NULL AND id IN ({marks})",
            (ref.app, ref.project, ref.user_id, *chunk)))
    return live


def newer_live_copies(conn: sqlite3.Connection, ref: UserRef, entry_id: str,
                      limit: int) -> list[sqlite3.Row] | None:
    """The live entries of ``entry_id``'s kind with its text, newer than it, newest first (at
    most ``limit``): ``id, kind, timestamp, subject, text, parent_id, sources``. None when
    ``entry_id`` is not indexed. The briefing shows the newest copy of a repeated line."""
    tenant = (ref.app, ref.project, ref.user_id)
    shown = conn.execute("SELECT kind, text_hash, ts FROM entries WHERE app_id = ? AND "
                         "project_id = ? AND user_id = ? AND id = ?",
                         (*tenant, entry_id)).fetchone()
    if shown is None:
        return None
    return conn.execute(
        "SELECT id, kind, timestamp, subject, text, parent_id, sources FROM entries "
        "WHERE app_id = ? AND project_id = ? AND user_id = ? AND kind = ? AND "
        "deprecated_by IS NULL AND text_hash = ? AND ts IS NOT NULL AND "
        "(? IS NULL OR ts > ?) ORDER BY ts DESC, id DESC LIMIT ?",
        (*tenant, shown[0], shown[1], shown[2], shown[2], limit)).fetchall()


def live_narrative_sources(conn: sqlite3.Connection) -> list[tuple[UserRef, str, list[str]]]:
    """Every live Reflection narrative (``parent_type: cluster``) with the ids it replaces."""
    rows = conn.execute(
        "SELECT app_id, project_id, user_id, id, sources FROM entries "
        "WHERE kind = 'episode' AND parent_type = 'cluster' AND deprecated_by IS NULL "
        "AND sources != '[]'").fetchall()
    return [(_ref(r), r[3], _id_list(r[4])) for r in rows]


def live_narratives_beside(conn: sqlite3.Connection, ref: UserRef) -> dict[str, set[str]]:
    """Each live entry of ``ref`` that a live narrative of ``ref`` names among its
    ``sources`` → those narratives. Empty unless a hand edit made the sources of a narrative
    live again beside it (or copied such a narrative, with them, into another user's folder).
    One pass over the user's live narratives, each named id looked up by the primary key."""
    found: dict[str, set[str]] = {}
    for source, narrative in conn.execute(
            "SELECT j.value, e.id FROM entries e, json_each(e.sources) j "
            "WHERE e.app_id=? AND e.project_id=? AND e.user_id=? AND e.kind='episode' AND "
            "e.parent_type='cluster' AND e.deprecated_by IS NULL AND e.sources != '[]' AND "
            "json_valid(e.sources) AND EXISTS (SELECT 1 FROM entries s WHERE "
            "s.app_id=e.app_id AND s.project_id=e.project_id AND s.user_id=e.user_id AND "
            "s.id=j.value AND s.deprecated_by IS NULL)",
            (ref.app, ref.project, ref.user_id)):
        found.setdefault(str(source), set()).add(narrative)
    return found


def sources_of_narratives_archived_as(conn: sqlite3.Connection, ref: UserRef,
                                      marker: str) -> list[list[str]]:
    """The ``sources`` of every narrative of ``ref`` archived with ``deprecated_by = marker``
    (undo archives a narrative toward itself)."""
    rows = conn.execute(
        "SELECT sources FROM entries WHERE app_id=? AND project_id=? AND user_id=? AND "
        "kind='episode' AND parent_type='cluster' AND deprecated_by=?",
        (ref.app, ref.project, ref.user_id, marker)).fetchall()
    return [_id_list(r[0]) for r in rows]


def owners_with_narratives_archived_as(conn: sqlite3.Connection, marker: str) -> list[UserRef]:
    """Owners with at least one narrative archived with ``deprecated_by = marker``."""
    rows = conn.execute(
        "SELECT DISTINCT app_id, project_id, user_id FROM entries WHERE kind='episode' AND "
        "parent_type='cluster' AND deprecated_by=? ORDER BY 1, 2, 3", (marker,)).fetchall()
    return [_ref(r) for r in rows]


def narrative_owners_other_than(conn: sqlite3.Connection, entry_id: str,
                                ref: UserRef) -> list[UserRef]:
    """Other owners that hold a narrative with id ``entry_id`` (ids are per owner)."""
    rows = conn.execute(
        "SELECT app_id, project_id, user_id FROM entries WHERE id=? AND "
        "parent_type='cluster' AND NOT (app_id=? AND project_id=? AND user_id=?) "
        "ORDER BY 1, 2, 3", (entry_id, ref.app, ref.project, ref.user_id)).fetchall()
    return [_ref(r) for r in rows]


def facts_embedded_as_stated(conn: sqlite3.Connection, ref: UserRef, ids: Sequence[str],
                             embed_model: str) -> set[str]:
    """Those of the atomic facts ``ids`` whose stored vector came from ``embed_model`` and
    embedded exactly their stated text (so the vector can stand for that text).

    Read by primary key, :func:`id_batches` a statement: with ``kind=...`` as a plain term
    SQLite takes the ``(user, kind)`` index from four ids on and reads every fact of the user
    to find a few (``+kind`` is not indexable)."""
    found: set[str] = set()
    for chunk, marks in id_batches(ids):
        rows = conn.execute(
            f"SELECT id, text, text_hash FROM entries WHERE app_id=? AND project_id=? AND "
            f"user_id=? AND id IN ({marks}) AND +kind='atomic_fact' AND embed_model=?",
            (ref.app, ref.project, ref.user_id, *chunk, embed_model))
        found.update(r[0] for r in rows if r[2] == text_hash(r[1]))
    return found


def live_facts_of(conn: sqlite3.Connection, ref: UserRef,
                  parents: Sequence[str]) -> list[tuple[str, str, str]]:
    """``(fact id, parent episode id, text)`` of the live atomic facts of ``parents``, oldest
    first (then by id; a fact without a time first, as SQLite orders NULL).

    Read by parent (``entries_by_parent``), :func:`id_batches` a statement: with
    ``kind=...`` as a plain term SQLite took the ``(user, kind)`` index and read every fact of
    the owner, however few parents were asked for (``+kind`` is not indexable)."""
    rows: list[tuple[Any, ...]] = []
    batches = list(id_batches(parents))
    for chunk, marks in batches:
        rows += conn.execute(
            f"SELECT id, parent_id, text, ts FROM entries WHERE app_id=? AND project_id=? AND "
            f"user_id=? AND parent_id IN ({marks}) AND +kind='atomic_fact' "
            f"AND deprecated_by IS NULL ORDER BY ts, id",
            (ref.app, ref.project, ref.user_id, *chunk)).fetchall()
    if len(batches) > 1:  # each statement's rows are in order, not the whole
        rows.sort(key=lambda r: (r[3] is not None, r[3] or 0.0, r[0]))
    return [(r[0], r[1], r[2]) for r in rows]


def kind_totals(conn: sqlite3.Connection) -> tuple[Counter[str], Counter[str]]:
    """``(live, archived)`` entry counts by kind over the whole index."""
    live: Counter[str] = Counter()
    archived: Counter[str] = Counter()
    for (_, kind, dep), n in entry_counts(conn).items():
        (archived if dep else live)[kind] += n
    return live, archived


def indexed_owners(conn: sqlite3.Connection) -> int:
    """How many owners have at least one indexed entry."""
    return int(conn.execute("SELECT COUNT(*) FROM (SELECT DISTINCT app_id, project_id, "
                            "user_id FROM entries)").fetchone()[0])


def archived_toward_missing(conn: sqlite3.Connection, *,
                            exempt: str) -> list[tuple[UserRef, str, str, str]]:
    """``(owner, entry id, deprecated_by, path)`` of entries archived toward an id their owner
    has no entry for; ``exempt`` (the undo marker) and self-links are not such ids."""
    rows = conn.execute(
        "SELECT e.app_id, e.project_id, e.user_id, e.id, e.deprecated_by, e.path FROM entries e "
        "WHERE e.deprecated_by IS NOT NULL AND e.deprecated_by NOT IN (?, e.id) "
        "AND NOT EXISTS (SELECT 1 FROM entries n WHERE n.app_id = e.app_id AND "
        "n.project_id = e.project_id AND n.user_id = e.user_id AND n.id = e.deprecated_by) "
        "ORDER BY e.app_id, e.project_id, e.user_id, e.id", (exempt,)).fetchall()
    return [(_ref(r), r[3], r[4], r[5]) for r in rows]


def archived_targets_archived(conn: sqlite3.Connection, *,
                              exempt: str) -> list[tuple[UserRef, str, str, str]]:
    """``(owner, entry id, deprecated_by, path)`` of archived entries that another archived
    entry of their owner points at (``exempt`` and self-links aside): the only entries an
    archive cycle can run through, and few (narratives replaced by a later merge), so a
    cycle is found without loading every archive link. ``CROSS JOIN`` keeps the archived
    entries outside and looks each target up by its whole key: the planner's own order
    searched all of a user's entries per archived one (71 s for 600,000 entries, not 0.2 s)."""
    rows = conn.execute(
        "SELECT DISTINCT n.app_id, n.project_id, n.user_id, n.id, n.deprecated_by, n.path "
        "FROM entries e CROSS JOIN entries n ON n.app_id = e.app_id AND "
        "n.project_id = e.project_id AND n.user_id = e.user_id AND n.id = e.deprecated_by "
        "WHERE e.deprecated_by IS NOT NULL AND n.deprecated_by IS NOT NULL "
        "AND n.deprecated_by NOT IN (?, n.id)", (exempt,)).fetchall()
    return [(_ref(r), r[3], r[4], r[5]) for r in rows]


def archived_toward_themselves(conn: sqlite3.Connection) -> list[tuple[UserRef, str, str]]:
    """``(owner, entry id, path)`` of entries archived toward themselves that are no
    Reflection narrative (a merge withdraws its narrative so; anything else, a hand edit)."""
    rows = conn.execute(
        "SELECT app_id, project_id, user_id, id, path FROM entries "
        "WHERE deprecated_by = id AND NOT (kind = 'episode' AND parent_type IS 'cluster')"
    ).fetchall()
    return [(_ref(r), r[3], r[4]) for r in rows]


def facts_missing_their_episode(conn: sqlite3.Connection) -> list[tuple[UserRef, str,
                                                                         str | None, str]]:
    """``(owner, fact id, parent_id, path)`` of atomic facts (``parent_type: episode``) whose
    owner has no Episode with their ``parent_id`` (deleted by hand, a typo, none given)."""
    rows = conn.execute(
        "SELECT f.app_id, f.project_id, f.user_id, f.id, f.parent_id, f.path FROM entries f "
        "WHERE f.kind = 'atomic_fact' AND f.parent_type = 'episode' "
        "AND NOT EXISTS (SELECT 1 FROM entries e WHERE e.app_id = f.app_id AND "
        "e.project_id = f.project_id AND e.user_id = f.user_id AND e.id = f.parent_id "
        "AND e.kind = 'episode')").fetchall()
    return [(_ref(r), r[3], r[4], r[5]) for r in rows]


def journal_steps(conn: sqlite3.Connection) -> dict[str, int]:
    """How many journal rows stand at each step (a crash interrupted them; recovery finishes
    them). Merges and undos share the journal; the caller tells them apart by step."""
    try:
        rows = conn.execute("SELECT step, COUNT(*) FROM merge_journal GROUP BY step")
        return {str(step): int(n) for step, n in rows}
    except sqlite3.Error:  # a root never migrated that far
        return {}


# -- files --------------------------------------------------------------------------------------


#: The problem said of a file whose recorded diagnostics cannot be read (``files.problems``
#: edited or damaged by hand): the index is derived, and ``reindex`` writes it again.
UNREADABLE_PROBLEMS = ("the index's record of this file's problems cannot be read (edited or "
                       "damaged): `everos-reflect reindex` rebuilds it")


def _recorded_problems(cell: object) -> list[Any]:
    """The diagnostics of one ``files.problems`` cell, a JSON list; anything else (no JSON,
    a number, an object) as :data:`UNREADABLE_PROBLEMS`: a cell holding ``5`` ended
    ``status`` in "internal error (TypeError: 'int' object is not iterable)", one holding
    no JSON in "Expecting value: line 1 column 1 (char 0)"."""
    try:
        value = json.loads(cell) if isinstance(cell, str | bytes) else None
    except (ValueError, RecursionError):
        value = None
    if isinstance(value, list):
        return value
    return [{"line": 0, "severity": "error", "message": UNREADABLE_PROBLEMS}]


def file_problems(conn: sqlite3.Connection) -> list[tuple[str, list[dict[str, Any]]]]:
    """``(path, diagnostics)`` of every indexed file the parser reported problems for."""
    rows = conn.execute("SELECT path, problems FROM files WHERE problems != '[]' "
                        "ORDER BY path")
    return [(r[0], _recorded_problems(r[1])) for r in rows]


# -- clusters -----------------------------------------------------------------------------------


def cluster_owners(conn: sqlite3.Connection) -> list[UserRef]:
    """Every owner with at least one cluster, sorted."""
    rows = conn.execute("SELECT DISTINCT app_id, project_id, user_id FROM clusters "
                        "ORDER BY app_id, project_id, user_id").fetchall()
    return [_ref(r) for r in rows]


def reflection_backlog(conn: sqlite3.Connection, *, max_clusters: int,
                       max_sources: int) -> tuple[int, int]:
    """``(clusters, Episodes)`` a Reflection run would take on: per owner the ``max_clusters``
    largest clusters eligible for a merge (never-merged with two or more members, or merged and
    joined since), each counted at most ``max_sources`` Episodes. One query for the whole root,
    so a fleet driver can size hundreds of roots before handing them out."""
    row = conn.execute(
        """SELECT COUNT(*), COALESCE(SUM(MIN(size, ?)), 0) FROM (
             SELECT c.member_count AS size, ROW_NUMBER() OVER (
                      PARTITION BY c.app_id, c.project_id, c.user_id
                      ORDER BY c.member_count DESC, c.cluster_id) AS rank
             FROM clusters c
             WHERE (c.consolidated_entry_id IS NULL AND c.member_count >= 2)
                OR (c.consolidated_entry_id IS NOT NULL AND EXISTS (
                      SELECT 1 FROM cluster_members m WHERE m.cluster_key = c.cluster_key
                        AND m.deprecated_by IS NULL
                        AND m.entry_id IS NOT c.consolidated_entry_id)))
           WHERE rank <= ?""", (max(1, max_sources), max(0, max_clusters))).fetchone()
    return int(row[0]), int(row[1])


def clusters_of(conn: sqlite3.Connection, ref: UserRef) -> list[tuple[str, str | None]]:
    """``(cluster id, consolidated narrative id or None)`` of ``ref``'s clusters."""
    rows = conn.execute(
        "SELECT cluster_id, consolidated_entry_id FROM clusters WHERE app_id=? AND "
        "project_id=? AND user_id=? ORDER BY cluster_id",
        (ref.app, ref.project, ref.user_id)).fetchall()
    return [(r[0], r[1]) for r in rows]


def live_cluster_members(conn: sqlite3.Connection, cluster_id: str) -> list[str]:
    """Live member ids of a cluster, oldest first."""
    rows = conn.execute(
        "SELECT entry_id FROM cluster_members WHERE "
        f"cluster_key={CLUSTER_KEY_OF_ID} "
        "AND deprecated_by IS NULL ORDER BY ts, entry_id", (cluster_id,)).fetchall()
    return [r[0] for r in rows]


# -- audit and runs -----------------------------------------------------------------------------


def merged_narrative_count(conn: sqlite3.Connection) -> int:
    """How many Reflection narratives (``parent_type: cluster``) the index holds, archived
    ones too: what ``reports`` weighs an empty audit against."""
    row = conn.execute("SELECT COUNT(*) FROM entries WHERE kind = 'episode' "
                       "AND parent_type = 'cluster'").fetchone()
    return int(row[0])


def reflection_reports(conn: sqlite3.Connection, *, limit: int | None = None,
                       run_id: str | None = None,
                       columns: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Rows of ``reflection_report`` as dicts: a run's oldest first, else the newest first."""
    cols = ", ".join(columns) if columns else "*"
    if run_id is not None:
        sql, params = (f"SELECT {cols} FROM reflection_report WHERE run_id=? "
                       "ORDER BY created_at, id", [run_id])
    else:
        sql, params = f"SELECT {cols} FROM reflection_report ORDER BY created_at DESC, id DESC", []
    if limit is not None:
        sql += " LIMIT ?"
        params.append(max(0, int(limit)))
    return [dict(r) for r in conn.execute(sql, params)]


def refusals_for_good(conn: sqlite3.Connection) -> dict[tuple[UserRef, str, str | None],
                                                       tuple[str, str]]:
    """``{(owner, cluster id, run id): (error, created_at)}`` of every ``reflection_report``
    row of a merge the server refused for good (its error names what was ``set aside``)."""
    rows = conn.execute(
        "SELECT app_id, project_id, owner_id, cluster_id, run_id, error, created_at FROM "
        "reflection_report WHERE status = 'failed' AND error LIKE '%; set aside: %'")
    return {(_ref(r), r[3], r[4]): (r[5], r[6]) for r in rows}


#: The migration after which the ``files`` rows still to be read again have ``mtime_ns = -1``.
_WATERMARK_REREAD = "0016_id_watermarks_from_every_log"


def id_watermark(conn: sqlite3.Connection, ref: UserRef, stem: str,
                 root: Path | None = None, max_bytes: int | None = None) -> int:
    """The highest sequence number of ``stem`` (``ep_20261012_``) the index has seen
    mentioned in any of ``ref``'s logs; 0 when none.

    With ``root``, also every mention in the logs of ``ref`` the index has not read since
    it learnt to take the watermark from every log (:func:`_unread_logs`), each read now (at
    most ``max_bytes``, as the index reads it): until the scan after migration 0016 has read
    them, the watermark holds 0015's seed alone, and an ``add`` before that scan gave a new
    entry an id that only another log (an insight's evidence, an archive key) still named.
    """
    try:
        row = conn.execute("SELECT seq FROM id_watermark WHERE app_id=? AND project_id=? "
                           "AND user_id=? AND stem=?",
                           (ref.app, ref.project, ref.user_id, stem)).fetchone()
    except sqlite3.OperationalError:
        if root is None:
            raise
        row = None  # an index from before the table (read-only: not migrated)
    seq = int(row[0]) if row is not None else 0
    if root is not None:
        for path in _unread_logs(conn, root, ref):
            seq = max(seq, _mentioned_seq(root, path, stem, max_bytes))
    return seq


def _unread_logs(conn: sqlite3.Connection, root: Path, ref: UserRef) -> list[Path]:
    """The logs of ``ref`` whose mentions may be missing from the watermark: those migration
    0016 marked to be read again (``mtime_ns = -1``) and no scan has read since, or every log
    the index knows when 0016 has not run (a read-only connection never migrates)."""
    key = (ref.app, ref.project, ref.user_id)
    try:
        migrated = conn.execute("SELECT 1 FROM schema_migrations WHERE name = ?",
                                (_WATERMARK_REREAD,)).fetchone() is not None
        rows = conn.execute(
            "SELECT path FROM files WHERE app_id=? AND project_id=? AND user_id=?"
            + (" AND mtime_ns = -1" if migrated else ""), key).fetchall()
    except sqlite3.OperationalError:
        return []
    return [root / r[0] for r in rows]


def _mentioned_seq(root: Path, path: Path, stem: str, max_bytes: int | None) -> int:
    """The highest sequence of ``stem`` ``path`` mentions, read as a scan reads it (0 when
    it cannot be: gone, not a regular file, a symlink out of the root, over ``max_bytes``,
    not UTF-8; the scan raises nothing from such a log either)."""
    from everos_reflect.fileio import NotRegularFile, open_regular, read_at_most
    from everos_reflect.markdown.parser import highest_seqs

    try:
        if not Path(os.path.realpath(path)).is_relative_to(os.path.realpath(root)):
            return 0
        with open_regular(path, within=os.path.realpath(root)) as fh:
            limit = max_bytes if max_bytes is not None else os.fstat(fh.fileno()).st_size
            data = read_at_most(fh, limit + 1)
        if len(data) > limit:
            return 0
        return highest_seqs(data.decode("utf-8")).get(stem, 0)
    except (OSError, NotRegularFile, UnicodeDecodeError):
        return 0


def root_id_watermark(root: Path, max_bytes: int | None = None) -> Callable[[UserRef, str], int]:
    """:func:`id_watermark` for a Markdown store opened without a runtime (the CLI's ``add``),
    read from ``root``'s ``system.db`` when there is one: a root never indexed, or an index
    that cannot be read, has none (0), and the file's own ids decide alone, as before. The
    logs the index has not read again since migration 0016 are read for it (see
    :func:`id_watermark`); ``max_bytes`` is ``limits.max_file_bytes``."""

    def seen(ref: UserRef, stem: str) -> int:
        path = db_path(root)
        if not path.is_file():
            return 0
        try:
            conn = connect_to_read(path)
        except sqlite3.Error:
            return 0
        try:
            return id_watermark(conn, ref, stem, root, max_bytes)
        except sqlite3.Error:  # a damaged index
            return 0
        finally:
            conn.close()

    return seen


def readonly_query(root: Path, sql: str) -> list[tuple[Any, ...]]:
    """Rows of one query a person could type into ``sqlite3`` (the demo shows the audit that
    way), on a read-only connection to ``root``'s ``system.db``."""
    conn = connect_to_read(db_path(root))
    try:
        return [tuple(r) for r in conn.execute(sql)]
    finally:
        conn.close()
