"""Keep the derived indexes (SQLite ``entries``/``files`` + LanceDB) equal to the Markdown.

Two layers. The planners are pure: :func:`plan_scan` compares stored file stats with the disk,
:func:`plan_file_sync` compares the entries stored for one file with a fresh parse and says what
to upsert, embed, delete and re-deprecate. :class:`Indexer` does the I/O around them: it reads
files, embeds only entries whose text (or embedding model) changed — batched across files — and
writes LanceDB first, then SQLite, so an interrupted sync is simply redone by the next scan.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import re
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from contextlib import ExitStack, nullcontext, suppress
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from filelock import FileLock

from everos_reflect.embedding.base import pausing
from everos_reflect.errors import InvalidId
from everos_reflect.fileio import (
    NotRegularFile,
    OutsideRoot,
    not_utf8,
    open_regular,
    os_reason,
    read_at_most,
)
from everos_reflect.index import audit, cursors, events, handoff, rebuild
from everos_reflect.index.db import PARSER_VERSION_KEY, transaction, utcnow_iso
from everos_reflect.markdown import settling
from everos_reflect.markdown.marks import foreign_marks
from everos_reflect.markdown.parser import PARSER_VERSION, highest_seqs
from everos_reflect.markdown.store import look_for_leftovers
from everos_reflect.model import (
    DailyLog,
    Diagnostic,
    Entry,
    EntryId,
    Kind,
    UserRef,
    format_timestamp,
    log_name_match,
    shown_path,
)
from everos_reflect.problem_words import counted

if TYPE_CHECKING:
    from everos_reflect.runtime import Runtime

log = logging.getLogger(__name__)

_LOG_NAME = {kind: re.compile(rf"{kind.stem}-\d{{4}}-\d{{2}}-\d{{2}}\.md") for kind in Kind}

Progress = Callable[[int], None]


# --------------------------------------------------------------------------- pure planning


@dataclass(frozen=True)
class StoredEntry:
    """What the index remembers about one entry: enough to decide whether it changed."""

    content_hash: str
    text_hash: str
    deprecated_by: str | None
    embed_model: str | None
    #: its ``parent_type`` as indexed: an entry that was a narrative (``cluster``) and is
    #: one no longer is named in :attr:`SyncPlan.unparented`
    parent_type: str | None = None


@dataclass(frozen=True)
class StoredFile:
    """The ``files`` row of one daily log: the stats it had when it was last synced."""

    mtime_ns: int
    size: int
    sha256: str
    synced_ns: int = 0  # when it was last read (epoch ns, this machine's clock)
    #: when the first read that found these stats and bytes ended (0: not known)
    still_since_ns: int = 0
    #: its st_ctime_ns at that read (None: not known): a ``chmod`` moves it alone
    ctime_ns: int | None = None

    @property
    def refused(self) -> bool:
        """Whether its last sync found it standing still and refused to this process (no
        permission): it holds no entry, ``status`` names it, and every scan tries it again
        (a ``chmod`` that lets it be read moves none of its stats)."""
        return self.size == REFUSED_SIZE

    @property
    def racy(self) -> bool:
        """Whether a later write may have left its (mtime, size) as they were (coarse
        filesystem clocks), so the next scan hashes it again: it was read within
        :data:`settling.JUST_WRITTEN_NS` of its mtime, unless two reads that far apart
        found it as it is. The second way is the only one for a log stamped ahead of this
        clock (a network share's, ``touch -d tomorrow``), hashed by every scan for good
        before: a write that keeps a mtime falls within one tick of the write that set it,
        and a tick is shorter than the window."""
        window = settling.JUST_WRITTEN_NS
        if self.synced_ns - self.mtime_ns >= window:
            return False
        return not (self.still_since_ns and self.synced_ns - self.still_since_ns >= window)


@dataclass
class SyncPlan:
    """What to change in the index for one file.

    ``upserts`` are written whole (row + vector); ``embed`` names those that need a fresh vector,
    the others keep theirs. ``deprecations`` changes only ``deprecated_by`` of entries that are
    otherwise unchanged. A file that could not be understood (``fatal``: its frontmatter
    broken, over the size limit, not UTF-8, a link refused) holds no entry, as a ``reindex``
    reads it: what it held is deleted and its ``problems`` recorded (``status``, ``lint``);
    so is what a file emptied (white space alone) held, and an entry that cannot be read.
    """

    upserts: list[Entry] = field(default_factory=list)
    embed: set[str] = field(default_factory=set)
    deletes: list[str] = field(default_factory=list)
    deprecations: dict[str, str | None] = field(default_factory=dict)
    problems: list[Diagnostic] = field(default_factory=list)
    fatal: bool = False
    #: the ids of ``upserts`` the index had no row for (new entries)
    new: set[str] = field(default_factory=set)
    #: the ids of ``upserts`` the index holds as narratives (``parent_type: cluster``) that
    #: are narratives no longer (the line taken out or changed by hand): clustering places
    #: them by the rule, as a rebuild does, and only the index knows what they were once
    #: their rows are written
    unparented: set[str] = field(default_factory=set)

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
    if log.emptied:
        # emptied (``> log``, a save cut short): it holds nothing, as a reindex reads it; kept,
        # its entries were searched and clustered for good with no text behind them
        plan.deletes = sorted(stored)
        return plan
    if not log.ok:
        # Not read, it holds no entry, as a reindex reads it: kept, its entries stayed
        # searchable and clustered while a rebuild of the same Markdown had none of them.
        # Records citing them keep their status (provenance reads their ids as unknown while
        # the log cannot be read), and once it reads, its owner is checked whole
        # (:attr:`_Job.recheck`). A log just written waits to stand still first (_settled).
        plan.fatal = True
        plan.deletes = sorted(stored)
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
            if before is None:
                plan.new.add(entry.id)
            elif before.parent_type == "cluster" and entry.parent_type != "cluster":
                plan.unparented.add(entry.id)
            if (
                before is None
                or before.text_hash != entry.text_hash
                or before.embed_model != embed_model
            ):
                plan.embed.add(entry.id)
        elif before.deprecated_by != entry.deprecated_by:
            plan.deprecations[entry.id] = entry.deprecated_by
    plan.problems += foreign_marks(log)  # recorded here, so `status` shows them as `lint` does

    # An entry still in the file but unreadable now (a hand edit broke its metadata, its
    # closing marker was lost, the text ends inside it) is no entry to a reindex either: its
    # row goes. Kept, it stayed searchable and clustered while a rebuild had none of it.
    # Records citing it keep their status (provenance reads its id as unknown, never as
    # deleted), and once the log reads whole its owner is checked again (_Job.recheck). A
    # log caught mid-write drops nothing: a plan deleting entries from a log written this
    # instant waits for it to stand still (Indexer._settled), and holds them while it moves.
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
    if not entry.search_text.strip():
        # the kind's own text section: a lesson left empty was said to lack "Content", an
        # Episode's section, under its '## Lesson' heading
        return (f"entry {entry.id} has no text (no Subject, Summary or "
                f"{eid.kind.main_section}); it is not indexed")
    return None


def plan_scan(
    stored_files: Mapping[str, StoredFile],
    disk_files: Mapping[str, tuple[int, int] | tuple[int, int, int]],
) -> tuple[list[str], list[str]]:
    """Split a whole-root listing into (files to sync, files gone from disk).

    Stat-only on purpose: an unchanged root costs one ``stat`` per file and no reads. A file
    whose (mtime_ns, size) moved is a candidate, and so is a "racy" one (written just before
    its last sync, like git's racily-clean index entries); the sync then compares its sha256
    with the stored one, so a mere ``touch`` costs a read but no parse or embedding. A
    listing's third value, when given, is the file's st_ctime_ns: one that moved while the
    others did not (a ``chmod``: the log may have become unreadable, or readable again) is a
    candidate too, when the stored one is known.
    """
    changed = sorted(
        rel
        for rel, st in disk_files.items()
        if (old := stored_files.get(rel)) is None
        or old.racy
        or (old.mtime_ns, old.size) != st[:2]
        or (len(st) > 2 and old.ctime_ns is not None and old.ctime_ns != st[2])
    )
    deleted = sorted(set(stored_files) - set(disk_files))
    return changed, deleted


def gone_users_first(paths: list[Path]) -> list[Path]:
    """``paths`` with the logs of users whose folder is gone first, the others after in their
    order. A user's folder renamed by hand (``mv users/ann users/anna``, or its project's)
    takes its clusters' ids with it (they hash the user in): the new user's narratives, synced
    before the old user's logs were dropped, found their clusters held by another user and
    were attached nowhere, for good, where a ``reindex`` attaches them."""
    there: dict[Path, bool] = {}
    for path in paths:
        user = path.parent.parent
        if user not in there:
            there[user] = os.path.isdir(user)
    return [p for p in paths if not there[p.parent.parent]] + \
        [p for p in paths if there[p.parent.parent]]


# --------------------------------------------------------------------------- the Indexer


@dataclass
class FileSyncResult:
    """What one file's sync changed (``problems`` as found in the file, if any)."""

    path: str
    upserted: int = 0
    embedded: int = 0
    deleted: int = 0
    deprecations: int = 0
    problems: list[Diagnostic] = field(default_factory=list)
    removed: bool = False  # the file itself is gone from disk
    unchanged: bool = False  # stats moved but the bytes did not (e.g. a `touch`)
    #: why the file was not read now (it kept changing while read, no permission …): its
    #: index is as it was, and what it holds now is not searchable yet
    not_read: str = ""
    #: it was still being written after every settle wait (not read, or its missing entries
    #: held): to be synced again once it stands still, without waiting for another edit
    moving: bool = False
    #: why it is to be synced again (``moving``), as ``status`` says it
    waits: str = ""


@dataclass
class ScanReport:
    """Totals of one reconcile scan or reindex, for the CLI and the logs."""

    files_seen: int = 0
    files_synced: int = 0
    files_removed: int = 0
    entries_upserted: int = 0
    entries_embedded: int = 0
    entries_deleted: int = 0
    problems: dict[str, list[str]] = field(default_factory=dict)
    seconds: float = 0.0
    #: logs changed or deleted since the last sync that a read-only root kept from being
    #: synced (:attr:`Runtime.read_only`): what a read of the index does not see
    files_behind: int = 0
    #: synced logs whose bytes had not changed (a ``touch``, a re-check of a log written just
    #: before its last sync): nothing was indexed of them
    files_unchanged: int = 0
    #: logs to be synced again once they stand still or can be read (``moving``), and why:
    #: the watcher retries them as it does those of its own syncs
    waiting: dict[str, str] = field(default_factory=dict)

    def add(self, result: FileSyncResult) -> None:
        if result.moving:
            self.waiting[result.path] = result.waits or STILL_WRITTEN
        self.files_synced += not result.removed
        self.files_unchanged += result.unchanged
        self.files_removed += result.removed
        self.entries_upserted += result.upserted
        self.entries_embedded += result.embedded
        self.entries_deleted += result.deleted
        if result.problems:
            self.problems[result.path] = [str(p) for p in result.problems]

    @property
    def logs_indexed(self) -> int:
        """Logs this sync brought into the index (new, changed) or took out (deleted)."""
        return self.files_synced - self.files_unchanged + self.files_removed

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def read_as_built(root: str, files_behind: int) -> str:
    """What a read of a read-only root (:attr:`Runtime.read_only`) says of its index, the
    same at every edge (CLI ``search`` and ``briefing`` on stderr, the API's and MCP's
    ``note``): read as last built, and how many logs changed since then are not seen, so a
    stale answer is never taken for a fresh one."""
    n = files_behind
    behind = (f"; {n:,} {'log' if n == 1 else 'logs'} changed since then "
              f"{'is' if n == 1 else 'are'} not seen" if n else "")
    return f"{root} is read-only here: its index is read as last built{behind}"


#: the ``files.size`` of a log refused to this process (:attr:`StoredFile.refused`); its
#: ``mtime_ns`` is -1 too, so every scan plans it
REFUSED_SIZE = -1
#: a vector made in a flush, by log, entry id and text (:meth:`Indexer._embed_current`)
_Made = tuple[str, str, str]
#: New texts a sync embeds at most before it takes the indexer lock
#: (:meth:`Indexer._embedded_ahead`): a Reflection batch's narratives and facts, an add's
#: Episode; the rest of a larger sync is embedded under the lock, letting writers in.
AHEAD_TEXTS = 1024
#: Logs a sync reads at most for that, in its order (a Reflection commit's narratives' and
#: facts' logs come first): fewer than the parse memo keeps (``parsed.MAX_HELD_LOGS``), so
#: the sync's own parse of each under the lock is answered from it, not made again.
AHEAD_LOGS = 32


@dataclass
class _Job:
    """One file read, parsed and planned, waiting for its vectors."""

    rel: str
    ref: UserRef
    kind: Kind
    plan: SyncPlan
    stat: tuple[int, int, str] | None  # (mtime_ns, size, sha256); None: file removed
    #: when the read of ``stat`` started and ended (epoch ns; 0: not read), for
    #: :attr:`StoredFile.racy`
    read_ns: tuple[int, int] = (0, 0)
    only_stat: bool = False  # bytes unchanged: refresh the stats, touch nothing else
    #: some of the log's changes left for the next sync (:meth:`Indexer._narrowed`): its
    #: ``files`` row is marked unread, so that sync finds the log changed and plans it again
    partial: bool = False
    #: its log was still being written after every settle wait (:meth:`Indexer._settled`)
    moving: bool = False
    #: why it waits (``moving``): what :meth:`Indexer._deletions_held` was told
    waits: str = ""
    vectors: dict[str, np.ndarray] = field(default_factory=dict)
    #: The highest sequence number of every id stem the file mentions (``id_watermark``).
    seqs: dict[str, int] = field(default_factory=dict)
    #: a problem its last sync recorded is gone (the log reads again, a broken entry was
    #: mended or removed, the log is gone): the entries that problem kept out of the index
    #: had no rows, so one removed meanwhile was never seen to go. Its owner's derived
    #: records are checked whole (:attr:`events.ChangeSet.recheck`), as after a ``reindex``.
    recheck: bool = False
    #: the log stood still and this process may not read it (:meth:`Indexer._refused`)
    refused: bool = False
    #: the log's st_ctime_ns at the read (None: not read), for :attr:`StoredFile.ctime_ns`
    ctime_ns: int | None = None


@dataclass
class _Looked:
    """What a batch sync found of its logs before it took the indexer lock
    (:meth:`Indexer._looked_ahead`), for the sync under it, which waits for none of them."""

    #: every log of the batch: none is waited for under the lock
    covered: frozenset[Path]
    #: each log read ahead, as last read: standing still since, unless in ``moving``
    jobs: dict[Path, _Job] = field(default_factory=dict)
    #: the logs still being written after every settle wait
    moving: frozenset[Path] = frozenset()
    #: why a log read again after a wait could not be read then (the OS's words)
    refused: dict[Path, str] = field(default_factory=dict)

    def stood_still(self, path: Path, changed: Callable[[_Job], bool]) -> bool:
        """Whether ``path`` was found standing still ahead and is as it was then
        (``changed``: whether a job's log moved since it was read)."""
        job = self.jobs.get(path)
        return path not in self.moving and job is not None and not changed(job)


class Indexer:
    """Brings SQLite ``entries``/``files`` and the LanceDB tables in line with the Markdown.

    One indexer at a time per root (a cross-process file lock), so the watcher, a CLI ``search``
    and ``reindex`` never interleave their writes.
    """

    #: entries embedded per flush; files are grouped until their new texts reach this many
    flush_entries = 256
    #: the same during ``reindex``: larger batches, fewer (and larger) LanceDB fragments
    reindex_flush_entries = 2048

    def __init__(self, runtime: Runtime, *, notify_clusters: bool = True) -> None:
        self.rt = runtime
        self.notify_clusters = notify_clusters
        self._fresh = False  # tables were just reset: every row written is new (reindex)
        self._quiet = False  # True during reindex: a rebuild publishes no change events
        self._written: set[Path] = set()
        self._said_newer = False  # see _newer_parser
        #: the index was read by a newer parser: what this sync writes is marked for a
        #: fresh read by it (see _newer_parser)
        self._for_newer = False
        #: ``announced``: this thread syncs for a writer someone waits for (:meth:`sync_path`
        #: with a timeout), which never stands aside for itself (:meth:`_let_writers_in`)
        self._thread = threading.local()
        #: the daily logs that are symlinks, as the last full listing (scan, reindex) found
        #: them: the watcher follows them to the files they lead to
        self.symlinked_logs: list[Path] = []
        #: ``(st_dev, st_ino)`` of the listed logs with more than one link, how many of the
        #: listed logs each is (:meth:`_disk_files`): above one, a log of the root is another
        #: one's alias (:meth:`_same_bytes`)
        self.linked_logs: dict[tuple[int, int], int] = {}
        lock_dir = runtime.index_dir / "locks"
        if not runtime.read_only:  # nothing is synced there (see scan), so nothing locked
            lock_dir.mkdir(parents=True, exist_ok=True)
        self._lock = FileLock(str(lock_dir / "indexer.lock"))

    # ------------------------------------------------------------------ public

    def sync_path(self, path: str | os.PathLike[str], timeout: float = -1, *,
                  wanted: Collection[str] = ()) -> FileSyncResult:
        """Sync one file (also when it was deleted); a non-log path changes nothing.

        ``timeout`` bounds the wait for the indexer lock (a scan or rebuild may hold it for
        minutes): past it, :class:`filelock.Timeout` is raised and nothing was synced.
        Negative waits as long as it takes. A bounded wait is someone's (an add answering):
        a scan holding the lock stands aside for it between two batches (:mod:`.handoff`).

        ``wanted`` names the entries the caller waits for (the one an add just appended).
        When the log holds more than a batch of other texts to embed besides them (thousands
        of Episodes pasted into today's log, which a scan is working through), only those are
        synced now and the rest is left to the next sync (:meth:`_narrowed`): the add used to
        embed the whole log itself before it answered.

        A log a writer may still be at work on (changing while read, or dropping entries
        from a log written this instant: :meth:`_in_flux`) is waited for with the lock let
        go, as a batch sync waits (:meth:`_looked_ahead`), and synced under it once more, not
        waited for there: held through up to :data:`settling.SETTLE_TRIES` settle waits, the
        lock kept every other add and sync waiting (2 s for a log still being written). The
        waits count toward ``timeout``.
        """
        full = Path(path) if Path(path).is_absolute() else self.rt.root / path
        deadline = time.monotonic() + timeout if timeout >= 0 else None
        want = frozenset(wanted)
        with ExitStack() as stack:
            if timeout >= 0:  # someone waits for this answer: a long scan lets it in between
                stack.enter_context(handoff.waiting(self.rt.index_dir))  # its batches
            announced = getattr(self._thread, "announced", False)
            self._thread.announced = announced or timeout >= 0
            try:
                # held already by this thread (nothing to gain by letting go): waited under it
                moving: list[Path] | None = None if self._lock.lock_counter else []
                with self._lock.acquire(timeout=timeout):
                    results = self._sync([full], wanted=want, moving=moving)
                if moving:
                    looked = self._looked_ahead(moving)
                    left = -1.0 if deadline is None else max(0.0, deadline - time.monotonic())
                    with self._lock.acquire(timeout=left):
                        results = self._sync(moving, wanted=want, looked=looked)
            finally:
                self._thread.announced = announced
        return results[0] if results else FileSyncResult(self.rt.store.rel(full), unchanged=True)

    def sync_paths(self, paths: Iterable[str | os.PathLike[str]],
                   timeout: float = -1) -> list[FileSyncResult]:
        """Sync several files in one batch: one embedding call and one index write per kind,
        instead of one per file (a merge touches the narrative's, the facts' and every source's
        log). The settle waits for logs a writer may still be at work on
        (:meth:`_looked_ahead`) and the embedding of their new texts
        (:meth:`_embedded_ahead`) are done before the indexer lock is taken: under it, no
        log is waited for. ``timeout`` bounds the wait for the lock, as in :meth:`scan`."""
        full = gone_users_first(list(dict.fromkeys(
            Path(p) if Path(p).is_absolute() else self.rt.root / p for p in paths)))
        looked = self._looked_ahead(full)
        ahead = self._embedded_ahead(full, looked)
        with self._lock.acquire(timeout=timeout):
            return self._sync(full, ahead=ahead, looked=looked)

    def _looked_ahead(self, paths: list[Path]) -> _Looked | None:
        """Each of ``paths`` read and planned once before the indexer lock is taken, and
        those a writer may still be at work on (found changing while read, or dropping
        entries from a log written this instant: :meth:`_in_flux`) waited for until they
        stand still, as :meth:`_settled` and :meth:`_read_whole` wait, here without the
        lock. Waited for under it, a log being written held every ``add`` and every other
        sync through up to :data:`settling.SETTLE_TRIES` settle waits it had nothing to do
        with. A log neither among the first :data:`AHEAD_LOGS` nor written within
        :data:`settling.JUST_WRITTEN_NS` is only stat'ed: it stood still for longer than a
        wait. None when this thread holds the lock already (nothing to gain) or the root is
        read-only (nothing is synced)."""
        if self.rt.read_only or self._lock.lock_counter:
            return None
        looked = _Looked(covered=frozenset(paths))
        waiting: set[Path] = set()
        for n, path in enumerate(paths):
            if n >= AHEAD_LOGS and not self._maybe_in_flux(path):
                continue
            self._look(path, looked, waiting)
        for _ in range(settling.SETTLE_TRIES):
            if not waiting:
                break
            settling.pause(settling.SETTLE_SECONDS)
            for path in sorted(waiting):
                seen = looked.jobs.get(path)
                if seen is None or self._changed_since_read(seen):
                    self._look(path, looked, waiting, again=True)
                else:
                    waiting.discard(path)  # stood still for a whole wait since it was read
        looked.moving = frozenset(waiting)
        return looked

    def _maybe_in_flux(self, path: Path) -> bool:
        """Whether ``path`` may be a log a writer is at work on, from one ``stat``: written
        within :data:`settling.JUST_WRITTEN_NS` (or stamped ahead of this clock), or not
        there (its folder may have just lost it)."""
        try:
            return settling.just_written(os.stat(path).st_mtime_ns, time.time_ns())
        except OSError:
            return True

    def _look(self, path: Path, looked: _Looked, waiting: set[Path], *,
              again: bool = False) -> None:
        """Read and plan ``path`` once into ``looked`` (no wait, no lock), and note in
        ``waiting`` whether it is to be waited for: changing while read, or in flux. A log
        that cannot be read or planned now is left to the sync under the lock, which says
        why; one that could not be read ``again`` after a wait is noted, for the sync to say
        why it waits (its read under the lock may succeed and find it in flux)."""
        looked.jobs.pop(path, None)
        waiting.discard(path)
        try:
            job = self._prepare_once(path, tries=1)
        except OSError as exc:
            if exc.errno == errno.EAGAIN:
                waiting.add(path)
            elif again:
                looked.refused[path] = f"it could not be read again: {os_reason(exc)}"
            return
        except Exception:  # the sync under the lock reads it again and says why
            return
        if job is None:
            return
        looked.jobs[path] = job
        if self._in_flux(job):
            waiting.add(path)

    def _embedded_ahead(self, paths: list[Path],
                        looked: _Looked | None = None) -> dict[_Made, np.ndarray]:
        """The vectors of the new texts of ``paths`` as they read now, made before the
        indexer lock is taken (at most :data:`AHEAD_TEXTS`, of the first :data:`AHEAD_LOGS`
        logs; none when this thread holds it already). The sync under the lock reads and
        plans every log again, as always, and embeds only the texts not found here (changed
        since, or past the bounds): the lock is held for the writes, not for the model.
        The watcher's sync of the logs a Reflection commit wrote, and the commit's own,
        held it through model calls that waited for a model slot behind the merge workers,
        standing aside at each pause for the adds that queued meanwhile. Nothing is written
        here. Each log is planned as :meth:`_looked_ahead` last read it (read once here when
        it was not): a log that is moving, or cannot be read or planned now, is left to the
        sync, which says why; an embedder that fails raises, as the sync would have. An
        add's own sync (:meth:`sync_path`) embeds its one text under the lock, as before."""
        if self.rt.read_only or self._lock.lock_counter:
            return {}
        todo: dict[_Made, None] = {}
        for path in paths[:AHEAD_LOGS]:
            if looked is not None:
                job = None if path in looked.moving else looked.jobs.get(path)
            else:
                try:
                    job = self._prepare_once(path, tries=1)  # moving: left to the sync
                except Exception:  # the sync under the lock reads it again and says why
                    continue
            if job is None:
                continue
            todo.update(dict.fromkeys((job.rel, e.id, e.search_text)
                                      for e in job.plan.upserts if e.id in job.plan.embed))
            if len(todo) >= AHEAD_TEXTS:
                break
        keys = list(todo)[:AHEAD_TEXTS]
        if not keys:
            return {}
        return dict(zip(keys, self.rt.embedder.embed([k[2] for k in keys]), strict=True))

    def scan(self, progress: Progress | None = None, timeout: float = -1) -> ScanReport:
        """Reconcile the whole root: new, changed and deleted files, edits made while offline.

        An unchanged root costs one ``stat`` per file and one query, nothing else. A
        read-only root (:attr:`Runtime.read_only`) is not synced: the report counts what its
        index is behind by (``files_behind``), so a reader can say its results may be stale.
        ``timeout`` bounds the wait for the indexer lock, as in :meth:`sync_path`. The logs
        a writer may still be at work on are synced last, by :meth:`sync_paths`, which waits
        for them to stand still with the lock let go: held through those waits, the scan
        kept every ``add`` and every other sync waiting behind a log being written.
        """
        started = time.perf_counter()
        if self.rt.read_only:
            disk = self._disk_files()
            lag = self._lag(disk)
            return ScanReport(files_seen=len(disk),
                              files_behind=lag["files_changed"] + lag["files_deleted"],
                              seconds=time.perf_counter() - started)
        with self._lock.acquire(timeout=timeout):
            self._reread_if_parser_changed()
            lost = self._forget_lost_vectors()
            # searches wait (or are told 503) until the lost vectors are embedded again
            with self.rt.refilling() if lost else nullcontext():
                disk = self._disk_files()
                stored = self._stored_files()
                changed, deleted = plan_scan(stored, {rel: st for rel, (st, _) in disk.items()})
                stale = self._paths_embedded_by_other_models() & disk.keys()
                same = self._same_bytes(stored, disk, [r for r in changed if r not in stale])
                todo = [Path(disk[rel][1]) for rel in sorted(set(changed) - same.keys() | stale)]
                unlisted, held = self._unlisted(deleted)
                todo = gone_users_first(
                    todo + [self.rt.root / rel for rel in deleted if rel not in held])
                report = ScanReport(files_seen=len(disk))
                report.waiting.update(held)
                self._confirm(stored, same, report)
                moving: list[Path] = []
                self._thread.unlisted = unlisted
                try:
                    for result in self._sync(todo, progress, moving=moving):
                        report.add(result)
                finally:
                    self._thread.unlisted = None
        if moving:
            for result in self.sync_paths(moving, timeout=timeout):
                report.add(result)
        report.seconds = time.perf_counter() - started
        return report

    def reindex(self, progress: Progress | None = None,
                on_wait: Callable[[], None] | None = None) -> ScanReport:
        """Drop every derived row and vector, rebuild them from Markdown, then the clusters.

        Holds the rebuild lock (:mod:`everos_reflect.index.rebuild`) throughout: it first waits
        for the strategy runs in flight (``on_wait`` is told), and a run that starts meanwhile
        is skipped as ``busy`` instead of working on a half-built index."""
        started = time.perf_counter()
        with (rebuild.rebuilding(self.rt.index_dir, on_wait),
              rebuild.refilling(self.rt.index_dir), self._lock):
            conn = self.rt.db()
            with transaction(conn):
                conn.execute("DELETE FROM entries")
                conn.execute("DELETE FROM files")
                conn.execute("DELETE FROM cluster_members")
                conn.execute("DELETE FROM clusters")
                _record_parser_version(conn)
            self.rt.vectors.reset()
            self.rt.store.forget_parses()  # rebuilt from Markdown as read now, nothing held
            disk = self._disk_files()
            report = ScanReport(files_seen=len(disk))
            notify, self.notify_clusters, self._quiet = self.notify_clusters, False, True
            flush, self.flush_entries = self.flush_entries, self.reindex_flush_entries
            self._fresh = True
            try:
                for result in self._sync([Path(full) for _, full in disk.values()], progress):
                    report.add(result)
            finally:
                self.notify_clusters, self._quiet = notify, False
                self.flush_entries = flush
                self._fresh = False
            with transaction(conn):  # the cursors kept through it, of a folder renamed
                cursors.follow_moved(conn, (), cursors.owners(conn), self.rt.store.user_gone)
            if notify:
                written: set[Path] = set()
                for name, rebuilder in events.rebuilders().items():
                    try:
                        written.update(Path(p) for p in rebuilder(self.rt) or ())
                    except Exception:
                        log.exception("rebuilding %s after reindex failed", name)
                self._sync(sorted(written))  # e.g. records marked stale: counted once
        report.seconds = time.perf_counter() - started
        return report

    def _reread_if_parser_changed(self) -> bool:
        """Mark every indexed log for a fresh read when the index was read by an older parser
        version (:data:`~everos_reflect.markdown.parser.PARSER_VERSION`), or one from before
        versions were recorded; True when it did. The scan then reads each log again, as
        after a hand edit: entries now read as other values are written again (and their
        change published), the text embedded anew only where it changed. One query when
        the version is the same.

        An index a newer parser read is left to it (:meth:`_newer_parser`): this older one
        recording its own version made the newer one read every log again at its next scan,
        and each alternation of the two (an old ``serve`` beside a new command) did it
        again."""
        conn = self.rt.db()
        row = conn.execute("SELECT value FROM index_meta WHERE key = ?",
                           (PARSER_VERSION_KEY,)).fetchone()
        if row is not None and row[0] == str(PARSER_VERSION):
            return False
        if self._newer_parser() is not None:
            return False
        with transaction(conn):
            conn.execute("UPDATE files SET mtime_ns = -1, sha256 = ''")
            _record_parser_version(conn)
        self.rt.store.forget_parses()  # every log is read as if for the first time
        log.info("the index was read by %s; reading every log again with parser version %d",
                 f"parser version {row[0]}" if row else "an older parser", PARSER_VERSION)
        return True

    def _newer_parser(self) -> int | None:
        """The parser version the index records when it is newer than this program's, else
        None; said once per indexer in the log. Logs this program syncs then are written
        marked for a fresh read (:meth:`_flush`), so the newer parser reads them again at its
        next scan instead of keeping this one's reading of them."""
        recorded = recorded_parser_version(self.rt.db())
        if recorded is None or recorded <= PARSER_VERSION:
            return None
        if not self._said_newer:
            self._said_newer = True
            log.warning("the index of %s was read by parser version %d, newer than this "
                        "program's %d: the logs synced here are read again by the newer "
                        "version's next scan; upgrade everos-reflect here",
                        shown_path(self.rt.root), recorded, PARSER_VERSION)
        return recorded

    def pending(self, now: float | None = None) -> dict[str, Any]:
        """Index lag, without syncing: logs changed or deleted since their last sync, and how
        long the oldest change has waited (seconds, from its mtime). Stat-only, like ``scan``."""
        return self._lag(self._disk_files(), now)

    def _lag(self, disk: dict[str, tuple[tuple[int, int, int], str]],
             now: float | None = None) -> dict[str, Any]:
        stored = self._stored_files()
        changed, deleted = plan_scan(stored, {rel: st for rel, (st, _) in disk.items()})
        # racy files are re-checked by the next scan but are not known to be behind
        # nor is a refused one, tried by every scan (``status`` names it as a problem)
        behind = [rel for rel in changed if rel not in stored
                  or (not stored[rel].refused
                      and (stored[rel].mtime_ns, stored[rel].size) != disk[rel][0][:2])]
        now = time.time() if now is None else now
        oldest = min((disk[rel][0][0] for rel in behind), default=None)
        return {
            "files_changed": len(behind),
            "files_deleted": len(deleted),
            "lag_seconds": None if oldest is None else max(0.0, now - oldest / 1e9),
        }

    def problems(self) -> dict[str, list[dict[str, Any]]]:
        """Every file's recorded problems (path → diagnostics), for ``status``, ``lint``, API."""
        rows = self.rt.db().execute(
            "SELECT path, problems FROM files WHERE problems != '[]' ORDER BY path"
        )
        return {row["path"]: json.loads(row["problems"]) for row in rows}

    # ------------------------------------------------------------------ reading

    def _disk_files(self) -> dict[str, tuple[tuple[int, int, int], str]]:
        """rel path → ((mtime_ns, size, ctime_ns), path) of every daily log: the same files as
        ``store.iter_files()``, listed with ``scandir`` and plain strings because this runs on
        every reconcile scan and dominates the cost of an unchanged one."""
        out: dict[str, tuple[tuple[int, int, int], str]] = {}
        links: list[Path] = []
        linked: dict[tuple[int, int], int] = {}
        for ref in self.rt.store.iter_users():
            user_dir = self.rt.store.user_dir(ref)
            user_rel = self.rt.store.rel(user_dir)
            for kind in Kind:
                pattern, folder = _LOG_NAME[kind], kind.folder
                try:
                    listing = list(os.scandir(user_dir / folder))
                except (FileNotFoundError, NotADirectoryError):
                    continue
                except OSError:  # a symlink loop (ELOOP) where the folder goes: no logs
                    continue
                for item in listing:
                    if not pattern.fullmatch(item.name) or not log_name_match(item.name):
                        if item.name.startswith(".") and item.name.endswith(".tmp"):
                            look_for_leftovers(user_dir / folder)  # a killed write's, maybe
                        continue
                    try:
                        st = item.stat()
                    except OSError:  # deleted while listing (the next scan sees it), or a
                        continue     # symlink loop: not a log, as a dangling link is not
                    if stat.S_ISREG(st.st_mode):
                        out[f"{user_rel}/{folder}/{item.name}"] = (
                            (st.st_mtime_ns, st.st_size, st.st_ctime_ns), item.path
                        )
                        if item.is_symlink():  # known from the listing: no system call
                            links.append(Path(item.path))
                        if st.st_nlink > 1:
                            inode = (st.st_dev, st.st_ino)
                            linked[inode] = linked.get(inode, 0) + 1
        self.symlinked_logs = links
        self.linked_logs = linked
        return out

    def _stored_files(self) -> dict[str, StoredFile]:
        rows = self.rt.db().execute(
            "SELECT path, mtime_ns, size, sha256, synced_at, read_ns, still_since_ns, ctime_ns "
            "FROM files")
        return {
            r["path"]: StoredFile(r["mtime_ns"], r["size"], r["sha256"],
                                  r["read_ns"] or _epoch_ns(r["synced_at"]),
                                  r["still_since_ns"], r["ctime_ns"])
            for r in rows
        }

    def _forget_lost_vectors(self) -> bool:
        """Entries whose kind's vector table is gone from disk are marked as embedded by no
        model, so this scan embeds them again (as after a model change); whether any was.
        Vectors are written before the SQLite rows, so an indexed entry whose table is missing
        means the table was deleted (``rm -rf .index/lancedb``, which the docs call derived):
        every search then found nothing, with no error, for good, since the logs themselves
        were unchanged."""
        lost = [kind.value for kind in self.rt.vectors.missing()]
        if not lost:
            return False
        conn = self.rt.db()
        marks = ", ".join("?" * len(lost))
        # Most roots never write some kinds (their tables are missing for good): asked through
        # the files table and the path index, as cheap as the scan's own query, no write.
        indexed = (f"SELECT path FROM files WHERE kind IN ({marks}) AND EXISTS (SELECT 1 FROM "
                   "entries e WHERE e.path = files.path AND e.embed_model IS NOT NULL)")
        if conn.execute(f"{indexed} LIMIT 1", lost).fetchone() is None or self.rt.root_gone():
            return False  # root_gone: no table folder is found where the root was
        with transaction(conn):
            cur = conn.execute(f"UPDATE entries SET embed_model = NULL WHERE path IN "
                               f"({indexed}) AND embed_model IS NOT NULL", lost)
        if cur.rowcount > 0:
            log.warning("vector index tables are missing from %s: embedding %d indexed "
                        "entries again", self.rt.vectors.path, cur.rowcount)
        return cur.rowcount > 0

    def _paths_embedded_by_other_models(self) -> set[str]:
        rows = self.rt.db().execute(
            "SELECT DISTINCT path FROM entries WHERE embed_model IS NOT ?",
            (self.rt.embedder.name,),
        )
        return {r[0] for r in rows}

    def _stored_entries(self, rel: str) -> dict[str, StoredEntry]:
        rows = self.rt.db().execute(
            "SELECT id, content_hash, text_hash, deprecated_by, embed_model, parent_type "
            "FROM entries WHERE path = ?",
            (rel,),
        )
        return {
            r["id"]: StoredEntry(r["content_hash"], r["text_hash"], r["deprecated_by"],
                                 r["embed_model"], r["parent_type"])
            for r in rows
        }

    def _same_bytes(self, stored: Mapping[str, StoredFile],
                    disk: Mapping[str, tuple[tuple[int, int, int], str]],
                    changed: Iterable[str]) -> dict[str, tuple[tuple[int, int], int]]:
        """Of the logs a scan plans to sync, those whose ctime alone moved (a ``cp -al``
        backup beside the root, a ``chmod`` or ``chown`` of every log) and whose bytes are
        the ones stored (sha256): rel -> (when the read started and ended, ctime). Only the
        bytes are read and hashed, the way :meth:`_planned` reads them; a log that is not
        plainly itself is left to the full sync: a symlink or under one, read with an error
        (a ``chmod`` that refused it), another listed log's hard link (an alias, refused
        there), with bytes other than those stored (a same-size copy with its mtime kept,
        ``cp -p``), or one whose entries another model embedded. Each was read, hashed and
        planned in full: ~0.7 ms a log, 2.5 s for 3,650 logs of one user after each backup
        (bench/ctime_rescan.py)."""
        symlinked = {str(p) for p in self.symlinked_logs}
        within = os.path.realpath(self.rt.root)
        plain: dict[str, bool] = {}  # folder -> it is where its path says (no symlink on it)
        out: dict[str, tuple[tuple[int, int], int]] = {}
        for rel in changed:
            old = stored.get(rel)
            (mtime, size, _), full = disk[rel]
            if (old is None or old.racy or not old.sha256 or old.ctime_ns is None
                    or (old.mtime_ns, old.size) != (mtime, size) or full in symlinked):
                continue
            folder = os.path.dirname(full)
            if folder not in plain:
                plain[folder] = os.path.realpath(folder) == os.path.abspath(folder)
            if not plain[folder]:
                continue
            try:
                st, data, read_ns = self._read_whole(Path(full), tries=1, within=within)
            except OSError:
                continue
            if (data is None or (st.st_mtime_ns, st.st_size) != (mtime, size)
                    or (st.st_nlink > 1 and self.linked_logs.get((st.st_dev, st.st_ino), 0) > 1)
                    or hashlib.sha256(data).hexdigest() != old.sha256):
                continue
            out[rel] = (read_ns, st.st_ctime_ns)
        return out

    def _confirm(self, stored: Mapping[str, StoredFile],
                 same: Mapping[str, tuple[tuple[int, int], int]], report: ScanReport) -> None:
        """Record the logs :meth:`_same_bytes` found unchanged as the full sync of a log with
        the same bytes records them (its ``files`` row, nothing else), in one transaction."""
        if not same:
            return
        now = utcnow_iso()
        rows = []
        for rel, ((started, ended), ctime_ns) in sorted(same.items()):
            old = stored.get(rel)
            if old is None:
                continue
            rows.append((old.mtime_ns, old.size, ended, old.mtime_ns, old.size, started, now,
                         ctime_ns, rel))
        with transaction(self.rt.db()) as conn:
            conn.executemany(_CONFIRM_FILE, rows)
        report.files_synced += len(rows)
        report.files_unchanged += len(rows)

    def _unlisted(self, deleted: Collection[str]) -> tuple[frozenset[str], dict[str, str]]:
        """Of the logs a scan did not list (``deleted``), those under a folder of the layout
        this process may not list (its mode, an ACL, another account's folder; ``lint`` and
        ``status`` name it): ``(gone, held)``. A ``reindex`` lists no log there, so once the
        folder stands still its logs are ``gone``, dropped without being read; one whose mode
        changed within :data:`settling.JUST_WRITTEN_NS` (a ``chmod -R`` under way) holds
        its logs, ``held`` with why (rel -> words for ``status``), tried again by the next
        scan: as a log refused to this process is (:meth:`_refused`). Read by path, they were
        kept while it was unreadable: entered but not listed (mode ``0o311``) every row stayed
        indexed and searchable, and not entered (``000``) each log was retried as a log still
        being written, for good."""
        refused: dict[str, Path | None] = {}  # folder -> itself when refused, else None

        def first_refused(rel: str) -> Path | None:
            folder = self.rt.root
            for part in rel.split("/")[:-1]:
                folder = folder / part
                key = str(folder)
                if key not in refused:
                    try:
                        with os.scandir(folder):
                            refused[key] = None
                    except PermissionError:
                        refused[key] = folder
                    except OSError:  # gone, or no folder: the log is read as gone
                        return None
                if refused[key] is not None:
                    return refused[key]
            return None

        gone: set[str] = set()
        held: dict[str, str] = {}
        now = time.time_ns()
        for rel in deleted:
            folder = first_refused(rel)
            if folder is None:
                continue
            try:
                st = os.stat(folder)
                moved = settling.just_written(max(st.st_mtime_ns, st.st_ctime_ns), now)
            except OSError:  # not even its stats: it stands as it is
                moved = False
            if moved:
                held[rel] = f"its folder {self.rt.store.rel(folder)} may not be listed"
            else:
                gone.add(rel)
        return frozenset(gone), held

    def _not_read(self, path: Path, rel: str, ref: UserRef, kind: Kind,
                  stored: dict[str, StoredEntry], problem: str) -> _Job:
        """The job of a log not read for ``problem`` (a link out of the root or to another
        log): nothing outside the root is read, nor a log a second time through a link to
        it. What the log held while it was readable is dropped, as for a log over the size
        limit or not UTF-8, and as a ``reindex`` leaves it: records citing it keep their
        status (provenance reads its ids as unknown), and its owner is checked whole once
        it reads again or is removed (:attr:`_Job.recheck`)."""
        try:
            st = os.lstat(path)
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                raise
            # gone, or under a folder that is a symlink loop now: no log is there, as a scan
            # and a reindex see it (a loop kept its entries indexed, warned at every scan)
            return _Job(rel, ref, kind, SyncPlan(deletes=sorted(stored)), stat=None)
        away = Diagnostic(rel, 0, f"not read: {problem}", severity="fatal")
        return _Job(rel, ref, kind, SyncPlan(problems=[away], fatal=True,
                                             deletes=sorted(stored)),
                    (st.st_mtime_ns, st.st_size, ""))

    def _prepare(self, path: Path) -> _Job | None:
        """Read and plan one file; None when the path is not a daily log of the root. A plan
        that drops entries from a log written this instant waits for it (:meth:`_settled`)."""
        job = self._prepare_once(path)
        return None if job is None else self._settled([job])[0]

    def _in_flux(self, job: _Job) -> bool:
        """Whether ``job`` drops entries from a log written (its folder changed, for a log
        gone) within :data:`settling.JUST_WRITTEN_NS` of now, or stamped ahead of this
        clock: a writer may still be at work on it."""
        if not job.plan.deletes:
            return False
        path = self.rt.root / job.rel
        try:
            mtime = job.stat[0] if job.stat is not None else self._folder_changed_ns(path)
        except OSError:  # the root went too: nothing to wait for
            return False
        return time.time_ns() - mtime < settling.JUST_WRITTEN_NS

    def _folder_changed_ns(self, path: Path) -> int:
        """When the nearest folder above ``path`` that is still there last changed (its
        mtime): a log gone with its folder (a user's or kind's folder renamed, moved away and
        back, deleted) is in flux while the folder that lost it just changed. Only the log's
        own folder was looked at: gone too, the deletion was published at once, and a
        folder renamed and renamed back (a sync tool's move) left every record citing its
        entries stale for good."""
        for folder in path.parents:
            with suppress(OSError):  # gone, or a link that leads nowhere now
                return os.stat(folder).st_mtime_ns
            if folder == self.rt.root:
                break
        raise FileNotFoundError(errno.ENOENT, "the memory root is gone", str(self.rt.root))

    def _settled(self, jobs: list[_Job]) -> list[_Job]:
        """``jobs`` (in their order), each that drops entries from a log in flux
        (:meth:`_in_flux`) kept only once its log has stood still for
        :data:`settling.SETTLE_SECONDS` since it was read, else read and planned again; one
        wait serves them all. An editor that truncates a log and writes it anew, read between
        the two at an entry boundary, showed a clean log without its last entries: they were
        dropped, their deletion published (every record citing them stale for good, their
        cluster memberships gone) and then indexed again as new. A log still moving after
        :data:`settling.SETTLE_TRIES` waits keeps its entries (:meth:`_deletions_held`), and
        so does one that cannot be read again (an ``OSError``): both are synced again once
        they stand still. A person's deletion costs one wait."""
        out: dict[int, _Job] = dict(enumerate(jobs))
        waiting = [n for n, job in out.items() if self._in_flux(job)]
        for _ in range(settling.SETTLE_TRIES):
            if not waiting:
                break
            settling.pause(settling.SETTLE_SECONDS)
            moved, waiting = [n for n in waiting if self._changed_since_read(out[n])], []
            for n in moved:
                job = out.pop(n)
                try:
                    again = self._prepare_once(self.rt.root / job.rel)
                except OSError as exc:
                    # unreadable for now (permissions flipped, an editor's swap): held and
                    # retried like a log that never stands still; dropped, it waited for
                    # its next edit, and ``sync_path`` called it unchanged
                    log.warning("cannot read %s: %s", job.rel, exc)
                    out[n] = self._deletions_held(
                        job, f"it could not be read again: {os_reason(exc)}")
                    continue
                if again is not None:
                    out[n] = again
                    if self._in_flux(again):
                        waiting.append(n)
        for n in waiting:
            out[n] = self._deletions_held(out[n], STILL_WRITTEN)
        return [out[n] for n in sorted(out)]

    def _deletions_held(self, job: _Job, why: str) -> _Job:
        """``job`` without its deletions, its log marked unread (as :meth:`_narrowed` does):
        entries a log still being written does not hold yet stay indexed, and the next sync
        (the writer's own file event, the reconcile scan) plans it whole. ``why``: what
        ``status`` says of it meanwhile."""
        log.info("%s: %s: the %d entries it does not hold now stay indexed until it stands "
                 "still", job.rel, why, len(job.plan.deletes))
        plan = replace(job.plan, deletes=[])
        if job.stat is None:  # gone for now: the next scan finds it gone or back
            return replace(job, plan=plan, stat=(-1, 0, ""), partial=True, moving=True,
                           waits=why)
        return replace(job, plan=plan, partial=True, moving=True, waits=why)

    def _prepare_once(self, path: Path, *, tries: int = settling.SETTLE_TRIES) -> _Job | None:
        """Read and plan one file as it is now (:meth:`_prepare`); ``tries``: see
        :meth:`_read_whole`. A log that lost a problem its last sync recorded is to be
        rechecked (:attr:`_Job.recheck`)."""
        job = self._planned(path, tries)
        if job is not None and not job.only_stat and self._problem_gone(job):
            return replace(job, recheck=True)
        return job

    def _problem_gone(self, job: _Job) -> bool:
        """Whether a problem the last sync of ``job``'s log recorded is not among its problems
        now (by severity and words: an entry added below moves no line of them)."""
        row = self.rt.db().execute("SELECT problems FROM files WHERE path = ?",
                                   (job.rel,)).fetchone()
        try:
            before = json.loads(row[0]) if row is not None and row[0] else []
        except (TypeError, ValueError):
            return False
        now = {(p.severity, p.message) for p in job.plan.problems}
        return any(isinstance(p, dict) and (p.get("severity"), p.get("message")) not in now
                   for p in before)

    def _planned(self, path: Path, tries: int) -> _Job | None:
        """:meth:`_prepare_once` without the recheck."""
        located = self.rt.store.ref_for_path(path)
        if located is None:
            return None
        ref, kind, day = located
        rel = self.rt.store.rel(path)
        stored = self._stored_entries(rel)
        limits = self.rt.settings.limits
        unlisted = getattr(self._thread, "unlisted", None)  # a scan's, else asked here
        if rel in (unlisted if unlisted is not None else self._unlisted([rel])[0]):
            # under a folder this process may not list: no log is there for a rebuild
            # (:meth:`_unlisted`), though one may be read by its path. Asked for a sync out of
            # a scan too: a watcher's sync read it by its path and its rows came back,
            # searchable, until the next scan dropped them again
            return _Job(rel, ref, kind, SyncPlan(deletes=sorted(stored)), stat=None)
        if (problem := self.rt.store.link_problem(path)) is not None:
            return self._not_read(path, rel, ref, kind, stored, problem)
        try:
            st, data, read_ns = self._read_whole(path, tries)
        except OutsideRoot as exc:
            return self._not_read(path, rel, ref, kind, stored, exc.strerror)
        except PermissionError as exc:
            refused = self._refused(path, rel, ref, kind, stored, exc)
            if refused is None:  # its permissions may be changing: held, and tried again
                raise
            return refused
        except (FileNotFoundError, NotADirectoryError, NotRegularFile):
            # A folder or FIFO where the log was is no log, and neither is a path through a
            # file standing where its folder (``episodes``, ``users`` …) was: its entries go,
            # as a scan and a reindex (which list regular files only) see it. Kept, they
            # stayed searchable and clustered for good, and every Reflection run that picked
            # them failed on reading them. ``lint`` names what stands there.
            plan = SyncPlan(deletes=sorted(stored))
            return _Job(rel, ref, kind, plan, stat=None)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            # A symlink loop where the log goes (``ln -sf`` of the log onto itself, two logs
            # linked to each other) is no log either, as a scan's listing and a reindex see
            # it: kept, its entries stayed indexed while a reindex dropped them, and every
            # reconcile scan warned "cannot read" anew. ``lint`` and ``status`` name it.
            return _Job(rel, ref, kind, SyncPlan(deletes=sorted(stored)), stat=None)
        if data is None or len(data) > limits.max_file_bytes:
            size = max(st.st_size, len(data or b""))
            big = Diagnostic(rel, 0, f"file is {size:,} bytes, over limits.max_file_bytes "
                             f"({limits.max_file_bytes:,}); not read", severity="fatal")
            return _Job(rel, ref, kind, SyncPlan(problems=[big], fatal=True,
                                                 deletes=sorted(stored)),
                        (st.st_mtime_ns, st.st_size, ""), read_ns, ctime_ns=st.st_ctime_ns)
        stats = (st.st_mtime_ns, st.st_size, hashlib.sha256(data).hexdigest())

        row = self.rt.db().execute("SELECT sha256 FROM files WHERE path = ?", (rel,)).fetchone()
        model = self.rt.embedder.name
        if (
            row is not None
            and row["sha256"] == stats[2]
            and all(s.embed_model == model for s in stored.values())
        ):
            return _Job(rel, ref, kind, SyncPlan(), stats, read_ns, only_stat=True,
                        ctime_ns=st.st_ctime_ns)

        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad = Diagnostic(rel, *not_utf8(data, exc), severity="fatal")
            return _Job(rel, ref, kind, SyncPlan(problems=[bad], fatal=True,
                                                 deletes=sorted(stored)), stats, read_ns,
                        ctime_ns=st.st_ctime_ns)
        parsed = replace(self.rt.store.parse_text(text, rel,
                                                  max_entry_bytes=limits.max_entry_bytes),
                         kind=kind, day=day)
        return _Job(rel, ref, kind, plan_file_sync(stored, parsed, embed_model=model), stats,
                    read_ns, seqs=highest_seqs(text), ctime_ns=st.st_ctime_ns)

    def _refused(self, path: Path, rel: str, ref: UserRef, kind: Kind,
                 stored: dict[str, StoredEntry], exc: PermissionError) -> _Job | None:
        """The job of a log this process may not read (its mode, an ACL, another user's
        file) that stands still: it holds no entry, as a ``reindex`` reads it, and its
        problem is recorded for ``status`` and ``lint`` ("not read: Permission denied").
        Kept, its entries stayed searchable and clustered while a rebuild had none, and it
        was retried as a log still being written, for good. Its ``files`` row is marked
        (:data:`REFUSED_SIZE`) so that every scan tries it again: made readable, its entries
        come back and its owner's records are checked whole (:attr:`_Job.recheck`). None
        while its mode, owner or bytes changed within :data:`settling.JUST_WRITTEN_NS` (an
        editor's save may refuse it for a moment): held, and tried again, as before."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        if settling.just_written(max(st.st_mtime_ns, st.st_ctime_ns), time.time_ns()):
            return None
        problem = Diagnostic(rel, 0, f"not read: {os_reason(exc)}", severity="fatal")
        job = _Job(rel, ref, kind, SyncPlan(problems=[problem], fatal=True,
                                            deletes=sorted(stored)),
                   (st.st_mtime_ns, st.st_size, ""), refused=True)
        row = self.rt.db().execute("SELECT size, problems FROM files WHERE path = ?",
                                   (rel,)).fetchone()
        if (not stored and row is not None and row["size"] == REFUSED_SIZE
                and row["problems"] == json.dumps([asdict(problem)])):
            return replace(job, only_stat=True)  # refused as its last sync found it
        log.warning("cannot read %s: %s; its entries are out of the index until it can be",
                    rel, os_reason(exc))
        return job

    def _read_whole(self, path: Path, tries: int = settling.SETTLE_TRIES,
                    within: str | None = None,
                    ) -> tuple[os.stat_result, bytes | None, tuple[int, int]]:
        """The log's stats, its bytes (None: over ``limits.max_file_bytes``, not read) and
        when the read started and ended, from one read that found the file as its stats
        said, before and after: a log truncated or written while read (``cp backup.md``
        over it, an editor saving in place) is read again once it stood still
        (:data:`settling.SETTLE_SECONDS`). Read between the truncation and the new bytes,
        an old log's entries were planned as deleted and that deletion published at once
        (its mtime, taken before, said it had not moved for days). Still moving after
        :data:`settling.SETTLE_TRIES` waits (``tries`` reads; one: no wait, a look before
        the lock is taken): ``OSError`` naming it (the next sync reads it). ``within``: the
        root's real path, when the caller reads many logs (else looked up here)."""
        limit = self.rt.settings.limits.max_file_bytes
        within = os.path.realpath(self.rt.root) if within is None else within
        for _ in range(tries):
            started = time.time_ns()
            # a FIFO named like a log: OSError, never a hang; a symlink out of the root
            # swapped in since the check above: refused once open
            with open_regular(path, within=within) as fh:
                st = os.fstat(fh.fileno())  # stats first: a later write shows up as a change
                # Over the limit: reported, never read, so memory stays bounded by the limit.
                data = read_at_most(fh, limit + 1) if st.st_size <= limit else None
                after = os.fstat(fh.fileno())
            if data is None or (len(data) == st.st_size
                                and (after.st_mtime_ns, after.st_size)
                                == (st.st_mtime_ns, st.st_size)):
                return st, data, (started, time.time_ns())
            if tries > 1:
                settling.pause(settling.SETTLE_SECONDS)
        raise OSError(errno.EAGAIN, "it kept changing while it was read", str(path))

    # ------------------------------------------------------------------ writing

    def _sync(self, paths: list[Path], progress: Progress | None = None,
              wanted: frozenset[str] = frozenset(),
              ahead: Mapping[_Made, np.ndarray] | None = None,
              looked: _Looked | None = None,
              moving: list[Path] | None = None) -> list[FileSyncResult]:
        """Plan every file, embedding and writing in batches that span files. Changes a
        killed process synced but told no subscriber are handed over first (:meth:`_replay`).
        ``wanted``: see :meth:`sync_path`; ``looked``: see :meth:`_looked_ahead`; with
        ``moving``, a log a writer may still be at work on (changing while read, or in flux)
        is not waited for: its path is put there, unsynced, for the caller to sync once it
        let go of the lock (:meth:`scan`). A pass over many logs looks for hard-linked logs
        in one listing of the root, and what the change subscribers hold to its end is done
        once, after its last flush (:func:`events.one_pass`)."""
        self._for_newer = self._newer_parser() is not None
        with self.rt.store.one_listing(), events.one_pass(self.rt):
            return self._sync_listed(paths, progress, wanted, ahead or {}, looked, moving)

    def _sync_listed(self, paths: list[Path], progress: Progress | None,
                     wanted: frozenset[str], ahead: Mapping[_Made, np.ndarray],
                     looked: _Looked | None = None,
                     moving: list[Path] | None = None) -> list[FileSyncResult]:
        if not (self._quiet or self.rt.read_only):
            self._replay()
        results: list[FileSyncResult] = []
        batch: list[_Job] = []
        pending = 0
        unsettled: list[_Job] = []  # dropping entries from logs in flux (:meth:`_settled`)
        for path in paths:
            # a log the batch waited for ahead (:meth:`_looked_ahead`) is not waited for here
            waited = looked if looked is not None and path in looked.covered else None
            once = waited is not None or moving is not None  # no wait here
            try:
                job = self._prepare_once(path, tries=1 if once else settling.SETTLE_TRIES)
            except OSError as exc:  # unreadable now (permissions, a vanished dir): next scan
                job = None
                if moving is not None and exc.errno == errno.EAGAIN:
                    moving.append(path)
                else:
                    log.warning("cannot read %s: %s", path, exc)
                    # refused after a wait ahead too: said so, as under the lock it was
                    again = waited.refused.get(path) if waited is not None else None
                    results.append(self._not_read_now(path, exc, again))
            if job is not None and self._in_flux(job):
                if moving is not None and waited is None:
                    moving.append(path)
                    job = None
                elif waited is None:
                    unsettled.append(job)
                    job = None
                elif not waited.stood_still(path, self._changed_since_read):
                    # moving through the waits ahead, or written since: synced again later
                    job = self._deletions_held(job, waited.refused.get(path, STILL_WRITTEN))
            if job is not None:
                batch.append(self._narrowed(job, wanted) if wanted else job)
                pending += len(batch[-1].plan.embed)
                if pending >= self.flush_entries:
                    results += self._flush(batch, ahead)
                    batch, pending = [], 0
                    self._let_writers_in()
            if progress is not None:
                progress(1)
        if unsettled:  # one wait for all of them, after the others were read
            batch += [self._narrowed(job, wanted) if wanted else job
                      for job in self._settled(unsettled)]
        if batch:
            results += self._flush(batch, ahead)
        # Files the change subscribers wrote (an insight marked stale) are synced now, in this
        # pass; their own changes may cascade, a few rounds at most.
        for _ in range(4):
            written, self._written = sorted(self._written), set()
            if not written:
                break
            results += self._sync_written(written)
        if not self.rt.read_only:
            try:
                self._note_waiting(results)
            except sqlite3.Error as exc:  # what status says, not the sync: that is done
                log.warning("could not note the logs waiting to be synced again: %s", exc)
        return results

    def _note_waiting(self, results: list[FileSyncResult]) -> None:
        """Keep :func:`waiting_logs` as these results leave it: each log to be synced again
        (``moving``) noted with why, since when and how many syncs found it so; each synced
        otherwise taken off. A log that never stood still was retried by the watcher with
        nothing said anywhere a person looks."""
        conn = self.rt.db()
        held = {item["file"]: item for item in waiting_logs(conn)}
        before = dict(held)
        now = utcnow_iso()
        for result in results:
            if not result.moving:
                held.pop(result.path, None)
                continue
            seen = held.get(result.path)
            held[result.path] = {"file": result.path, "why": result.waits or STILL_WRITTEN,
                                 "since": seen["since"] if seen else now,
                                 "tries": (seen["tries"] if seen else 0) + 1}
        if held == before:
            return
        with transaction(conn):
            if held:
                conn.execute("INSERT OR REPLACE INTO index_meta (key, value) VALUES (?, ?)",
                             (WAITING_KEY, json.dumps(sorted(held.values(),
                                                             key=lambda i: i["file"]))))
            else:
                conn.execute("DELETE FROM index_meta WHERE key = ?", (WAITING_KEY,))

    def _not_read_now(self, path: Path, exc: OSError, why: str | None = None,
                      ) -> FileSyncResult:
        """The result of a log that could not be read now: said, not taken for a log that did
        not change (an ``add`` answered as indexed an Episode no search found), and to be
        synced again (``moving``), as a log unreadable when read again after a settle wait
        is: one refused at its first read (``chmod 000`` for a moment, then fixed) stayed out
        of the index until its next edit, and ``status`` did not name it."""
        try:
            rel = self.rt.store.rel(path)
        except ValueError:
            rel = str(path)
        reason = os_reason(exc)
        why = why or (reason if exc.errno == errno.EAGAIN else f"it could not be read: {reason}")
        conn = self.rt.db()
        with transaction(conn):  # marked unread: the reconcile scan plans it whatever its
            # stats (a ``chmod`` moves none), so it is read, and off ``status``, once it can be
            conn.execute("UPDATE files SET mtime_ns = -1, sha256 = '' WHERE path = ?", (rel,))
        return FileSyncResult(rel, not_read=reason, moving=True, waits=why)

    def _narrowed(self, job: _Job, wanted: frozenset[str]) -> _Job:
        """``job`` cut down to the ``wanted`` entries when the rest of its log is more than a
        batch of new texts; otherwise ``job`` itself (the rest costs one embedding call).
        Nothing but their upserts is written: no deletion, no archive mark, and the log's
        ``files`` row marked unread (``partial``), so the next sync of the log (the watcher's,
        or the scan's after the pause that let this writer in) plans it whole and finds those
        entries indexed."""
        rest = job.plan.embed - wanted
        if len(rest) <= self.flush_entries:
            return job
        plan = SyncPlan(upserts=[e for e in job.plan.upserts if e.id in wanted],
                        embed=job.plan.embed & wanted,
                        unparented=job.plan.unparented & wanted)
        return replace(job, plan=plan, partial=True)

    def _let_writers_in(self) -> bool:
        """Between two batches of a long sync, let go of the indexer while a writer someone
        waits for (an add answering) wants it, then take it back (:mod:`.handoff`); whether
        it did. Not during a reindex (the index is half-built: writes wait for the rebuild),
        nor in such a writer's own sync (the announcement it finds is its own: it stood aside
        for itself, its answer held up the whole pause), nor when this thread holds the lock
        more than once (letting go once would not free it)."""
        if not self._may_let_writers_in() or not handoff.someone_waiting(self.rt.index_dir):
            return False
        self._lock.release()
        try:
            handoff.wait_for_writers(self.rt.index_dir)
        finally:
            self._lock.acquire()
        return True

    def _may_let_writers_in(self) -> bool:
        return not (self._quiet or self._lock.lock_counter != 1
                    or getattr(self._thread, "announced", False))

    def _sync_written(self, paths: list[Path]) -> list[FileSyncResult]:
        jobs = [job for job in (self._prepare(p) for p in paths) if job is not None]
        return self._flush(jobs) if jobs else []

    def _flush(self, jobs: list[_Job],
               ahead: Mapping[_Made, np.ndarray] | None = None) -> list[FileSyncResult]:
        """Embed, write and publish ``jobs``; ``ahead``: vectors made before the lock was
        taken (:meth:`_embedded_ahead`), by log, id and text."""
        jobs = self._embed_current(jobs, ahead)
        self._write_vectors(jobs)
        notes = self._write_sqlite(jobs)
        self._publish(jobs, notes)
        return [_result(job) for job in jobs]

    @property
    def _skip(self) -> tuple[str, ...]:
        return () if self.notify_clusters else ("clustering",)

    def _publish(self, jobs: list[_Job], notes: list[int]) -> None:
        """Tell the change subscribers (after SQLite is written: they may read it), the whole
        flush at once, then drop the flush's publish notes (:meth:`_write_sqlite`). Paths they
        write are synced after this pass (:meth:`_sync`). ``notify_clusters=False`` (reindex,
        tiers syncing their own writes) publishes to nobody but the non-clustering
        subscribers, and reindex to nobody at all."""
        if self._quiet:
            return
        changes = [events.ChangeSet(job.ref, job.kind, job.rel, list(job.plan.upserts),
                                    dict(job.plan.deprecations), list(job.plan.deletes),
                                    job.vectors, recheck=job.recheck,
                                    unparented=frozenset(job.plan.unparented))
                   for job in jobs if not job.plan.empty or job.recheck]
        deferred: set[str] = set()
        self._written |= events.publish_many(self.rt, changes, skip=self._skip,
                                             deferred=deferred)
        self._settle_notes(notes, deferred)

    def _settle_notes(self, notes: list[int], deferred: set[str]) -> None:
        """The subscribers ran: drop the notes, or, when some put the changes off
        (:class:`events.Deferred`: provenance, while another check held its lock too long),
        keep them for those alone, handed over again by the next sync (:meth:`_replay`)."""
        if not deferred:
            self._forget_notes(notes)
        elif notes:
            skip = json.dumps(sorted(events.names() - deferred))
            conn = self.rt.db()
            with transaction(conn):
                conn.executemany("UPDATE publish_note SET skip = ? WHERE note_id = ?",
                                 [(skip, n) for n in notes])

    def _forget_notes(self, notes: list[int]) -> None:
        if notes:
            conn = self.rt.db()
            with transaction(conn):
                conn.executemany("DELETE FROM publish_note WHERE note_id = ?",
                                 [(n,) for n in notes])

    def _replay(self) -> None:
        """Hand the subscribers every change a process synced but was killed before telling
        them (its publish note is still there): the file reads as synced, so no scan would
        publish it again, and a task edited by hand left its lesson active, an Episode went
        unclustered, until something else of that owner changed. Each entry is handed over as
        the index holds it now (an entry changed again since is published by its own sync);
        the subscribers take a change twice as once (clustering finds it placed, provenance
        finds the records already marked)."""
        conn = self.rt.db()
        rows = conn.execute("SELECT * FROM publish_note ORDER BY note_id").fetchall()
        if not rows:
            return
        by_skip: dict[tuple[str, ...], tuple[list[events.ChangeSet], list[int]]] = {}
        for row in rows:
            change = self._replayed(row)
            changes, notes = by_skip.setdefault(tuple(json.loads(row["skip"])), ([], []))
            notes.append(row["note_id"])
            if change is not None:
                changes.append(change)
        log.warning("telling the change subscribers of %s an interrupted sync did not tell "
                    "them of, or that they put off", counted(len(rows), "synced file change"))
        for skip, (changes, notes) in by_skip.items():
            deferred: set[str] = set()
            self._written |= events.publish_many(self.rt, changes, skip=skip,
                                                 deferred=deferred)
            self._settle_notes(notes, deferred)

    def _replayed(self, row: Any) -> events.ChangeSet | None:
        """The change a publish note names, as the index holds it now (None: nothing left),
        with the entries the sync that wrote it found unparented (:attr:`SyncPlan.
        unparented`), those still as it indexed them."""
        try:
            kind = Kind(row["kind"])
        except ValueError:
            return None
        ref = UserRef(row["app_id"], row["project_id"], row["user_id"])
        key = (ref.app, ref.project, ref.user_id)
        indexed = {r["id"]: r for r in self.rt.db().execute(
            "SELECT id, content_hash, deprecated_by FROM entries WHERE app_id=? AND "
            "project_id=? AND user_id=? AND path=?", (*key, row["path"]))}
        wanted = set(json.loads(row["upserted"]))
        upserted: list[Entry] = []
        if wanted:
            try:
                parsed = self.rt.store.read(self.rt.root / row["path"]).entries
            except OSError:
                parsed = []
            upserted = [e for e in parsed if e.id in wanted and e.id in indexed
                        and indexed[e.id]["content_hash"] == e.content_hash]
        archived = {i: by for i, by in json.loads(row["archived"]).items()
                    if i in indexed and indexed[i]["deprecated_by"] == by}
        deleted = [i for i in json.loads(row["deleted"]) if i not in indexed]
        # which were narratives, as the sync that wrote the note knew it (the rows hold only
        # what they are now); NULL: a note from before the index kept it, not known
        noted = row["unparented"]
        unparented = None if noted is None else \
            frozenset(json.loads(noted)) & {e.id for e in upserted}
        return events.ChangeSet(ref, kind, row["path"], upserted, archived, deleted,
                                recheck=bool(row["recheck"]), unparented=unparented)

    def _embed_current(self, jobs: list[_Job],
                       ahead: Mapping[_Made, np.ndarray] | None = None) -> list[_Job]:
        """Attach every vector the flush's jobs need, as their logs stand when it ends.

        A single log can hold thousands of new Episodes (a history pasted in, an import):
        one flush of them is minutes of embedding, and an add someone waits for used to wait
        its full 10 s behind it and be answered ``indexed: false``. Such a flush is embedded
        in batches, letting a waiting writer in between two (:meth:`_let_writers_in`). The
        writer may have changed one of the flush's logs meanwhile (an add to the very log
        being read): then every job is read and planned again, against the index as the
        writer left it, and the vectors already made are kept for the texts that stay.
        """
        made: dict[_Made, np.ndarray] = dict(ahead or {})
        while not self._attach_vectors(jobs, made):
            jobs = [job for job in (self._prepare(self.rt.root / job.rel) for job in jobs)
                    if job is not None]
        return jobs

    def _changed_since_read(self, job: _Job) -> bool:
        """Whether ``job``'s log is no longer as it was read: its stats moved (a log refused
        as a link was stat'ed as the link itself, the others through it). A log read as gone
        changed only when a file is back at its name: a folder, FIFO or socket standing
        there is still no log (taken for the log coming back, it made a sync wait all its
        settle waits, the indexer locked, and then hold the entries)."""
        path = self.rt.root / job.rel
        if job.stat is None:
            try:
                return stat.S_ISREG(os.stat(path).st_mode)
            except OSError:
                return False
        seen = []
        for look in (os.stat, os.lstat):
            with suppress(OSError):
                st = look(path)
                seen.append((st.st_mtime_ns, st.st_size))
        return job.stat[:2] not in seen

    def _attach_vectors(self, jobs: list[_Job], made: dict[_Made, np.ndarray]) -> bool:
        """Embed new texts (``made`` keeps those done, by log, id and text); reuse stored
        vectors for metadata-only changes. False when a writer let in between two batches
        changed one of the jobs' logs: the jobs are out of date (:meth:`_embed_current`)."""
        for job in jobs:
            keep = [e.id for e in job.plan.upserts if e.id not in job.plan.embed]
            if keep:
                found = self.rt.vectors.get_vectors(job.kind, job.ref, keep)
                job.vectors.update(found)
                # a vector missing from LanceDB (lost, interrupted write) is simply re-made
                job.plan.embed.update(i for i in keep if i not in found)
        todo = {(job.rel, e.id, e.search_text): (job, e) for job in jobs
                for e in job.plan.upserts if e.id in job.plan.embed}
        keys = [key for key in todo if key not in made]
        if not self._may_let_writers_in():  # a reindex, an add's own sync: one call, as before
            if keys:
                made.update(zip(keys, self.rt.embedder.embed([k[2] for k in keys]),
                                strict=True))
        elif not self._embed_letting_writers_in(jobs, keys, made):
            return False
        for key, (job, entry) in todo.items():
            job.vectors[entry.id] = made[key]
        return True

    def _embed_letting_writers_in(self, jobs: list[_Job], keys: list[_Made],
                                  made: dict[_Made, np.ndarray]) -> bool:
        """Embed ``keys`` into ``made`` in calls of ``flush_entries`` texts, letting a waiting
        writer in between two calls and between two model calls inside one
        (:func:`~everos_reflect.embedding.base.pausing`): a call of 256 texts held an add for
        seconds. False when a writer let in changed one of the jobs' logs."""
        owner = threading.get_ident()
        let_in = False

        def pause() -> None:
            nonlocal let_in
            if threading.get_ident() == owner:  # the lock is this thread's to let go of
                let_in = self._let_writers_in() or let_in

        with pausing(pause):
            for start in range(0, len(keys), self.flush_entries):
                if start:
                    pause()
                if let_in:
                    if any(map(self._changed_since_read, jobs)):
                        return False
                    let_in = False
                part = keys[start:start + self.flush_entries]
                made.update(zip(part, self.rt.embedder.embed([k[2] for k in part]),
                                strict=True))
        return not (let_in and any(map(self._changed_since_read, jobs)))

    def _write_vectors(self, jobs: list[_Job]) -> None:
        """LanceDB before SQLite: if we stop in between, the files row is stale and redone."""
        model = self.rt.embedder.name
        rows: dict[Kind, list[dict[str, Any]]] = {}
        known: set[Kind] = set()  # kinds with a row the index already had
        for job in jobs:
            for entry in job.plan.upserts:
                rows.setdefault(job.kind, []).append(
                    vector_row(job.ref, entry, job.rel, job.vectors[entry.id], model)
                )
                if entry.id not in job.plan.new:
                    known.add(job.kind)
        for kind, kind_rows in rows.items():
            if self._fresh:
                self.rt.vectors.append(kind, kind_rows)
            else:
                self.rt.vectors.upsert(kind, kind_rows, new=kind not in known)
        marks: dict[Kind, list[tuple[UserRef, str, str | None]]] = {}
        for job in jobs:
            if job.plan.deletes:
                self.rt.vectors.delete(job.kind, job.ref, job.plan.deletes)
            marks.setdefault(job.kind, []).extend(
                (job.ref, entry_id, target) for entry_id, target in job.plan.deprecations.items())
        # one write per table for the whole flush (a batch of merges archives toward many
        # narratives in many files)
        for kind, kind_marks in marks.items():
            self.rt.vectors.set_deprecated_many(kind, kind_marks)

    def _write_sqlite(self, jobs: list[_Job]) -> list[int]:
        """Write the flush's rows; with them, in the same transaction, one publish note per
        changed file (unless nothing is published: reindex), the ids returned:
        :meth:`_publish` drops them once the subscribers ran, :meth:`_replay` hands over
        those a kill left."""
        conn = self.rt.db()
        model = self.rt.embedder.name
        now = utcnow_iso()
        notes: list[int] = []
        with transaction(conn):
            if not self._quiet:
                skip = json.dumps(list(self._skip))
                for job in jobs:
                    if job.plan.empty and not job.recheck:
                        continue
                    cur = conn.execute(
                        "INSERT INTO publish_note (path, app_id, project_id, user_id, kind, "
                        "upserted, archived, deleted, skip, created_at, recheck, unparented) "
                        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                        (job.rel, job.ref.app, job.ref.project, job.ref.user_id,
                         job.kind.value, json.dumps([e.id for e in job.plan.upserts]),
                         json.dumps(job.plan.deprecations), json.dumps(job.plan.deletes),
                         skip, now, int(job.recheck),
                         json.dumps(sorted(job.plan.unparented))))
                    notes.append(int(cur.lastrowid or 0))
            for job in jobs:
                key = (job.ref.app, job.ref.project, job.ref.user_id)
                if job.seqs:  # only ever raised: ids mentioned once are never reallocated
                    conn.executemany(_RAISE_WATERMARK,
                                     [(*key, stem, seq) for stem, seq in job.seqs.items()])
                if job.plan.upserts:
                    conn.executemany(
                        _UPSERT_ENTRY, [entry_row(job.ref, e, job.rel, model)
                                        for e in job.plan.upserts]
                    )
                conn.executemany(
                    "DELETE FROM entries WHERE app_id=? AND project_id=? AND user_id=? AND id=?",
                    [(*key, i) for i in job.plan.deletes],
                )
                conn.executemany(
                    "UPDATE entries SET deprecated_by=? "
                    "WHERE app_id=? AND project_id=? AND user_id=? AND id=?",
                    [(by, *key, i) for i, by in job.plan.deprecations.items()],
                )
                if job.partial:  # marked unread, as after a parser change: the next scan
                    # or sync plans it whole, and a scan still finds it gone if it is deleted
                    conn.execute(_UPSERT_FILE, (job.rel, *key, job.kind.value, -1,
                                                job.stat[1] if job.stat else 0, "", "[]", now,
                                                0, 0, None))
                elif job.stat is None:
                    conn.execute("DELETE FROM files WHERE path = ?", (job.rel,))
                elif job.refused:
                    if not job.only_stat:  # marked: every scan tries it again
                        problems = json.dumps([asdict(p) for p in job.plan.problems])
                        conn.execute(_UPSERT_FILE, (job.rel, *key, job.kind.value, -1,
                                                    REFUSED_SIZE, "", problems, now, 0, 0,
                                                    None))
                elif job.only_stat:
                    # the same bytes: the first read that found these stats still counts
                    conn.execute(_CONFIRM_FILE, (job.stat[0], job.stat[1], job.read_ns[1],
                                                 job.stat[0], job.stat[1], job.read_ns[0],
                                                 now, job.ctime_ns, job.rel))
                else:
                    problems = json.dumps([asdict(p) for p in job.plan.problems])
                    read = (-1, job.stat[1], "") if self._for_newer else job.stat
                    conn.execute(
                        _UPSERT_FILE, (job.rel, *key, job.kind.value, *read, problems, now,
                                       job.read_ns[0], job.read_ns[1], job.ctime_ns))
            episodes = [job for job in jobs if job.kind is Kind.EPISODE]
            audit.follow_moved_merges(  # the audit follows a folder renamed by hand
                conn, [(job.ref, e) for job in episodes for e in job.plan.upserts],
                [job.ref for job in episodes if job.plan.deletes],
                self.rt.store.user_gone)
            audit.follow_moved_derivations(
                conn, [(job.ref, e) for job in jobs for e in job.plan.upserts],
                [job.ref for job in jobs if job.plan.deletes], self.rt.store.user_gone)
            cursors.follow_moved(  # and what each tier consumed
                conn, [(e.id, e.text_hash) for job in jobs for e in job.plan.upserts],
                [job.ref for job in jobs if job.plan.deletes], self.rt.store.user_gone)
        return notes


#: ``index_meta`` key of the logs to be synced again once they stand still
#: (:func:`waiting_logs`): a JSON list, a handful of logs at most in practice.
WAITING_KEY = "waiting_logs"
#: Why a log waits whose reads kept finding it changed (:meth:`Indexer._deletions_held`).
STILL_WRITTEN = "it is still being written: it kept changing through every settle wait"


def waiting_logs(conn: Any) -> list[dict[str, Any]]:
    """The logs the last syncs found still being written or unreadable for a moment, to be
    synced again once they stand still: ``{"file", "why", "since", "tries"}`` each, by file
    (``status`` lists them). Empty when none, or when the index predates ``index_meta``."""
    try:
        row = conn.execute("SELECT value FROM index_meta WHERE key = ?",
                           (WAITING_KEY,)).fetchone()
    except sqlite3.OperationalError:  # no such table: migrated before 0021
        return []
    try:
        items = json.loads(row[0]) if row is not None else []
    except (TypeError, ValueError):
        return []
    return [i for i in items if isinstance(i, dict) and isinstance(i.get("file"), str)
            and isinstance(i.get("tries"), int)] if isinstance(items, list) else []


def recorded_parser_version(conn: Any) -> int | None:
    """The parser version ``index_meta`` records (None: none, from before versions were
    recorded, or not a number)."""
    try:
        row = conn.execute("SELECT value FROM index_meta WHERE key = ?",
                           (PARSER_VERSION_KEY,)).fetchone()
    except sqlite3.OperationalError:  # no such table: migrated before 0021
        return None
    try:
        return int(row[0]) if row is not None else None
    except (TypeError, ValueError):
        return None


def _record_parser_version(conn: Any) -> None:
    """Note in ``index_meta`` that the index is read with this parser (inside a transaction
    that makes it so)."""
    conn.execute("INSERT OR REPLACE INTO index_meta (key, value) VALUES (?, ?)",
                 (PARSER_VERSION_KEY, str(PARSER_VERSION)))


def _epoch_ns(iso: str) -> int:
    try:
        return int(datetime.fromisoformat(iso).timestamp() * 1e9)
    except (TypeError, ValueError):
        return 0  # unreadable: treat as racy, costing one re-hash


def _result(job: _Job) -> FileSyncResult:
    return FileSyncResult(
        path=job.rel,
        upserted=len(job.plan.upserts),
        embedded=len(job.plan.embed),
        deleted=len(job.plan.deletes),
        deprecations=len(job.plan.deprecations),
        problems=list(job.plan.problems),
        removed=job.stat is None,
        unchanged=job.only_stat,
        moving=job.moving,
        waits=job.waits,
    )


_RAISE_WATERMARK = """
INSERT INTO id_watermark (app_id, project_id, user_id, stem, seq) VALUES (?,?,?,?,?)
ON CONFLICT (app_id, project_id, user_id, stem) DO UPDATE SET seq = MAX(seq, excluded.seq)
"""

_UPSERT_ENTRY = """
INSERT OR REPLACE INTO entries (app_id, project_id, user_id, id, kind, path, owner_id, ts,
    timestamp, subject, text, parent_type, parent_id, session_id, sources, deprecated_by,
    content_hash, text_hash, embed_model)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""

_UPSERT_FILE = """
INSERT OR REPLACE INTO files (path, app_id, project_id, user_id, kind, mtime_ns, size, sha256,
    problems, synced_at, read_ns, still_since_ns, ctime_ns)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""

#: a log read again and found with the bytes it had: ``still_since_ns`` stays while its stats
#: are the same (the expressions see the row as it was), else it starts at this read
_CONFIRM_FILE = """
UPDATE files SET still_since_ns = CASE WHEN mtime_ns = ? AND size = ? AND still_since_ns > 0
    THEN still_since_ns ELSE ? END, mtime_ns = ?, size = ?, read_ns = ?, synced_at = ?,
    ctime_ns = ?
WHERE path = ?
"""


def _timestamp_fields(entry: Entry) -> tuple[float | None, str | None]:
    ts = entry.timestamp
    if ts is None:
        raw = entry.meta.get("timestamp")
        return None, str(raw) if raw is not None else None
    return ts.timestamp(), format_timestamp(ts, fraction=True)  # as the log has it


def entry_row(ref: UserRef, entry: Entry, rel: str, model: str) -> tuple[Any, ...]:
    """The ``entries`` row of ``entry``, in the column order of the upsert."""
    ts, stamp = _timestamp_fields(entry)
    owner = entry.meta.get("owner_id")
    return (
        ref.app, ref.project, ref.user_id, entry.id, entry.kind.value, rel,
        str(owner) if owner is not None else None, ts, stamp, entry.subject, entry.content,
        entry.parent_type, entry.parent_id, entry.session_id, json.dumps(entry.sources),
        entry.deprecated_by, entry.content_hash, entry.text_hash, model,
    )


def vector_row(
    ref: UserRef, entry: Entry, rel: str, vector: np.ndarray, model: str
) -> dict[str, Any]:
    """The LanceDB row of ``entry``."""
    ts, stamp = _timestamp_fields(entry)
    return {
        "id": entry.id,
        "app_id": ref.app,
        "project_id": ref.project,
        "user_id": ref.user_id,
        "kind": entry.kind.value,
        "ts": ts,
        "timestamp": stamp,
        "subject": entry.subject,
        # VectorIndex requires a non-empty text; a hand-written entry may have only a Subject
        "text": entry.content or entry.search_text,
        "parent_type": entry.parent_type,
        "parent_id": entry.parent_id,
        "session_id": entry.session_id,
        "sources": entry.sources,
        "deprecated_by": entry.deprecated_by,
        "content_hash": entry.content_hash,
        "path": rel,
        "embed_model": model,
        "vector": vector,
    }
