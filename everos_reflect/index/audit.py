"""The ``derivation_report`` audit table (SPEC §10): one row per derivation of any strategy.

Readable with plain ``sqlite3``::

    sqlite3 <root>/.index/sqlite/system.db "SELECT strategy, status, outputs, provider
      FROM derivation_report ORDER BY created_at DESC LIMIT 10;"
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from everos_reflect.index.db import transaction, utcnow_iso
from everos_reflect.model import Entry, UserRef, quoted_value


@dataclass
class Derivation:
    """What one derivation did: its inputs and outputs (entry ids), outcome and cost."""

    strategy: str
    ref: UserRef
    status: str
    run_id: str | None = None
    inputs: Sequence[str] = ()
    outputs: Sequence[str] = ()
    provider: str | None = None
    model: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    duration_ms: int | None = None
    error: str | None = None
    id: str = field(default_factory=lambda: f"dr_{uuid.uuid4().hex[:16]}")


def record_derivation(conn: sqlite3.Connection, d: Derivation) -> str:
    """Insert one row in its own transaction; returns its id."""
    with transaction(conn):
        insert_derivation(conn, d)
    return d.id


def settle_intent(conn: sqlite3.Connection, strategy: str, ref: UserRef, key: str,
                  row: Derivation | None) -> None:
    """Record ``row`` (if any) and forget the ``commit_intent`` noted before its Markdown
    write, in one transaction: a kill between the write and this leaves the intent, from
    which the strategy's recovery writes the row (revalidation's verdicts, provenance's
    stale marks)."""
    from everos_reflect.index import cursors

    with transaction(conn):
        if row is not None:
            insert_derivation(conn, row)
        cursors.end_intent(conn, strategy, ref, key)


def insert_derivation(conn: sqlite3.Connection, d: Derivation) -> None:
    """Insert one row inside the caller's transaction."""
    conn.execute(
        "INSERT INTO derivation_report (id, run_id, strategy, app_id, project_id, owner_id, "
        "inputs, outputs, status, provider, model, prompt_tokens, completion_tokens, "
        "duration_ms, error, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (d.id, d.run_id, d.strategy, d.ref.app, d.ref.project, d.ref.user_id,
         json.dumps(list(d.inputs)), json.dumps(list(d.outputs)), d.status, d.provider,
         d.model, int(d.prompt_tokens), int(d.completion_tokens), d.duration_ms, d.error,
         utcnow_iso()),
    )


def list_derivations(conn: sqlite3.Connection, *, strategy: str | None = None,
                     ref: UserRef | None = None, limit: int = 20) -> list[dict[str, Any]]:
    """Newest first; ``inputs``/``outputs`` decoded to lists."""
    sql, params = "SELECT * FROM derivation_report WHERE 1=1", []
    if strategy:
        sql += " AND strategy = ?"
        params.append(strategy)
    if ref is not None:
        sql += " AND app_id = ? AND project_id = ? AND owner_id = ?"
        params += [ref.app, ref.project, ref.user_id]
    sql += " ORDER BY created_at DESC, id DESC LIMIT ?"
    params.append(max(0, int(limit)))
    rows = []
    for row in conn.execute(sql, params):
        item = dict(row)
        for key in ("inputs", "outputs"):
            try:
                item[key] = json.loads(item[key] or "[]")
            except ValueError:
                item[key] = []
        rows.append(item)
    return rows


# -- reflection_report (SPEC §6) -----------------------------------------------------------------

#: Columns of one ``reflection_report`` row, in the order :func:`insert_reflection_report` takes.
REFLECTION_REPORT_COLUMNS = (
    "id", "run_id", "app_id", "project_id", "owner_id", "cluster_id", "mode", "source_count",
    "source_members", "merged_entry_id", "deprecated_fact_count", "new_fact_count",
    "fact_coverage", "provider", "model", "prompt_tokens", "completion_tokens", "duration_ms",
    "status", "error", "created_at")


#: Columns of ``reports`` and ``GET /api/v1/ome/reports``, in the order shown (SPEC §6 first,
#: then provenance and cost): one order for both.
REPORT_COLUMNS = (
    "id", "created_at", "run_id", "app_id", "project_id", "owner_id", "cluster_id", "mode",
    "status", "source_count", "source_members", "merged_entry_id", "deprecated_fact_count",
    "new_fact_count", "fact_coverage", "provider", "model", "prompt_tokens",
    "completion_tokens", "duration_ms", "error",
)


def id_list(text: object, column: str) -> tuple[list[str] | None, str | None]:
    """``(ids, None)`` for a stored JSON list of entry ids, else ``(None, why)``: a row edited
    by hand or cut short is said to be damaged, not shown as ``[]`` (nothing merged) by one
    reader and as its raw text by another."""
    if text is None:
        return None, f"{column} is not a JSON list of entry ids: it is empty"
    try:
        value = json.loads(text) if isinstance(text, str | bytes) else text
    except ValueError:
        value = text
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None, f"{column} is not a JSON list of entry ids: {quoted_value(text)}"
    return value, None


def reflection_report_rows(conn: sqlite3.Connection, limit: int) -> list[dict[str, Any]]:
    """The newest ``reflection_report`` rows first, in :data:`REPORT_COLUMNS`, for every
    listing (``reports --json``, the API): ``source_members`` decoded, and ``damaged`` saying
    why it could not be (``None`` when it could; ``source_members`` is then ``None``)."""
    rows = conn.execute(
        f"SELECT {', '.join(REPORT_COLUMNS)} FROM reflection_report "
        "ORDER BY created_at DESC, id DESC LIMIT ?", (max(0, int(limit)),))
    out = []
    for row in rows:
        item = dict(row)
        item["source_members"], item["damaged"] = id_list(item["source_members"],
                                                          "source_members")
        out.append(item)
    return out


def insert_reflection_report(conn: sqlite3.Connection, values: Sequence[Any]) -> None:
    """One ``reflection_report`` row (values in :data:`REFLECTION_REPORT_COLUMNS` order);
    inside the caller's transaction."""
    conn.execute(
        f"INSERT INTO reflection_report ({', '.join(REFLECTION_REPORT_COLUMNS)}) "
        f"VALUES ({','.join('?' * len(REFLECTION_REPORT_COLUMNS))})", tuple(values))


def merge_row(conn: sqlite3.Connection, ref: UserRef,
              merged_id: str) -> tuple[str | None, str] | None:
    """``(cluster_id, status)`` of the last audit row of the merge that wrote ``merged_id``
    for ``ref``; None when the audit has no such merge."""
    row = conn.execute(
        "SELECT cluster_id, status FROM reflection_report WHERE app_id=? AND project_id=? AND "
        "owner_id=? AND merged_entry_id=? ORDER BY created_at DESC LIMIT 1",
        (ref.app, ref.project, ref.user_id, merged_id)).fetchone()
    return (row[0] or None, str(row[1])) if row else None


def merge_sources(conn: sqlite3.Connection, ref: UserRef, merged_id: str) -> list[str]:
    """The ``source_members`` of every audit row of the merge that wrote ``merged_id`` for
    ``ref`` (an unreadable list counts as none), in the order first written."""
    rows = conn.execute(
        "SELECT source_members FROM reflection_report WHERE app_id=? AND project_id=? AND "
        "owner_id=? AND merged_entry_id=? ORDER BY created_at",
        (ref.app, ref.project, ref.user_id, merged_id)).fetchall()
    found: dict[str, None] = {}
    for (members,) in rows:
        try:
            listed = json.loads(members or "[]")
        except ValueError:
            continue
        if isinstance(listed, list):
            found.update(dict.fromkeys(m for m in listed if isinstance(m, str)))
    return list(found)


def mark_reflection_undone(conn: sqlite3.Connection, ref: UserRef,
                           merged_id: str) -> tuple[list[str], str | None]:
    """Set the audit rows of the merge that wrote ``merged_id`` to ``undone``; returns their
    ids and the merge's (last) mode. Inside the caller's transaction."""
    rows = conn.execute(
        "SELECT id, mode FROM reflection_report WHERE app_id=? AND project_id=? AND "
        "owner_id=? AND merged_entry_id=? AND status != 'undone' ORDER BY created_at",
        (ref.app, ref.project, ref.user_id, merged_id)).fetchall()
    conn.executemany("UPDATE reflection_report SET status='undone' WHERE id=?",
                     [(r[0],) for r in rows])
    return [r[0] for r in rows], (rows[-1][1] if rows else None)


def reflection_statuses(conn: sqlite3.Connection, ref: UserRef,
                        merged_id: str) -> dict[str, str]:
    """The status of each audit row of the merge that wrote ``merged_id`` that is not
    ``undone``: what :func:`mark_reflection_undone` is about to change, kept so an undo
    taken back (:func:`mark_reflection_redone`) sets each row back as it was."""
    return dict(conn.execute(
        "SELECT id, status FROM reflection_report WHERE app_id=? AND project_id=? AND "
        "owner_id=? AND merged_entry_id=? AND status != 'undone'",
        (ref.app, ref.project, ref.user_id, merged_id)).fetchall())


def mark_reflection_redone(conn: sqlite3.Connection, statuses: Mapping[str, str]) -> None:
    """Set back the audit rows an undo just set ``undone`` to the status each had before
    (``statuses``, :func:`reflection_statuses`), the undo being taken back (a ``--cascade``
    refused at an earlier merge). Inside the caller's transaction."""
    conn.executemany("UPDATE reflection_report SET status=? WHERE id=? AND status='undone'",
                     [(status, i) for i, status in statuses.items()])


def follow_moved_merges(conn: sqlite3.Connection, held: Iterable[tuple[UserRef, Entry]],
                        gone: Iterable[UserRef], folder_gone: Callable[[UserRef], bool]
                        ) -> list[str]:
    """Re-point to the user whose logs hold a merge's narrative now the ``reflection_report``
    rows still naming a user whose folder is gone (renamed or moved by hand); returns their
    ids. Inside the caller's transaction, after the index rows are written.

    The audit is kept in ``system.db`` alone and never rebuilt from Markdown, so its rows
    kept the old name while the index followed the folder: ``reports`` named a user nobody
    has, and an ``undo`` as the new name left the row ``ok``. A row's user is the user whose
    logs hold the merge, as the index reads them; it moves with the folder as they do.
    ``held``: narratives (Reflection merges) just indexed, each with the user holding it;
    ``gone``: users whose entries just left the index (a folder removed after a copy).
    A row moves only when its user's folder is gone and the holder's narrative names every
    source the row merged (ids are per user: another user's merge may have the same id);
    never to one of two holders (a copied folder): that is left as it was, not guessed."""
    moves: dict[str, UserRef] = {}
    went: dict[UserRef, set[UserRef]] = {}  # old owner -> where its merges went
    for holder, narrative in held:
        if narrative.parent_type != "cluster":
            continue
        for row_id, owner, members in _rows_of(conn, "merged_entry_id = ?", (narrative.id,)):
            if owner != holder and row_id not in moves and set(members) <= set(
                    narrative.sources) and folder_gone(owner):
                moves[row_id] = holder
                went.setdefault(owner, set()).add(holder)
    for owner in dict.fromkeys(gone):
        if not folder_gone(owner):
            continue
        for row_id, merged, members in _rows_of(
                conn, "app_id=? AND project_id=? AND owner_id=?",
                (owner.app, owner.project, owner.user_id), "merged_entry_id"):
            holders = [ref for ref, sources in _holders(conn, merged, owner)
                       if set(members) <= set(sources) and not folder_gone(ref)]
            if len(holders) == 1 and row_id not in moves:
                moves[row_id] = holders[0]
                went.setdefault(owner, set()).add(holders[0])
    _move(conn, moves)
    for owner, where in went.items():  # its last merge gone after the others: the rows of
        # its attempts that merged nothing (failed, rejected, stale) follow, to one user only
        if len(where) == 1 and conn.execute(
                "SELECT 1 FROM reflection_report WHERE app_id=? AND project_id=? AND "
                "owner_id=? AND merged_entry_id IS NOT NULL LIMIT 1",
                (owner.app, owner.project, owner.user_id)).fetchone() is None:
            rest = {row[0]: next(iter(where)) for row in conn.execute(
                "SELECT id FROM reflection_report WHERE app_id=? AND project_id=? AND "
                "owner_id=?", (owner.app, owner.project, owner.user_id))}
            _move(conn, rest)
            moves.update(rest)
    return list(moves)


def follow_moved_derivations(conn: sqlite3.Connection, held: Iterable[tuple[UserRef, Entry]],
                             gone: Iterable[UserRef], folder_gone: Callable[[UserRef], bool]
                             ) -> list[str]:
    """Re-point to the user whose logs hold what a derivation wrote the ``derivation_report``
    rows still naming a user whose folder is gone (renamed or moved by hand); returns their
    ids. Inside the caller's transaction, after the index rows are written.

    As :func:`follow_moved_merges` does for ``reflection_report``: a row's user is the user
    whose logs hold the records it derived (its ``outputs``), as the index and ``explain``
    read them; after ``mv users/u_andrew users/u_bob`` the rows of Andrew's insights and
    lessons named a user nobody has. ``held``: entries just indexed, each with its user (only
    derived records are looked at); ``gone``: users whose entries just left the index. A row
    moves only when its user's folder is gone and exactly one other user, whose folder is
    there, holds every record it wrote (ids are per user); never to one of two holders (a
    copied folder). The rows that wrote nothing (failed, skipped) follow once every row of
    that user that wrote something went to one user."""
    just = {e.id for ref, e in held if e.kind.info.derived}
    gone = set(gone)
    if not just and not gone:
        return []
    owners = [ref for ref in _derivation_owners(conn) if folder_gone(ref)]
    moves: dict[str, UserRef] = {}
    went: dict[UserRef, set[UserRef]] = {}
    for owner in owners:
        rows = _derivations_of(conn, owner)
        if owner not in gone:  # only rows naming a record just indexed elsewhere
            rows = [(i, outputs) for i, outputs in rows if just.intersection(outputs)]
        if not rows:
            continue
        holding = _holding(conn, {o for _, outputs in rows for o in outputs})
        for row_id, outputs in rows:
            holders = set.intersection(*(holding.get(o, set()) for o in outputs)) - {owner}
            holders = {ref for ref in holders if not folder_gone(ref)}
            if len(holders) == 1:
                moves[row_id] = holders.pop()
                went.setdefault(owner, set()).add(moves[row_id])
    _move(conn, moves, "derivation_report")
    for owner, where in went.items():  # the rows that derived nothing follow, to one user
        if len(where) == 1 and not _derivations_of(conn, owner):
            rest = {row[0]: next(iter(where)) for row in conn.execute(
                "SELECT id FROM derivation_report WHERE app_id=? AND project_id=? AND "
                "owner_id=?", (owner.app, owner.project, owner.user_id))}
            _move(conn, rest, "derivation_report")
            moves.update(rest)
    return list(moves)


def _derivation_owners(conn: sqlite3.Connection) -> list[UserRef]:
    """The users ``derivation_report`` rows name (a name edited by hand into no valid
    name is left out)."""
    out = []
    for app, project, owner in conn.execute(
            "SELECT DISTINCT app_id, project_id, owner_id FROM derivation_report"):
        try:
            out.append(UserRef(app, project, owner))
        except ValueError:  # InvalidId
            continue
    return out


def _derivations_of(conn: sqlite3.Connection, owner: UserRef) -> list[tuple[str, list[str]]]:
    """``(id, outputs)`` of ``owner``'s derivation rows that wrote something (a list that no
    longer reads, edited by hand, counts as nothing written)."""
    out = []
    for row_id, outputs in conn.execute(
            "SELECT id, outputs FROM derivation_report WHERE app_id=? AND project_id=? AND "
            "owner_id=? AND outputs NOT IN ('', '[]')",
            (owner.app, owner.project, owner.user_id)):
        listed, _ = id_list(outputs, "outputs")
        if listed:
            out.append((row_id, listed))
    return out


def _holding(conn: sqlite3.Connection, ids: Iterable[str]) -> dict[str, set[UserRef]]:
    """Each of ``ids`` -> the users whose index holds an entry of that id."""
    out: dict[str, set[UserRef]] = {}
    for app, project, user, eid in conn.execute(
            "SELECT app_id, project_id, user_id, id FROM entries WHERE id IN "
            "(SELECT value FROM json_each(?))", (json.dumps(sorted(ids)),)):
        out.setdefault(eid, set()).add(UserRef(app, project, user))
    return out


def move_merge(conn: sqlite3.Connection, merged_id: str, old: UserRef, new: UserRef) -> None:
    """Give ``new`` the rows of ``old``'s merge that wrote ``merged_id``: a caller that
    knows the merge moved (an interrupted undo finished in a renamed folder, whose narrative
    was deleted by hand, so no index row can tell) says so. Inside the caller's
    transaction."""
    rows = conn.execute(
        "SELECT id FROM reflection_report WHERE app_id=? AND project_id=? AND owner_id=? AND "
        "merged_entry_id=?", (old.app, old.project, old.user_id, merged_id)).fetchall()
    _move(conn, {row[0]: new for row in rows})


def _move(conn: sqlite3.Connection, moves: Mapping[str, UserRef],
          table: str = "reflection_report") -> None:
    conn.executemany(
        f"UPDATE {table} SET app_id=?, project_id=?, owner_id=? WHERE id=?",
        [(ref.app, ref.project, ref.user_id, row_id) for row_id, ref in moves.items()])


def _rows_of(conn: sqlite3.Connection, where: str, params: Sequence[Any],
             column: str = "owner") -> list[tuple[str, Any, list[str]]]:
    """``(id, owner or merged_entry_id, source_members)`` of the merge rows matching
    ``where``; a row whose owner or member list no longer reads (edited by hand) is left
    alone."""
    out = []
    for row_id, app, project, owner, merged, members in conn.execute(
            "SELECT id, app_id, project_id, owner_id, merged_entry_id, source_members FROM "
            f"reflection_report WHERE merged_entry_id IS NOT NULL AND {where}", tuple(params)):
        listed, _ = id_list(members, "source_members")
        try:
            ref = UserRef(app, project, owner)
        except ValueError:  # InvalidId: a name edited by hand
            continue
        if listed is not None:
            out.append((row_id, ref if column == "owner" else merged, listed))
    return out


def _holders(conn: sqlite3.Connection, merged_id: str,
             but: UserRef) -> list[tuple[UserRef, list[str]]]:
    """The users other than ``but`` whose indexed narrative ``merged_id`` is, with its
    ``sources``."""
    out = []
    for app, project, user, sources in conn.execute(
            "SELECT app_id, project_id, user_id, sources FROM entries WHERE id=? AND "
            "parent_type='cluster'", (merged_id,)):
        ref = UserRef(app, project, user)
        listed, _ = id_list(sources, "sources")
        if ref != but and listed is not None:
            out.append((ref, listed))
    return out
