"""Merge consistency checks shared by ``lint`` (over the Markdown) and ``status`` (over the index).

A merged narrative and the episodes it replaced must never both be live: that shows the same
facts twice and means a merge was interrupted and never recovered (or a hand edit undid half of
one). Pure functions over ids; the callers read the files or the index.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from everos_reflect.index import reads
from everos_reflect.markdown.parser import UNDONE
from everos_reflect.model import UserRef
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
        sources = "source" if len(self.live_sources) == 1 else "sources"
        return (f"merged narrative {self.narrative} is live beside its live {sources} "
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
            for ref, entry, toward, _path in reads.archived_toward_missing(conn, exempt=UNDONE)]


# -- problems across a user's logs: the words ``lint`` and ``status`` share ---------------------


def unknown_target_message(old: str, new: str) -> str:
    return f"deprecated_entries: {old} points at unknown id {new}"


def orphan_fact_message(fact: str, parent: str | None) -> str:
    return f"atomic fact {fact}: parent episode {parent} not found"


def archive_cycle(start: str, toward: Mapping[str, str]) -> list[str]:
    """The ids from ``start`` back to ``start`` along ``old -> new`` archive marks, or ``[]``
    when the chain ends (at a live entry, ``undone`` or an unknown id)."""
    chain = [start]
    current = toward.get(start)
    while current is not None and current not in chain:
        chain.append(current)
        current = toward.get(current)
    return [*chain, start] if current == start else []


def withdrawn(old: str, cycle: list[str], narratives: set[str]) -> bool:
    """Whether ``cycle`` (:func:`archive_cycle` from ``old``) is how a merge withdraws its
    narrative: the narrative archived toward itself, "replaced by nothing". ``lint`` said
    "archived toward itself" of every merge abandoned that way, and exited 1 for good."""
    return len(cycle) == 2 and old in narratives


def cycle_message(old: str, cycle: list[str]) -> str:
    """``cycle``: :func:`archive_cycle` from ``old`` (``[old, old]``: a self-link)."""
    if len(cycle) == 2:
        return f"deprecated_entries: {old} is archived toward itself"
    return (f"deprecated_entries: {old} is archived in a cycle ({' -> '.join(cycle)}): "
            "none of it is live")


#: At most this many citation cycles are named per user: a hand edit makes one or two; a
#: mangled file could make thousands, and each costs a pass over the user's citations.
MAX_CITATION_CYCLES = 20


def citation_cycles(cites: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Cycles in the records' citations (``cites``: record id → the ids its ``evidence`` and
    ``between`` name), each as ids from its smallest back to it (``[x, x]``: a record citing
    itself). SPEC §10 gives a record depth 1 + the deepest record it cites, so a cycle has no
    depth and none of it rests on Episodes alone; only a hand edit makes one. One cycle is
    found per pass (:class:`graphlib.TopologicalSorter`) and broken at one link, at most
    :data:`MAX_CITATION_CYCLES` times."""
    from graphlib import CycleError, TopologicalSorter

    graph = {record: set(cited) for record, cited in cites.items()}
    found: list[list[str]] = []
    while len(found) < MAX_CITATION_CYCLES:
        try:
            TopologicalSorter(graph).prepare()
        except CycleError as exc:
            # graphlib names a cycle [a, b, ..., a] where each id is cited by the next
            named = exc.args[1]
            graph[named[1]].discard(named[0])
            ring = list(reversed(named[:-1]))  # now each id cites the next
            start = ring.index(min(ring))
            ring = ring[start:] + ring[:start]
            found.append([*ring, ring[0]])
        else:
            break
    return found


def citation_cycle_message(cycle: list[str]) -> str:
    """``cycle``: one of :func:`citation_cycles`."""
    if len(cycle) == 2:
        return (f"{cycle[0]} cites itself: a record cannot rest on itself (remove "
                "its own id from its evidence)")
    shown = cycle if len(cycle) <= 8 else [*cycle[:6], f"… {len(cycle) - 8} more", *cycle[-2:]]
    return (f"{cycle[0]} is in a citation cycle ({' -> '.join(shown)}): none of "
            "these records rests on Episodes alone (remove one of the citations)")


@dataclass(frozen=True)
class CrossFileProblem:
    """A problem ``lint`` finds across a user's logs, as the index shows it: in log ``path``,
    at ``entry``'s mark in the frontmatter (``at_mark``) or at the entry itself."""

    path: str
    entry: str
    at_mark: bool
    message: str


def index_cross_file_problems(conn: sqlite3.Connection) -> list[CrossFileProblem]:
    """From ``system.db``, the problems :func:`everos_reflect.lint.scan_store` finds by
    reading every log: archive marks toward an id the user has no entry for, archive cycles
    of two or more entries or of one that is no Reflection narrative (:func:`withdrawn`),
    and atomic facts whose parent Episode is gone. A mark naming no entry of its own file is
    one file's problem, recorded when the file is indexed
    (:func:`~everos_reflect.markdown.marks.foreign_marks`)."""
    found = [CrossFileProblem(path, entry, True, unknown_target_message(entry, toward))
             for _ref, entry, toward, path in reads.archived_toward_missing(conn, exempt=UNDONE)]
    toward_of: dict[UserRef, dict[str, str]] = defaultdict(dict)
    archived = reads.archived_targets_archived(conn, exempt=UNDONE)
    for ref, entry, toward, _path in archived:
        toward_of[ref][entry] = toward
    for ref, entry, _toward, path in archived:
        cycle = archive_cycle(entry, toward_of[ref])
        if len(cycle) > 2:
            found.append(CrossFileProblem(path, entry, True, cycle_message(entry, cycle)))
    found += [CrossFileProblem(path, entry, True, cycle_message(entry, [entry, entry]))
              for _ref, entry, path in reads.archived_toward_themselves(conn)]
    found += [CrossFileProblem(path, fact, False, orphan_fact_message(fact, parent))
              for _ref, fact, parent, path in reads.facts_missing_their_episode(conn)]
    # in file order, as lint gives them; the queries leave the order to SQLite (an ORDER BY
    # walked the table through its key index: a third slower)
    return sorted(found, key=lambda p: (p.path, not p.at_mark, p.entry))


__all__ = ["MAX_CITATION_CYCLES", "CrossFileProblem", "LiveBeside", "archive_cycle",
           "archived_toward_missing", "citation_cycle_message", "citation_cycles",
           "cycle_message", "index_cross_file_problems", "index_report",
           "live_beside_sources", "orphan_fact_message", "unknown_target_message", "withdrawn"]
