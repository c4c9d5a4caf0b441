"""Keep the index live: file events (debounced) plus a periodic reconcile scan and compaction.

A thin loop around pure decisions. Only the folders that can hold logs are watched
(:func:`watched_folders`: every top-level folder but ``.index/``, plus the root itself without
recursion to see new ones), so the index's own constant writes never reach Python at all; a
daily log that is a symlink has the folder of the file it leads to watched too, when that is
inside the root and not watched yet (:func:`link_targets`): an edit there names only that file.
So has a folder on a log's path that is a symlink (an app, project, ``users``, user or kind
folder: :func:`linked_folders`), and the events of the folder it leads to are read as events of
the link's paths too (:func:`through_links`).
:func:`plan_events` turns raw filesystem events into the set of daily-log files to sync,
ignoring the store's temp files and anything that is not Markdown. The :class:`Watcher` thread
does the rest: it waits for events to settle, syncs the planned files one by one (a broken file
is logged, never fatal), runs a full :meth:`Indexer.scan` every ``reconcile_interval`` to catch
whatever events were missed (or made while nothing ran), and ``VectorIndex.optimize()`` every
``optimize_interval``. All of that runs on the one worker thread, so a scan or a compaction
never overlaps itself.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer

from everos_reflect.index.sync import Indexer, ScanReport
from everos_reflect.model import Kind
from everos_reflect.problem_words import counted

if TYPE_CHECKING:
    from everos_reflect.runtime import Runtime

log = logging.getLogger(__name__)

INDEX_DIR = ".index"
_RELEVANT = {"created", "modified", "deleted", "moved", "closed", "attrib"}
#: The events every watch asks for: what changes a file's content, whether it may be read
#: ("attrib": a ``chmod``, which moves none of the stats a scan compares, so a log made
#: unreadable kept its entries indexed, and one made readable again waited for the next
#: reconcile scan) or a folder's place. Not "opened" nor "closed_no_write": on Linux each
#: read of a log raised two events (the indexer's own reads of a sync too), and each woke
#: the worker for a pass and pushed a real edit's debounce further back, under a reader's
#: load for up to 10x the debounce. A read raises no "attrib".
CONTENT_EVENTS: list[type[FileSystemEvent]] = [
    FileCreatedEvent, FileModifiedEvent, FileDeletedEvent, FileMovedEvent, FileClosedEvent,
    FileAttribEvent, DirCreatedEvent, DirDeletedEvent, DirMovedEvent]


#: The longest wait before a log that keeps moving is synced again (:func:`retry_delay`).
RETRY_MAX_SECONDS = 300.0


def retry_delay(tries: int, debounce: float) -> float:
    """How long to wait before syncing again a log that ``tries`` syncs in a row found still
    moving: the debounce, doubled at each try, at most :data:`RETRY_MAX_SECONDS`. Retried
    every debounce, a log that never stands still held the indexer for its settle waits
    (seconds) at each try, for good, and every ``add`` waited behind it."""
    return min(debounce * 2.0 ** max(0, min(tries - 1, 64)), RETRY_MAX_SECONDS)


@dataclass
class _Retry:
    """A log to sync again once it may stand still (:meth:`Watcher._again_when_still`)."""

    tries: int
    due: float  # monotonic


@dataclass(frozen=True)
class FsEvent:
    """The part of a watchdog event the planner needs (plain data, easy to build in tests)."""

    type: str  # created | modified | deleted | moved | closed | opened | ...
    path: str
    dest: str | None = None
    is_directory: bool = False

    @classmethod
    def of(cls, event: FileSystemEvent) -> FsEvent:
        dest = getattr(event, "dest_path", "") or None
        return cls(event.event_type, _text(event.src_path), _text(dest) if dest else None,
                   event.is_directory)


def _text(path: str | bytes) -> str:
    return path.decode() if isinstance(path, bytes) else path


def is_log_candidate(path: Path, root: Path) -> bool:
    """A Markdown file inside the root, outside ``.index/``, not hidden or temporary.

    The store writes ``.<name>.<random>.tmp`` and renames it over the file: the temp file is
    ignored, the rename's destination is not.
    """
    try:
        rel = path.relative_to(root)
    except ValueError:
        return False
    if not rel.parts or rel.parts[0] == INDEX_DIR:
        return False
    return path.suffix == ".md" and not path.name.startswith(".")


def watched_folders(root: Path) -> list[Path]:
    """The folders to watch recursively: every top-level folder of the root that may hold
    ``<app>/...`` logs. Not ``.index/`` (SQLite and LanceDB write there all the time: watching
    it queued thousands of events under search load and delayed edits by seconds), no hidden
    folder (app ids never start with a dot) and no symlink (it may lead out of the root)."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return []
    return sorted(Path(e.path) for e in entries
                  if not e.name.startswith(".") and e.is_dir(follow_symlinks=False))


def top_folders_touched(events: Iterable[FsEvent], root: Path) -> set[Path]:
    """The folders directly under the root that were created, moved (either end) or deleted:
    each needs its watch made anew if it is there now, or dropped if not (and a rescan for what
    was written before it was watched).

    What is there now decides, not the order of the events: a folder deleted and made again in
    one burst (``git checkout``, ``rm -rf`` then a restore) has a dead watch (gone with the old
    folder), and the event of that watch's end may come after the one of its creation (two
    watches, two threads). Counted as both added and gone, it was neither: it kept the dead
    watch, and no edit in it reached the index before a reconcile scan, for as long as the
    daemon ran."""
    root = Path(root)
    out: set[Path] = set()
    for event in events:
        if not event.is_directory or event.type not in {"created", "moved", "deleted"}:
            continue
        for raw in (event.path, event.dest):
            if raw and Path(raw).parent == root and not Path(raw).name.startswith("."):
                out.add(Path(raw))
    return out


def plan_events(events: Iterable[FsEvent], root: Path) -> set[Path]:
    """The daily-log files whose index must be refreshed after ``events``.

    A move counts for both ends: the source is gone, the destination is new. Whether a
    candidate is really a daily log (right folder, right name) is the indexer's call.
    """
    root = Path(root)
    out: set[Path] = set()
    for event in events:
        if event.is_directory or event.type not in _RELEVANT:
            continue
        for raw in (event.path, event.dest):
            if raw and is_log_candidate(Path(raw), root):
                out.add(Path(raw))
    return out


def may_hold_logs(folder: Path, root: Path) -> bool:
    """A folder inside the root, outside ``.index/``, that may hold daily logs: any but the
    root's own hidden folders (app ids never start with a dot). Below them a dot is normal:
    ``.atomic_facts``, ``.insights`` and the other derived tiers live in hidden folders."""
    try:
        rel = folder.relative_to(root)
    except ValueError:
        return False
    return bool(rel.parts) and not rel.parts[0].startswith(".")


def wants_rescan(events: Iterable[FsEvent], root: Path) -> bool:
    """A folder under the root was moved or deleted: its files sent no events of their own
    (a folder moved out of the root is one "deleted" event, and nothing for its files)."""
    root = Path(root)
    for event in events:
        if event.is_directory and event.type in {"moved", "deleted"}:
            for raw in (event.path, event.dest):
                if raw and may_hold_logs(Path(raw), root):
                    return True
    return False


def link_targets(links: Iterable[Path], root: Path,
                 resolve: Callable[[str], str] = os.path.realpath) -> dict[Path, set[Path]]:
    """The file each symlinked daily log leads to (spelled under ``root``, as the watcher's
    events name it) → the logs leading there. Editing that file raises events for it alone,
    never for the link. A link leading out of the root is left out (it is never read: the
    indexer reports it), and so is one into ``.index/``: nothing there is watched."""
    root = Path(root)
    real_root = resolve(str(root))
    out: dict[Path, set[Path]] = {}
    for link in links:
        real = resolve(str(link))
        if not real.startswith(real_root + os.sep):
            continue
        rel = Path(os.path.relpath(real, real_root))
        if rel.parts[0] != INDEX_DIR:
            out.setdefault(root / rel, set()).add(Path(link))
    return out


def plan_link_events(events: Iterable[FsEvent], logs_by_target: dict[Path, set[Path]]
                     ) -> set[Path]:
    """The symlinked daily logs whose target ``events`` changed (either end of a move: the
    store writes through a link by renaming a temp file over its target)."""
    out: set[Path] = set()
    for event in events:
        if event.is_directory or event.type not in _RELEVANT:
            continue
        for raw in (event.path, event.dest):
            if raw:
                out |= logs_by_target.get(Path(raw), set())
    return out


#: The folders below the root on a daily log's path: ``<app>/<project>/users/<user>/<kind>``.
_LAYOUT_DEPTH = 5
_KIND_FOLDERS = frozenset(kind.folder for kind in Kind)


def _on_log_path(depth: int, name: str) -> bool:
    """Whether a folder ``name`` at ``depth`` below the root is where the store looks for
    logs (``MarkdownStore.iter_files``): apps, projects and users not hidden, then ``users``,
    then the kinds' folders (hidden ones among them: ``.atomic_facts``)."""
    if depth == 2:
        return name == "users"
    if depth == 4:
        return name in _KIND_FOLDERS
    return not name.startswith(".")


def linked_folders(root: Path, resolve: Callable[[str], str] = os.path.realpath
                   ) -> dict[Path, set[Path]]:
    """The folder each symlinked folder on a log's path leads to (an app, project, ``users``,
    user or kind folder; spelled under ``root``, as the watcher's events name it) → the links
    leading there. The store reads logs through such a link, but a write through it raises
    events for the folder it leads to alone. A link leading out of the root is left out (the
    store never reads through it, SPEC's path safety) and so is one into ``.index/``; a link
    to the root itself or a loop leads nowhere to watch."""
    root = Path(root)
    real_root = resolve(str(root))
    out: dict[Path, set[Path]] = {}
    level = [str(root)]
    for depth in range(_LAYOUT_DEPTH):
        below = []
        for folder in level:
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                if not _on_log_path(depth, entry.name):
                    continue
                try:
                    if not entry.is_dir():
                        continue
                except OSError:  # a symlink loop
                    continue
                if entry.is_symlink():
                    real = resolve(entry.path)
                    if not real.startswith(real_root + os.sep):
                        continue  # out of the root, or the root itself
                    rel = Path(os.path.relpath(real, real_root))
                    if rel.parts[0] == INDEX_DIR:
                        continue
                    out.setdefault(root / rel, set()).add(Path(entry.path))
                below.append(entry.path)
        level = below
    return out


def through_links(events: Iterable[FsEvent], links_by_target: dict[Path, set[Path]]
                  ) -> list[FsEvent]:
    """``events`` as the paths through symlinked folders name them (:func:`linked_folders`):
    an event in a folder a link leads to, once more for each link leading there."""
    out: list[FsEvent] = []
    if not links_by_target:
        return out

    def spellings(raw: str | None) -> list[str | None]:
        if not raw:
            return [raw]
        path = Path(raw)
        found = [str(link / path.relative_to(target))
                 for target in (path, *path.parents) if target in links_by_target
                 for link in sorted(links_by_target[target])]
        return found or [raw]

    for event in events:
        pairs = {(src, dest) for src in spellings(event.path) for dest in spellings(event.dest)}
        pairs.discard((event.path, event.dest))
        out += [FsEvent(event.type, src or event.path, dest, event.is_directory)
                for src, dest in sorted(pairs, key=str)]
    return out


def _at_folder_position(path: Path, root: Path) -> bool:
    """Whether ``path`` is where an app, project, ``users``, user or kind folder goes."""
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        return False
    return 0 < len(parts) <= _LAYOUT_DEPTH and all(
        _on_log_path(depth, name) for depth, name in enumerate(parts))


def relinks(events: Iterable[FsEvent], root: Path) -> bool:
    """A symlink to a folder was made (or moved into place), or a file (a symlink is one to
    the file system's events) left where a folder of the logs' layout goes: the logs reached
    through it are new to the index or gone from it, and the folders watched for it change.
    Whether what left was a link cannot be asked any more; such a file is one in practice."""
    for event in events:
        if event.is_directory:
            continue
        if event.type in {"created", "moved"}:
            raw = event.dest or event.path
            if os.path.islink(raw) and os.path.isdir(raw):
                return True
        if event.type in {"deleted", "moved"} and _at_folder_position(Path(event.path), root):
            return True
    return False


class _Collector(FileSystemEventHandler):
    def __init__(self, sink: Callable[[FsEvent], None]) -> None:
        self._sink = sink

    def on_any_event(self, event: FileSystemEvent) -> None:
        self._sink(FsEvent.of(event))


class Watcher:
    """Watches one root and keeps its index in sync until :meth:`stop`.

    Usable as a context manager. Intervals default to ``settings.index``; ``0`` disables the
    periodic reconcile scan or the periodic optimize.
    """

    def __init__(
        self,
        runtime: Runtime,
        *,
        indexer: Indexer | None = None,
        debounce: float | None = None,
        reconcile_interval: float | None = None,
        optimize_interval: float | None = None,
        scan_on_start: bool = True,
        on_index_rebuilt: Callable[[], None] | None = None,
    ) -> None:
        cfg = runtime.settings.index
        self.rt = runtime
        self.indexer = indexer or Indexer(runtime)
        self.debounce = cfg.watch_debounce_seconds if debounce is None else debounce
        self.reconcile_interval = (
            cfg.reconcile_interval_seconds if reconcile_interval is None else reconcile_interval
        )
        self.optimize_interval = (
            cfg.optimize_interval_seconds if optimize_interval is None else optimize_interval
        )
        self.scan_on_start = scan_on_start
        #: called after the index was rebuilt, having been deleted while watched (``serve``
        #: advertises itself again in the new ``.index``)
        self.on_index_rebuilt = on_index_rebuilt
        self._index_lost = False  # told by the runtime: rebuild at the next pass
        self._events: list[FsEvent] = []
        self._first_event_at: float | None = None
        self._last_event_at = 0.0
        self._mutex = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._observer: Observer | None = None  # type: ignore[valid-type]
        self._watches: dict[Path, object] = {}  # top-level folder -> its recursive watch
        #: file a symlinked log leads to -> the logs leading there (:func:`link_targets`)
        self._link_logs: dict[Path, set[Path]] = {}
        #: folder of such a file that no other watch covers -> its watch (not recursive)
        self._target_watches: dict[Path, object] = {}
        #: folder a symlinked folder on a log's path leads to -> the links (linked_folders)
        self._folder_links: dict[Path, set[Path]] = {}
        #: such a folder that no other watch covers -> its watch (recursive)
        self._folder_watches: dict[Path, object] = {}
        #: log (relative path) -> when to sync it again, having been found still moving
        self._retries: dict[str, _Retry] = {}
        #: incremented after every pass of the worker loop; lets callers wait for progress
        self.passes = 0
        self._gone = False  # the root was moved or deleted (last seen)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        if self._thread is not None:
            return
        self.rt.root.mkdir(parents=True, exist_ok=True)
        self.rt.check_root()  # pins the folder's identity: a later move is seen as one
        observer = Observer()
        self._collector = _Collector(self._on_event)
        observer.schedule(self._collector, str(self.rt.root), recursive=False,
                          event_filter=CONTENT_EVENTS)
        observer.daemon = True
        observer.start()
        self._observer = observer
        for folder in watched_folders(self.rt.root):
            self._watch(folder)
        self._stopping.clear()
        self.rt.index_keeper = self._on_index_lost
        self._thread = threading.Thread(target=self._run, name="everos-watcher", daemon=True)
        self._thread.start()

    def _watch(self, folder: Path) -> None:
        if folder in self._watches or self._observer is None or not folder.is_dir() \
                or folder.is_symlink():
            return
        self._watches[folder] = self._observer.schedule(
            self._collector, str(folder), recursive=True, event_filter=CONTENT_EVENTS)

    def _unwatch(self, folder: Path) -> None:
        watch = self._watches.pop(folder, None)
        if watch is not None and self._observer is not None:
            with contextlib.suppress(KeyError, OSError):  # already gone with its folder
                self._observer.unschedule(watch)

    @property
    def watched(self) -> list[Path]:
        """The folders watched recursively right now (the root itself is watched alone)."""
        return sorted(self._watches)

    @property
    def watched_targets(self) -> list[Path]:
        """The folders watched for where symlinks lead: alone for the files symlinked logs
        lead to, recursively for the folders symlinked folders lead to."""
        return sorted({*self._target_watches, *self._folder_watches})

    def _follow_folder_links(self) -> None:
        """Watch, recursively, where symlinked folders on the logs' paths lead, unless a
        watch covers it already (:func:`linked_folders`); drop the watches of links gone."""
        self._folder_links = linked_folders(self.rt.root)
        wanted = {t for t in self._folder_links if not self._covered(t)}
        wanted = {t for t in wanted if not any(p in wanted for p in t.parents)}
        for folder in set(self._folder_watches) - wanted:
            watch = self._folder_watches.pop(folder)
            if self._observer is not None:
                with contextlib.suppress(KeyError, OSError):
                    self._observer.unschedule(watch)
        for folder in sorted(wanted - set(self._folder_watches)):
            if self._observer is not None and folder.is_dir():
                with contextlib.suppress(OSError):  # gone meanwhile: the next scan looks again
                    self._folder_watches[folder] = self._observer.schedule(
                        self._collector, str(folder), recursive=True,
                        event_filter=CONTENT_EVENTS)

    def _follow_links(self, links: Iterable[Path], *, every: bool) -> None:
        """Watch where symlinked logs lead: ``links`` are ``every`` symlinked log (a scan's
        listing, which replaces what was known) or new ones (seen in events)."""
        found = link_targets(links, self.rt.root)
        if every:
            self._link_logs = found
        else:
            for target, logs in found.items():
                self._link_logs.setdefault(target, set()).update(logs)
        wanted = {t.parent for t in self._link_logs if not self._covered(t.parent)}
        for folder in set(self._target_watches) - wanted:
            watch = self._target_watches.pop(folder)
            if self._observer is not None:
                with contextlib.suppress(KeyError, OSError):
                    self._observer.unschedule(watch)
        for folder in sorted(wanted - set(self._target_watches)):
            if self._observer is not None and folder.is_dir():
                with contextlib.suppress(OSError):  # gone meanwhile: the next scan looks again
                    self._target_watches[folder] = self._observer.schedule(
                        self._collector, str(folder), recursive=False,
                        event_filter=CONTENT_EVENTS)

    def _covered(self, folder: Path) -> bool:
        """Whether events of files in ``folder`` already come: the root's own watch, or the
        recursive watch of its top-level folder."""
        if folder == self.rt.root:
            return True
        top = self.rt.root / folder.relative_to(self.rt.root).parts[0]
        return top in self._watches

    def stop(self, timeout: float = 30.0) -> None:
        """Stop watching; a sync or scan in progress finishes first."""
        self._stopping.set()
        self._wake.set()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout)
            self._observer = None
            self._watches.clear()
            self._target_watches.clear()
            self._folder_watches.clear()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        if self.rt.index_keeper == self._on_index_lost:
            self.rt.index_keeper = None
            self.rt.index_rebuilt()  # nobody waits for a rebuild that will not come

    def __enter__(self) -> Watcher:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ the loop

    def _on_event(self, event: FsEvent) -> None:
        now = time.monotonic()
        with self._mutex:
            self._events.append(event)
            self._last_event_at = now
            if self._first_event_at is None:
                self._first_event_at = now
        self._wake.set()

    def _take_settled(self, now: float) -> tuple[list[FsEvent], float | None]:
        """Events once quiet for ``debounce`` (or pending for 10× that); else when to look."""
        with self._mutex:
            if not self._events or self._first_event_at is None:
                return [], None
            due = min(self._last_event_at + self.debounce,
                      self._first_event_at + 10 * self.debounce)
            if now < due:
                return [], due
            events, self._events, self._first_event_at = self._events, [], None
            return events, None

    def _run(self) -> None:
        try:
            self._loop()
        finally:
            self.rt.close()  # this thread's SQLite connection

    def _loop(self) -> None:
        now = time.monotonic()
        never = float("inf")
        next_scan = _first_due(now, self.reconcile_interval, immediately=self.scan_on_start)
        next_optimize = _first_due(now, self.optimize_interval, immediately=False)
        while not self._stopping.is_set():
            now = time.monotonic()
            events, events_due = self._take_settled(now)
            events += self._take_retries(now)
            was_gone = self._gone
            here = self._root_here()
            if here and was_gone:  # what changed while it was away sent no event here
                next_scan = now
            if here and events_due is None:  # not amid a burst (an `rm -rf` under way)
                self.rt.check_index()  # one stat; tells _on_index_lost when it is gone
            if here and self._index_lost:
                self._rebuild_index()
            if events and here and not (self._index_lost or self.rt.index_lost()):
                # else the index went (an ``rm -rf`` or ``mv`` of ``.index`` under way): the
                # rebuild once the burst is over reads every log again, and syncing now made
                # ``.index/locks`` again under the rm (or failed for want of it)
                self._sync_events(events)
            if now >= next_scan:
                if here:
                    self._guarded("reconcile scan", self._scan)
                next_scan = now + self.reconcile_interval if self.reconcile_interval > 0 else never
            if now >= next_optimize:
                if here:
                    self._guarded("index optimize", self.rt.vectors.optimize)
                next_optimize = now + self.optimize_interval
            self.passes += 1
            retry_due = min((r.due for r in self._retries.values()), default=never)
            due = min(events_due or never, retry_due, next_scan, next_optimize)
            self._wake.wait(timeout=min(max(0.0, due - time.monotonic()), 60.0))
            self._wake.clear()

    def _root_here(self) -> bool:
        """False while the root folder is moved or deleted (said once, and again when it is
        back): nothing is synced, scanned or compacted meanwhile. The indexer's lock and
        LanceDB's recreated ``<root>/.index`` at the old path every reconcile interval (an
        empty folder other commands then took for the root), and each pass logged a
        traceback."""
        gone = self.rt.root_gone()
        if gone != self._gone:
            self._gone = gone
            if gone:
                log.warning("the memory root %s was moved or deleted: not indexing until it "
                            "is back", self.rt.root)
            else:
                log.info("the memory root %s is back: indexing again", self.rt.root)
        return not gone

    def _on_index_lost(self) -> None:
        """The runtime found the index deleted or replaced (on any thread) and let go of its
        handles: rebuild it at the next pass, now."""
        self._index_lost = True
        self._wake.set()

    def _rebuild_index(self) -> None:
        """Rebuild the index from the Markdown, as ``reindex`` does; requests wait for it
        meanwhile (:meth:`Runtime.wait_index`). Whatever was written into the deleted files
        since it went is in the Markdown too, so nothing is lost."""
        self._index_lost = False
        if not self._root_here():
            # the root moved (or went) and took its index along, found before the root was:
            # the scan when the root is back reopens the index it holds then and catches up
            self.rt.index_rebuilt()
            return
        log.warning("the index %s was deleted or replaced while in use: rebuilding it from the "
                    "Markdown", self.rt.index_dir)
        try:
            report = self.indexer.reindex()
            self._after_scan(report)
            self._follow_links(self.indexer.symlinked_logs, every=True)
            self._follow_folder_links()
        except Exception:
            if not self._root_here():  # moved away while rebuilding: said as such, above
                return
            log.exception("rebuilding the index failed; the reconcile scan goes on from what "
                          "was rebuilt")
            return
        finally:
            self.rt.index_rebuilt()
        log.info("index rebuilt: %d entries from %d logs in %.1f s",
                 report.entries_upserted, report.files_synced, report.seconds)
        if self.on_index_rebuilt is not None:
            self._guarded("after the index rebuild", self.on_index_rebuilt)

    def _sync_events(self, events: list[FsEvent]) -> None:
        events = events + through_links(events, self._folder_links)
        touched = top_folders_touched(events, self.rt.root)
        for folder in sorted(touched):  # a watch on that path may be the old folder's
            self._unwatch(folder)
            self._guarded(f"watching {folder}", lambda f=folder: self._watch(f))
        if touched or wants_rescan(events, self.rt.root) or relinks(events, self.rt.root):
            self._guarded("rescan after a folder change", self._scan)
            return
        planned = plan_events(events, self.rt.root)
        # a log made a link (or linked elsewhere) now: followed from this edit on
        self._guarded("following symlinked logs", lambda: self._follow_links(
            [p for p in planned if p.is_symlink()], every=False))
        paths = sorted(planned | plan_link_events(events, self._link_logs))
        if not paths:
            return
        # One batch: one embedding call and one index write per kind for a burst (a folder
        # copied in, a `git pull`); synced one by one, 500 logs took 22 s instead of 1.3 s.
        try:
            results = self.indexer.sync_paths(paths)
        except Exception as exc:  # one bad file must not hold up the others: each on its own
            if self._locks_gone(exc):
                return
            log.exception("sync of %s failed; syncing them one by one",
                          counted(len(paths), "file"))
            results = []
            for path in paths:
                self._guarded(f"sync of {path}",
                              lambda p=path: results.append(self.indexer.sync_path(p)))
        self._again_when_still({r.path: r.waits for r in results if r.moving},
                               [r.path for r in results if not r.moving])

    def _again_when_still(self, waiting: Mapping[str, str], synced: Iterable[str]) -> None:
        """Sync again each log a sync found still being written after every settle wait, or
        unreadable for a moment (not read, or its missing entries held): ``waiting``, by
        file, with why; after :func:`retry_delay`: the debounce, then twice as long at each
        try that finds it so again. Its writer's own file events usually bring it back, but
        none may come: the writer was done by then, or its writes raise none (a network
        share, ``mmap``), and the log stayed unsynced until another edit or the reconcile
        scan. A log ``synced`` otherwise is off the list. The one hand-off of the watcher's
        syncs, its scans and its rebuilds: a log a reconcile scan found moving was left to
        the next scan, minutes later. ``status`` says which logs wait, and why
        (:func:`~everos_reflect.index.sync.waiting_logs`)."""
        now = time.monotonic()
        for path in synced:
            self._retries.pop(path, None)
        for path, why in waiting.items():
            seen = self._retries.get(path)
            tries = seen.tries + 1 if seen is not None else 1
            delay = retry_delay(tries, self.debounce)
            self._retries[path] = _Retry(tries, now + delay)
            log.info("%s: %s: syncing it again in %g s (try %d)", path,
                     why or "still being written", delay, tries)

    def _after_scan(self, report: ScanReport) -> None:
        """Hand the logs a whole-root scan or rebuild found moving to the retries
        (:meth:`_again_when_still`). Every other log waiting was synced by it: a log held
        is marked unread, so the scan plans it whatever its stats."""
        self._again_when_still(report.waiting,
                               [p for p in list(self._retries) if p not in report.waiting])

    def _take_retries(self, now: float) -> list[FsEvent]:
        """Events for the logs whose retry is due. One taken is due again after its next
        delay, in case its sync never answers (it failed): the sync's result sets when, or
        takes it off."""
        events = []
        for rel, retry in self._retries.items():
            if retry.due <= now:
                events.append(FsEvent("modified", str(self.rt.root / rel)))
                retry.due = now + retry_delay(retry.tries + 1, self.debounce)
        return events

    def _scan(self) -> None:
        """A reconcile scan; its listing says which logs are symlinks, and where they lead,
        and the logs it found moving are retried (:meth:`_after_scan`)."""
        self._after_scan(self.indexer.scan())
        self._follow_links(self.indexer.symlinked_logs, every=True)
        self._follow_folder_links()

    def _guarded(self, what: str, work: Callable[[], object]) -> None:
        """Run one unit of work; a failure is logged and the watcher goes on.

        An ``rm -rf .index`` under way removes ``.index/locks`` before ``system.db``: work
        started then fails for want of the indexer's lock file while the index does not look
        lost yet, and logged an ERROR with a traceback for what the next pass handles (it
        finds the index gone and rebuilds it). That is said in one line instead."""
        try:
            work()
        except Exception as exc:
            if not self._locks_gone(exc):
                log.exception("%s failed", what)

    def _locks_gone(self, exc: Exception) -> bool:
        """Whether ``exc`` is the indexer's lock file missing with its folder (see
        :meth:`_guarded`); if so, it is said in one line."""
        locks = self.rt.index_dir / "locks"
        if not isinstance(exc, FileNotFoundError) or Path(exc.filename or "").parent != locks:
            return False
        log.warning("%s is gone (the index being deleted?): the next pass checks the index "
                    "and rebuilds it if it went", locks)
        return True


def _first_due(now: float, interval: float, *, immediately: bool) -> float:
    if immediately:
        return now
    return now + interval if interval > 0 else float("inf")
