"""Merge consistency checks shared by ``lint`` (over the Markdown) and ``status`` (over the index).

A merged narrative and the episodes it replaced must never both be live: that shows the same
facts twice and means a merge was interrupted and never recovered (or a hand edit undid half of
one). Pure functions over ids; the callers read the files or the index.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from everos_reflect.markdown.parser import UNDONE


@dataclass(frozen=True)
class LiveBeside:
    """A live narrative whose listed sources include live episodes."""

    narrative: str
    live_sources: tuple[str, ...]

    def message(self) -> str:
        return (f"merged narrative {self.narrative} is live beside its live source(s) "
                f"{', '.join(self.live_sources)}: an interrupted merge not yet recovered (any "
                "command that writes, `serve` or the next run settles it) or a hand edit")


def live_beside_sources(narratives: Mapping[str, Iterable[str]],
                        live: set[str]) -> list[LiveBeside]:
    """``narratives``: live narrative id → its ``sources``; ``live``: every live entry id."""
    found = []
    for narrative, sources in narratives.items():
        beside = tuple(s for s in sources if s in live and s != narrative)
        if beside:
            found.append(LiveBeside(narrative, beside))
    return found


def index_report(conn: sqlite3.Connection) -> dict[str, object]:
    """For ``status``: interrupted merges awaiting recovery, live narratives beside live
    sources, and entries archived toward an id no log of their user holds, from ``system.db``
    (per user: ids are unique per user only)."""
    try:
        pending = conn.execute("SELECT COUNT(*) FROM merge_journal").fetchone()[0]
    except sqlite3.Error:
        pending = 0
    rows = conn.execute(
        "SELECT app_id, project_id, user_id, id, sources FROM entries "
        "WHERE kind = 'episode' AND parent_type = 'cluster' AND deprecated_by IS NULL "
        "AND sources != '[]'").fetchall()
    beside = []
    for row in rows:
        sources = json.loads(row["sources"] or "[]")
        if not sources:
            continue
        marks = ",".join("?" * len(sources))
        live = {r[0] for r in conn.execute(
            f"SELECT id FROM entries WHERE app_id=? AND project_id=? AND user_id=? AND "
            f"deprecated_by IS NULL AND id IN ({marks})",
            (row["app_id"], row["project_id"], row["user_id"], *sources))}
        for item in live_beside_sources({row["id"]: sources}, live):
            beside.append({"app_id": row["app_id"], "project_id": row["project_id"],
                           "user_id": row["user_id"], "narrative": item.narrative,
                           "live_sources": list(item.live_sources)})
    from everos_reflect.strategies.holdback import held_back

    held = [h.to_json() for h in held_back(conn)]
    return {"interrupted": pending, "live_beside_sources": beside, "held_back": held,
            "archived_toward_missing": archived_toward_missing(conn)}


def archived_toward_missing(conn: sqlite3.Connection) -> list[dict[str, str]]:
    """Entries whose ``deprecated_by`` names an entry their user does not have (a narrative
    deleted by hand, a typo): hidden from search with nothing replacing them. ``undone`` and
    self-links (withdrawn by an abandoned merge) replace nothing on purpose."""
    rows = conn.execute(
        "SELECT e.app_id, e.project_id, e.user_id, e.id, e.deprecated_by FROM entries e "
        "WHERE e.deprecated_by IS NOT NULL AND e.deprecated_by NOT IN (?, e.id) "
        "AND NOT EXISTS (SELECT 1 FROM entries n WHERE n.app_id = e.app_id AND "
        "n.project_id = e.project_id AND n.user_id = e.user_id AND n.id = e.deprecated_by) "
        "ORDER BY e.app_id, e.project_id, e.user_id, e.id", (UNDONE,)).fetchall()
    return [{"app_id": r[0], "project_id": r[1], "user_id": r[2], "entry": r[3],
             "archived_toward": r[4]} for r in rows]


__all__ = ["LiveBeside", "archived_toward_missing", "index_report", "live_beside_sources"]
