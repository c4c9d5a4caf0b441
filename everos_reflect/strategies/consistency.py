"""Merge consistency checks shared by ``lint`` (over the Markdown) and ``status`` (over the index).

A merged narrative and the episodes it replaced must never both be live: that shows the same
facts twice and means a merge was interrupted and never recovered (or a hand edit undid half of
one). Pure functions over ids; the callers read the files or the index.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from everos_reflect.index import reads
from everos_reflect.markdown.parser import UNDONE
from everos_reflect.strategies.journal import UNDOING

if TYPE_CHECKING:
    from everos_reflect.markdown.store import MarkdownStore
    from everos_reflect.strategies.holdback import HoldRules


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


def index_report(conn: sqlite3.Connection, store: MarkdownStore | None = None,
                 rules: HoldRules | None = None) -> dict[str, object]:
    """For ``status``: interrupted merges and undos awaiting recovery, live narratives beside live
    sources, held-back clusters and entries archived toward an id no log of their user holds,
    from ``system.db`` (per user: ids are unique per user only). With ``store``, the logs of
    the members that would release a hold are read, as the run reads them (:func:`held_back`);
    ``rules``: the run's settings that decide a hold (None: the defaults)."""
    steps = reads.journal_steps(conn)
    undos = steps.pop(UNDOING, 0)
    beside = []
    for ref, narrative, sources in reads.live_narrative_sources(conn):
        if not sources:
            continue
        live = reads.live_entry_ids(conn, ref, sources)
        for item in live_beside_sources({narrative: sources}, live):
            beside.append({"app_id": ref.app, "project_id": ref.project,
                           "user_id": ref.user_id, "narrative": item.narrative,
                           "live_sources": list(item.live_sources)})
    from everos_reflect.strategies.holdback import held_back

    held = [h.to_json() for h in held_back(conn, store=store, rules=rules)]
    return {"interrupted": sum(steps.values()), "interrupted_undos": undos,
            "live_beside_sources": beside, "held_back": held,
            "archived_toward_missing": archived_toward_missing(conn)}


def archived_toward_missing(conn: sqlite3.Connection) -> list[dict[str, str]]:
    """Entries whose ``deprecated_by`` names an entry their user does not have (a narrative
    deleted by hand, a typo): hidden from search with nothing replacing them. ``undone`` and
    self-links (withdrawn by an abandoned merge) replace nothing on purpose."""
    return [{"app_id": ref.app, "project_id": ref.project, "user_id": ref.user_id,
             "entry": entry, "archived_toward": toward}
            for ref, entry, toward in reads.archived_toward_missing(conn, exempt=UNDONE)]


__all__ = ["LiveBeside", "archived_toward_missing", "index_report", "live_beside_sources"]
