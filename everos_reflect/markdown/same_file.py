"""Which daily logs of a memory root are one file: the names a hard-linked log has in the root.

A log with more than one link may be the very file of another user's log (``users/bob/…``
made a hard link of ``users/alice/…``), of another day's or of another kind's, which must be
read once; or it may have its other names outside the root (a ``cp -al`` or rsnapshot backup),
which do not matter. Only a listing of the root's log folders tells the two apart. It is one
``scandir`` per folder (the inode of each name comes with the listing, no ``stat`` per file),
made once per look-up, or once for a whole pass (:meth:`SameFiles.one_listing`: a scan, a
reindex, a write): a glob of every user's folder per read made a reindex of a root with a
backup twenty times slower.
"""

from __future__ import annotations

import os
import re
import stat
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import date

from everos_reflect.fileio import open_regular
from everos_reflect.model import LOG_FILENAME_RE, NAME_PATTERN, Kind

_NAME_RE = re.compile(NAME_PATTERN)

#: Bytes of a log read to learn the kind and day its frontmatter names.
_HEAD_BYTES = 64 << 10


#: How long after a change a file's or folder's timestamp may still be equalled by a later
#: change (the filesystem's timestamp granularity, with room: 2 s on FAT, ticks elsewhere).
_RACY_NS = 2_000_000_000


@dataclass
class Listing:
    """Every daily log of the layout by inode number (each inode's names in path order), when
    the listing began (``taken_ns``), and the folders above the log folders (the root, apps,
    projects, ``users`` and user folders) with their inode and mtime: a folder renamed, made
    or removed anywhere above the logs changes one of those mtimes. ``folders`` is None when
    one was changed so shortly before the listing that a later change may not show."""

    by_inode: dict[int, list[str]]
    taken_ns: int
    folders: dict[str, tuple[int, int]] | None

    def shows(self, real: str, st: os.stat_result) -> bool:
        return real in self.by_inode.get(st.st_ino, ())

    def still_serves(self, real: str, st: os.stat_result) -> bool:
        """Whether the names of ``real`` (``st``) are still the ones listed: the file has been
        linked, unlinked or renamed by no one since before the listing (each of those changes
        its ctime) and no folder above the logs has changed."""
        if self.folders is None or st.st_ctime_ns >= self.taken_ns - _RACY_NS:
            return False
        return self.shows(real, st) and all(
            _stamp(folder) == stamp for folder, stamp in self.folders.items())


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


def _folders(path: str, stamps: dict[str, tuple[int, int]]) -> list[str]:
    """The real sub-folders of ``path`` named as an app, a project or a user may be (never
    ``.index``; no symlink: a linked folder is an alias the symlink check refuses, and its
    target is listed where it is), none of a folder that cannot be listed. Each is stamped
    in ``stamps``."""
    try:
        with os.scandir(path) as it:
            found = [e for e in it
                     if _NAME_RE.fullmatch(e.name) and e.is_dir(follow_symlinks=False)]
        for entry in found:
            st = entry.stat(follow_symlinks=False)
            stamps[entry.path] = (st.st_ino, st.st_mtime_ns)
    except OSError:
        return []
    return [entry.path for entry in found]


def list_logs(real_root: str) -> Listing:
    """Every daily log of the layout under ``real_root`` (``<app>/<project>/users/<user>/
    <kind folder>/<kind>-YYYY-MM-DD.md``, a regular file, reached through no symlink)."""
    taken_ns = time.time_ns()
    by_inode: dict[int, list[str]] = defaultdict(list)
    stamps: dict[str, tuple[int, int]] = {}
    if (root := _stamp(real_root)) is not None:
        stamps[real_root] = root
    for app in _folders(real_root, stamps):
        for project in _folders(app, stamps):
            users = os.path.join(project, "users")
            if (stamp := _stamp(users)) is None:
                continue
            stamps[users] = stamp
            for user in _folders(users, stamps):
                for folder, kind in _kind_folders(user):
                    with suppress(OSError), os.scandir(folder) as it:
                        for entry in it:
                            if entry.is_file(follow_symlinks=False) and _names_a_log(
                                    entry.name, kind):
                                by_inode[entry.inode()].append(entry.path)
    for names in by_inode.values():
        names.sort()
    racy = any(mtime >= taken_ns - _RACY_NS for _, mtime in stamps.values())
    return Listing(dict(by_inode), taken_ns, None if racy else stamps)


_KINDS_BY_FOLDER = {kind.folder: kind for kind in Kind}


def _kind_folders(user: str) -> list[tuple[str, Kind]]:
    """The log folders of a user's folder (``episodes``, ``.atomic_facts`` …) that are real
    folders, not symlinks, each with its kind."""
    try:
        with os.scandir(user) as it:
            return [(e.path, _KINDS_BY_FOLDER[e.name]) for e in it
                    if e.name in _KINDS_BY_FOLDER and e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _names_a_log(name: str, kind: Kind) -> bool:
    m = LOG_FILENAME_RE.fullmatch(name)
    if m is None or Kind.from_stem(m.group(1)) is not kind:
        return False
    try:
        date.fromisoformat(m.group(2))
    except ValueError:
        return False
    return True


class SameFiles:
    """The names in the root of a log with several links, from a listing of the root kept
    while it can be trusted (:meth:`Listing.still_serves`): a log whose other links are
    outside the root (a backup's) costs a ``stat`` of each folder above the logs, not a
    listing of every log.

    ``identity(path)`` is the kind and day a daily-log path names (None for no log); it orders
    the names (:meth:`names`)."""

    def __init__(self, real_root: str,
                 identity: Callable[[str], tuple[Kind, date] | None]) -> None:
        self.real_root = real_root
        self.identity = identity
        self._pass = threading.local()
        self._guard = threading.Lock()
        self._kept: Listing | None = None
        #: Listings made so far (each one ``scandir`` per log folder of the root).
        self.listings = 0

    @contextmanager
    def one_listing(self) -> Iterator[None]:
        """Inside the block, this thread's look-ups share one listing of the root, checked
        once and made again only for a log it does not show (written since: a new file). For
        a pass over many logs (a scan, a reindex, ``entries``) or one write, which looks a log
        up several times. A link made by hand during the pass is seen by the next one, as the
        scan's own listing of the logs is."""
        if getattr(self._pass, "active", False):
            yield
            return
        self._pass.active, self._pass.listing = True, None
        try:
            yield
        finally:
            self._pass.active, self._pass.listing = False, None

    def forget(self) -> None:
        """The listings are out of date (this thread renamed a log with other names)."""
        self._pass.listing = None
        with self._guard:
            self._kept = None

    def _listing(self, real: str, st: os.stat_result) -> Listing:
        in_pass = getattr(self._pass, "listing", None)
        if in_pass is not None and in_pass.shows(real, st):
            return in_pass
        with self._guard:
            kept = self._kept
        if kept is None or not kept.still_serves(real, st):
            kept = list_logs(self.real_root)
            with self._guard:
                self.listings += 1
                self._kept = kept
        if getattr(self._pass, "active", False):
            self._pass.listing = kept
        return kept

    def listed_now(self, st: os.stat_result) -> list[str]:
        """Every daily log of the root that is the file ``st``, from a listing made now and
        kept (a write that must find names a person gave the file a moment ago)."""
        listing = list_logs(self.real_root)
        with self._guard:
            self.listings += 1
            self._kept = listing
        found = []
        for name in listing.by_inode.get(st.st_ino, ()):
            with suppress(OSError):
                if os.path.samestat(os.stat(name, follow_symlinks=False), st):
                    found.append(name)
        return found

    def names(self, real: str, st: os.stat_result) -> list[str]:
        """Every daily log of the root that is the file ``st`` (``real``'s stat, ``real``
        among them when it is a log of the layout), the one to read first: a name of the kind
        and day the file's own frontmatter says (an episodes log linked as a facts log is
        read as the episodes log it is), then path order. Empty for a file with one link."""
        if st.st_nlink < 2 or not stat.S_ISREG(st.st_mode):
            return []
        names = []
        for other in self._listing(real, st).by_inode.get(st.st_ino, ()):
            with suppress(OSError):
                if os.path.samestat(os.stat(other, follow_symlinks=False), st):
                    names.append(other)
        if len({self.identity(name) for name in names}) > 1:
            own = _frontmatter_identity(real)
            names.sort(key=lambda name: (self.identity(name) != own, name))
        return names


def _frontmatter_identity(path: str) -> tuple[Kind, date] | None:
    """The kind and day the frontmatter of the log at ``path`` names (``type``, ``date``), or
    None when it names no kind or day."""
    from everos_reflect.markdown.parser import header_text, parse_log

    try:
        with open_regular(path) as fh:
            head = fh.read(_HEAD_BYTES).decode("utf-8", "replace")
    except OSError:
        return None
    log = parse_log(header_text(head), "hard-linked log", entries=False)
    if log.kind is None or log.day is None:
        return None
    return log.kind, log.day
