"""Undo sticks: the sources of an undone merge are not merged together again on their own.

An ``undo`` says "these episodes should not have been merged". The next run would otherwise
find the same cluster eligible and merge it again. So a cluster whose would-be sources are all
sources of undone merges is *held back*: it waits until a new member joins (then merging is a
new decision) or until the user sets ``remerge_undone = true`` for ``reflect_episodes``.

Derived from the Markdown, like everything else: an undone narrative is archived with
``deprecated_entries: {<narrative>: undone}`` and keeps its ``sources`` metadata, and the
index copies both, so a ``reindex`` keeps the hold. Read from ``system.db`` through
:mod:`everos_reflect.index.reads`: ``status`` and ``clusters`` use a read-only connection.

A new member releases the hold only if the merge can take it. A member whose log cannot be
read now (not UTF-8, over ``limits.max_file_bytes``, broken frontmatter, a broken entry block)
is no member: the run's index scan drops its rows, as a ``reindex`` has none, and what is left
is the undone sources, held back still. Given the store, :func:`held_back` reads the logs of
the members of clusters holding undone sources (never every log) and counts the members the
run counts: those that read live, none deleted, archived or unreadable since indexing.

The reports read the settings that decide a hold as the run reads them (:class:`HoldRules`,
from the same settings a run is given, :func:`reflect_settings`): with ``remerge_undone =
true`` the run holds nothing back.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from everos_reflect.index import reads
from everos_reflect.markdown.parser import UNDONE
from everos_reflect.model import UserRef

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from everos_reflect.engine.engine import Engine
    from everos_reflect.markdown.store import MarkdownStore
    from everos_reflect.model import DailyLog
    from everos_reflect.runtime import Runtime


@dataclass(frozen=True)
class HoldRules:
    """The settings of ``reflect_episodes`` that decide whether a cluster is held back. The
    run and the reports (``status``, ``clusters``, the API) both take them from here, so a
    report never claims a hold the run does not apply."""

    #: merge the sources of an undone merge again: nothing is held back after an undo
    remerge_undone: bool = False
    #: sources per merge: the run holds back no merge that leaves sources for later (one whose
    #: member in the index was not there to read, beside more undone sources than this)
    max_sources: int = 50

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> HoldRules:
        """From a strategy's validated settings (a run's ``RunContext.settings``)."""
        return cls(remerge_undone=bool(settings.get("remerge_undone", False)),
                   max_sources=int(settings.get("max_sources_per_merge", 50)))


def reflect_settings(runtime: Runtime, engine: Engine | None = None) -> dict[str, Any]:
    """The settings a ``reflect_episodes`` run would be given now: ``engine``'s (the daemon's,
    which keeps its last good ``ome.toml``), else the root's ``ome.toml`` read by a new engine
    the way a run's engine reads it. A broken ``ome.toml`` with no good one before reads as the
    defaults, so a report never fails on it."""
    from everos_reflect.engine.engine import Engine
    from everos_reflect.engine.registry import get_strategy
    from everos_reflect.errors import EverosError
    from everos_reflect.strategies.reflect import NAME

    try:
        return dict((engine or Engine(runtime, recover=False)).settings_for(NAME))
    except EverosError:  # ConfigError among them
        return {k: spec.default for k, spec in get_strategy(NAME).all_settings().items()}


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
    """One cluster held back after an undo, for ``status`` and ``clusters``."""

    ref: UserRef
    cluster_id: str
    #: the undone sources it holds, each readable now
    members: tuple[str, ...]

    @property
    def reason(self) -> str:
        """``undone``: nothing a merge could take joined the undone sources."""
        return "undone"

    def to_json(self) -> dict[str, object]:
        return {"app_id": self.ref.app, "project_id": self.ref.project,
                "user_id": self.ref.user_id, "cluster_id": self.cluster_id,
                "members": list(self.members), "reason": self.reason}


@dataclass(frozen=True)
class MemberRead:
    """What a member's log says of it now, as a run sees it."""

    #: ``live``: a merge takes it. ``gone``: its log is gone or cannot be read (not UTF-8,
    #: too large, broken frontmatter), or the entry is no longer in it, cannot be read there
    #: or is archived there: the run's scan drops it, as a ``reindex`` has none of it.
    state: str
    file: str
    #: why it is not ``live`` ("" when it is)
    why: str = ""


def read_members(store: MarkdownStore, ref: UserRef,
                 ids: Iterable[str]) -> dict[str, MemberRead]:
    """Each of ``ids`` as its log reads now (:class:`MemberRead`). Only their logs are read,
    each once."""
    out: dict[str, MemberRead] = {}
    logs: dict[Path, DailyLog | None] = {}
    for eid in sorted(set(ids)):
        path = store.path_for_id(ref, eid)
        if path not in logs:
            try:
                logs[path] = store.read(path)
            except OSError:  # gone, or no regular file: the next scan drops its rows
                logs[path] = None
        log = logs[path]
        if log is None:
            out[eid] = MemberRead("gone", store.rel(path), "not found")
            continue
        entry = next((e for e in log.entries if e.id == eid), None)
        if entry is not None:
            out[eid] = (MemberRead("live", log.path) if entry.deprecated_by is None
                        else MemberRead("gone", log.path, "archived in its log"))
            continue
        fatal = next((d for d in log.diagnostics if d.severity == "fatal"), None)
        if fatal is not None or log.unread:
            why = fatal.message if fatal is not None else "its log cannot be read (see lint)"
        elif eid in log.unreadable or log.open_at_end is not None:
            why = "its entry block cannot be read (see lint)"
        else:
            why = "no longer in its log"
        out[eid] = MemberRead("gone", log.path, why)
    return out


def held_back(conn: sqlite3.Connection, ref: UserRef | None = None,
              store: MarkdownStore | None = None, rules: HoldRules | None = None) -> list[Held]:
    """Every cluster (of ``ref``, else of the root) that Reflection would merge but holds back
    because all its would-be sources come from undone merges. ``rules``: the run's settings
    (:class:`HoldRules`; None: the defaults) -- with ``remerge_undone`` nothing is held.

    With ``store``, the members are counted as the run counts them (:func:`read_members`,
    only the logs of clusters holding undone sources): one deleted, archived or unreadable
    since indexing is none (the run's scan drops it first, as a ``reindex`` has none of it),
    so a new member whose log cannot be read releases nothing. Without it, the index alone
    decides."""
    rules = rules or HoldRules()
    if rules.remerge_undone:
        return []  # the run merges them again
    out = []
    for owner in reads.owners_with_narratives_archived_as(conn, UNDONE):
        if ref is not None and owner != ref:
            continue
        undone = undone_sources(conn, owner)
        for cluster_id, narrative in reads.clusters_of(conn, owner):
            members = candidates(conn, cluster_id, narrative)
            needed = 1 if narrative else 2
            if len(members) < needed or not undone & set(members):
                continue  # nothing to merge, or no undone source among them: nothing held
            read = read_members(store, owner, members) if store is not None else {}
            # the cluster as the run's scan leaves it in the index
            members = [m for m in members if m not in read or read[m].state == "live"]
            if len(members) >= needed and is_held(members, undone):
                out.append(Held(owner, cluster_id, tuple(members)))
    return out


__all__ = ["Held", "HoldRules", "MemberRead", "candidates", "held_back", "is_held",
           "read_members", "reflect_settings", "undone_sources"]
