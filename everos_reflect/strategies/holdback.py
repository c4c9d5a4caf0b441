"""Undo sticks: the sources of an undone merge are not merged together again on their own.

An ``undo`` says "these episodes should not have been merged". The next run would otherwise
find the same cluster eligible and merge it again. So a cluster whose would-be sources are all
sources of undone merges is *held back*: it waits until a new member joins (then merging is a
new decision) or until the user sets ``remerge_undone = true`` for ``reflect_episodes``.

Derived from the Markdown, like everything else: an undone narrative is archived with
``deprecated_entries: {<narrative>: undone}`` and keeps its ``sources`` metadata, and the
index copies both, so a ``reindex`` keeps the hold. Read from ``system.db`` through
:mod:`everos_reflect.index.reads`: ``status`` and ``clusters`` use a read-only connection.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass

from everos_reflect.index import reads
from everos_reflect.markdown.parser import UNDONE
from everos_reflect.model import UserRef


def undone_sources(conn: sqlite3.Connection, ref: UserRef) -> set[str]:
    """Every episode that was a source of one of ``ref``'s undone merges."""
    out: set[str] = set()
    for sources in reads.sources_of_narratives_archived_as(conn, ref, UNDONE):
        out.update(sources)
    return out


def is_held(candidates: Iterable[str], undone: set[str]) -> bool:
    """Held back: there is something to merge, and all of it was undone before."""
    wanted = set(candidates)
    return bool(wanted) and wanted <= undone


def candidates(conn: sqlite3.Connection, cluster_id: str,
               consolidated_entry_id: str | None) -> list[str]:
    """The live members a merge of the cluster would take (its narrative excluded)."""
    return [m for m in reads.live_cluster_members(conn, cluster_id)
            if m != consolidated_entry_id]


@dataclass(frozen=True)
class Held:
    """One held-back cluster, for ``status`` and ``clusters``."""

    ref: UserRef
    cluster_id: str
    members: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {"app_id": self.ref.app, "project_id": self.ref.project,
                "user_id": self.ref.user_id, "cluster_id": self.cluster_id,
                "members": list(self.members)}


def held_back(conn: sqlite3.Connection, ref: UserRef | None = None) -> list[Held]:
    """Every cluster (of ``ref``, else of the root) that Reflection would merge but holds back
    because all its would-be sources come from undone merges."""
    out = []
    for owner in reads.owners_with_narratives_archived_as(conn, UNDONE):
        if ref is not None and owner != ref:
            continue
        undone = undone_sources(conn, owner)
        for cluster_id, narrative in reads.clusters_of(conn, owner):
            members = candidates(conn, cluster_id, narrative)
            needed = 1 if narrative else 2
            if len(members) >= needed and is_held(members, undone):
                out.append(Held(owner, cluster_id, tuple(members)))
    return out


__all__ = ["Held", "candidates", "held_back", "is_held", "undone_sources"]
