"""Keep the derived indexes (SQLite ``entries``/``files`` + LanceDB) equal to the Markdown.

Two layers. The planners are pure: :func:`plan_scan` compares stored file stats with the disk,
:func:`plan_file_sync` compares the entries stored for one file with a fresh parse and says what
to upsert, embed, delete and re-deprecate. :class:`Indexer` does the I/O around them: it reads
files, embeds only entries whose text (or embedding model) changed — batched across files — and
writes LanceDB first, then SQLite, so an interrupted sync is simply redone by the next scan.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from everos_reflect.errors import InvalidId
from everos_reflect.model import DailyLog, Diagnostic, Entry, EntryId

if TYPE_CHECKING:

    pass

log = logging.getLogger(__name__)

Progress = Callable[[int], None]


# --------------------------------------------------------------------------- pure planning


@dataclass(frozen=True)
class StoredEntry:
    """What the index remembers about one entry: enough to decide whether it changed."""

    content_hash: str
    text_hash: str
    deprecated_by: str | None
    embed_model: str | None


@dataclass(frozen=True)
class StoredFile:
    """The ``files`` row of one daily log: the stats it had when it was last synced."""

    mtime_ns: int
    size: int
    sha256: str


@dataclass
class SyncPlan:
    """What to change in the index for one file.

    ``upserts`` are written whole (row + vector); ``embed`` names those that need a fresh vector,
    the others keep theirs. ``deprecations`` changes only ``deprecated_by`` of entries that are
    otherwise unchanged. When the file could not be understood (``fatal``) the plan is empty:
    what was indexed before stays searchable and only ``problems`` is recorded.
    """

    upserts: list[Entry] = field(default_factory=list)
    embed: set[str] = field(default_factory=set)
    deletes: list[str] = field(default_factory=list)
    deprecations: dict[str, str | None] = field(default_factory=dict)
    problems: list[Diagnostic] = field(default_factory=list)
    fatal: bool = False

    @property
    def empty(self) -> bool:
        return not (self.upserts or self.deletes or self.deprecations)


def plan_file_sync(
    stored: Mapping[str, StoredEntry], log: DailyLog, *, embed_model: str
) -> SyncPlan:
    """Decide how the index must change so that it reflects ``log``.

    ``stored`` is what the index holds for this file (id → hashes); ``embed_model`` is the name
    of the current embedder: a vector made by another model is never kept, so spaces never mix.
    Entries whose id does not belong in this file (other kind or day, or a duplicate) are
    reported and left out, which keeps ids unique per user across files.
    """
    plan = SyncPlan(problems=list(log.diagnostics))
    if not log.ok:
        plan.fatal = True
        return plan

    seen: set[str] = set()
    for entry in log.entries:
        problem = _misplaced(entry, log, seen)
        if problem:
            plan.problems.append(Diagnostic(log.path, entry.line, problem))
            continue
        seen.add(entry.id)
        before = stored.get(entry.id)
        if (
            before is None
            or before.content_hash != entry.content_hash
            or before.embed_model != embed_model
        ):
            plan.upserts.append(entry)
            if (
                before is None
                or before.text_hash != entry.text_hash
                or before.embed_model != embed_model
            ):
                plan.embed.add(entry.id)
        elif before.deprecated_by != entry.deprecated_by:
            plan.deprecations[entry.id] = entry.deprecated_by

    plan.deletes = sorted(set(stored) - seen)
    return plan


def _misplaced(entry: Entry, log: DailyLog, seen: set[str]) -> str | None:
    """Why ``entry`` cannot be indexed from this file, or None when it can."""
    if entry.id in seen:
        return f"duplicate entry id {entry.id}: only the first one is indexed"
    try:
        eid = EntryId.parse(entry.id)
    except InvalidId as exc:
        return str(exc)
    if log.kind is not None and eid.kind is not log.kind:
        return f"entry {entry.id} is not a {log.kind.value} id; it is not indexed"
    if log.day is not None and eid.day != log.day:
        return (
            f"entry {entry.id} belongs in the file of {eid.day.isoformat()}, "
            f"not {log.day.isoformat()}; it is not indexed"
        )
    return None


def plan_scan(
    stored_files: Mapping[str, StoredFile], disk_files: Mapping[str, tuple[int, int]]
) -> tuple[list[str], list[str]]:
    """Split a whole-root listing into (files to sync, files gone from disk).

    Stat-only on purpose: an unchanged root costs one ``stat`` per file and no reads. A file
    whose (mtime_ns, size) moved is a candidate; the sync then compares its sha256 with the
    stored one, so a mere ``touch`` costs a read but no parse or embedding.
    """
    changed = sorted(
        rel
        for rel, (mtime_ns, size) in disk_files.items()
        if (old := stored_files.get(rel)) is None or (old.mtime_ns, old.size) != (mtime_ns, size)
    )
    deleted = sorted(set(stored_files) - set(disk_files))
    return changed, deleted
