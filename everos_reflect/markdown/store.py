"""The Markdown store: daily-log files under a memory root, the single source of truth.

Every write goes through :meth:`MarkdownStore._edit`: take the file's cross-process lock, read
the current bytes, apply a pure text edit from :mod:`writer`, check the bytes did not change
underneath (a hand edit in an editor that does not know our lock), then write a temp file in the
same folder, fsync it, rename it over the original and fsync the folder. A file whose
frontmatter cannot be parsed is never written (:class:`MarkdownError`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import secrets
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack, contextmanager, suppress
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from everos_reflect.errors import (
    EverosError,
    InvalidId,
    MarkdownError,
    NoRoomToWithdraw,
    TooLarge,
    UnknownEntry,
    UserGone,
)
from everos_reflect.fileio import (
    NotRegularFile,
    OutsideRoot,
    broken_link,
    not_utf8,
    open_regular,
    os_reason,
    read_at_most,
)
from everos_reflect.markdown import parsed, settling, writer
from everos_reflect.markdown.parser import (
    MAX_ENTRY_BYTES,
    UNDONE,
    duplicate_ids,
    free_seq,
    header_text,
    mentioned_ids,
    next_seq,
    parse_entry_id,
    parse_log,
)
from everos_reflect.markdown.same_file import SameFiles
from everos_reflect.model import (
    LOG_FILENAME_RE,
    SEQ_MAX_DIGITS,
    DailyLog,
    Diagnostic,
    Entry,
    EntryId,
    Kind,
    UserRef,
    day_stamp,
    log_name_match,
    parse_timestamp,
    quoted_value,
    validate_name,
)
from everos_reflect.settings import LimitsSettings

_FILENAME_RE = LOG_FILENAME_RE
#: The largest sequence number an id may have (``SEQ_MAX_DIGITS`` digits).
SEQ_MAX = 10**SEQ_MAX_DIGITS - 1
_log = logging.getLogger(__name__)
_EDIT_ATTEMPTS = 5
#: How a batch's entries name each other (:meth:`MarkdownStore.append_many`): (place in the
#: batch, its metadata, the batch's ids in order) -> the metadata to write.
Refer = Callable[[int, Mapping[str, Any], list[str]], Mapping[str, Any]]
#: Bytes read at a time by :meth:`MarkdownStore.mentions`.
_SCAN_CHUNK = 1 << 20
#: Logs :attr:`MarkdownStore._still` remembers before it forgets those written longer ago
#: than :data:`settling.JUST_WRITTEN_NS` (only a just-written log is ever looked up there)
_STILL_KEPT = 1024


def _denied(exc: PermissionError) -> str:
    """How a log this process may not open is named: the OS's words ("Permission denied")."""
    return exc.strerror or "permission denied"



def _is_dir(entry: os.DirEntry[str]) -> bool:
    """``entry.is_dir()``, False for a symlink that leads nowhere it can follow: a link to
    itself (``ln -s x x``, a loop) raised ``OSError: Too many levels of symbolic links``, and
    one such link anywhere under the root stopped ``status``, ``lint``, ``search``,
    ``reindex`` and every run. It is skipped, as a dangling link is."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def _given_time(stamp: object) -> datetime | None:
    """A caller's ``timestamp`` read; one given as text keeps its fraction of a second when
    written (:class:`~everos_reflect.markdown.writer.GivenTime`): it was cut to the second."""
    when = parse_timestamp(stamp)
    if isinstance(stamp, str) and when is not None and when.microsecond:
        return writer.GivenTime.of(when)
    return when



#: A Markdown file's name: ``.md`` in any case, then nothing but spaces or dots (invisible in
#: a listing: "episode-2026-10-12.md " was read by nothing and named by no ``lint``).
_MD_END = re.compile(r"\.md[\s.]*\Z", re.IGNORECASE)

class MarkdownStore:
    """Daily logs of every user under ``root`` (layout in SPEC §2)."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        lock_timeout: float = 60.0,
        limits: LimitsSettings | None = None,
        seen_seq: Callable[[UserRef, str], int] | None = None,
    ) -> None:
        self.root = Path(root)
        #: The highest sequence number of an id stem (``ep_20261012_``) the index has seen
        #: mentioned in any of the user's logs (0: none). A new id goes past it as well as
        #: past every id its own file mentions: an id deleted by hand from its file may still
        #: be named elsewhere (a narrative's ``sources``, a fact's ``parent_id``).
        self.seen_seq = seen_seq
        self._abs_root = Path(os.path.abspath(self.root))
        self._real_root = os.path.realpath(self.root)
        self._real_root_path = Path(self._real_root)
        self.lock_timeout = lock_timeout
        self.limits = limits or LimitsSettings()
        self._locks: dict[str, FileLock] = {}
        self._locks_guard = threading.Lock()
        self._reuse = threading.local()  # see reusing_parses
        self._same_files = SameFiles(self._real_root, self._identity)
        #: real path of each log this store wrote, or saw stand still -> that file as it was
        #: then (_file_state): written again while it is so, it is not waited for again
        self._still: dict[str, tuple[int, int, int, int]] = {}
        self._still_sweep_at = _STILL_KEPT

    # -- layout ---------------------------------------------------------------------------------
    def user_dir(self, ref: UserRef) -> Path:
        # UserRef validated its names on construction; validate again in case of a forged one.
        for value, what in (
            (ref.app, "app_id"),
            (ref.project, "project_id"),
            (ref.user_id, "user_id"),
        ):
            validate_name(value, what)
        return self.root / ref.app / ref.project / "users" / ref.user_id

    def user_gone(self, ref: UserRef) -> bool:
        """Whether ``ref``'s folder is gone: deleted, or renamed or moved by hand, which takes
        its logs elsewhere. The one test every reader of a vanished user asks (the index and
        the audit following a renamed folder, an interrupted merge or undo finished where its
        entries went, a derived record not written for a user gone meanwhile)."""
        return not self.user_dir(ref).is_dir()

    def log_path(self, ref: UserRef, kind: Kind, day: date) -> Path:
        return self.user_dir(ref) / kind.folder / kind.filename(day)

    def path_for_id(self, ref: UserRef, entry_id: str) -> Path:
        """The file that holds ``entry_id``: its kind and date name it."""
        eid = parse_entry_id(entry_id)
        return self.log_path(ref, eid.kind, eid.day)

    def rel(self, path: str | os.PathLike[str]) -> str:
        """``path`` relative to the root, POSIX separators (the key used in the indexes)."""
        p = Path(os.path.abspath(path))
        try:
            return p.relative_to(self._abs_root).as_posix()
        except ValueError:
            return Path(path).resolve().relative_to(self._abs_root.resolve()).as_posix()

    def ref_for_path(self, path: str | os.PathLike[str]) -> tuple[UserRef, Kind, date] | None:
        """Who, what and which day a daily-log path is; None for anything outside the layout."""
        try:
            parts = Path(self.rel(path)).parts
        except ValueError:
            return None
        if len(parts) != 6 or parts[2] != "users":
            return None
        app, project, _, user_id, folder, name = parts
        m = _FILENAME_RE.fullmatch(name)
        if m is None:
            return None
        kind = Kind.from_stem(m.group(1))
        if kind is None or folder != kind.folder:
            return None
        try:
            ref = UserRef(app, project, user_id)
            day = date.fromisoformat(m.group(2))
        except (InvalidId, ValueError):
            return None
        return ref, kind, day

    def _identity(self, path: str) -> tuple[Kind, date] | None:
        """The kind and day a daily-log path of the root names, None for any other path."""
        located = self.ref_for_path(path)
        return None if located is None else located[1:]

    # -- reading --------------------------------------------------------------------------------
    def one_listing(self) -> AbstractContextManager[None]:
        """Inside the block, this thread's look-ups of a hard-linked log's other names share
        one listing of the root (:meth:`SameFiles.one_listing`): for a pass over many logs."""
        return self._same_files.one_listing()

    def leaves_root(self, path: str | os.PathLike[str]) -> bool:
        """Whether ``path`` resolves (through symlinks) to a place outside the root. Such a path
        is never read or written: a link to ``/etc/passwd`` named like a log must not leak it."""
        return not self._within(os.path.realpath(path))

    def link_problem(self, path: str | os.PathLike[str]) -> str | None:
        """Why ``path`` must not be read or written as the log its name says, or ``None``.
        Through a symlink it may lead outside the root (never read: a link to ``/etc/passwd``
        named like a log must not leak it), or onto another daily log of this root: a user's
        folder linked to another user's (``users/eve -> users/bob``) made every one of bob's
        entries answer eve's searches as eve's, and eve's merges and adds wrote into bob's
        logs. The log is read where it really is; the alias is refused, and ``lint`` says so."""
        real = os.path.realpath(path)
        if (broken := self._broken_folder(path, real)) is not None:
            return broken
        if not self._within(real):
            return "it is a symlink leading outside the memory root"
        try:
            named = Path(os.path.abspath(path)).relative_to(self._abs_root)
        except ValueError:  # named by its real path already
            named = None
        if named is not None and real != os.path.join(self._real_root, *named.parts):
            target = Path(real).relative_to(self._real_root).as_posix()
            if self.ref_for_path(real) is not None:
                return (f"its path leads through a symlink to {target}, another daily log of "
                        "this root (read there, not a second time here)")
            if _in_users_folder(Path(target).parts):
                # users/carol -> ../users: carol's log was users/episodes/episode-….md, a
                # misplaced file of no user that was read back as hers
                return (f"its path leads through a symlink to {target}, in a users folder but "
                        "not a daily log of this root")
        return self._hard_link_problem(real)

    def _broken_folder(self, path: str | os.PathLike[str], real: str) -> str | None:
        """Why a folder on ``path`` (resolved: ``real``) cannot be gone through: it is a
        symlink loop, or a link to a folder that does not exist (named in the root); else
        None. Looked for only where the log's folder is not there as named. A write
        through ``users/bob -> nowhere`` was refused as "another daily log of this root"
        (``users/nowhere/…``, which is nobody's), one through a loop with the OS's "Too many
        levels of symbolic links"."""
        if os.path.isdir(os.path.dirname(real)) and os.path.isdir(os.path.dirname(path)):
            return None
        try:
            named = Path(os.path.abspath(path)).relative_to(self._abs_root)
        except ValueError:
            return None
        step = self._abs_root
        for part in named.parts[:-1]:
            step = step / part
            if (words := broken_link(step, self.root)) is not None:
                return f"its folder {self._label(step)} is {words}"
            if not os.path.isdir(step):
                return None
        return None

    def _hard_link_problem(self, real: str) -> str | None:
        """A log hard-linked under a second user (``users/bob/…`` the very file of
        ``users/alice/…``, one inode) was read and indexed twice, as both users' memory. The
        first of its names (:meth:`_same_file_logs`) is read, any other refused, as a symlink
        alias is."""
        names = self._same_file_logs(real)[1]
        if not names or str(names[0]) == real:
            return None
        target = names[0].relative_to(self._real_root_path).as_posix()
        return (f"it is a hard link to {target}, another daily log of this root (the same "
                "file: read there, not a second time here)")

    def _same_file_logs(self, path: str | Path) -> tuple[os.stat_result | None, list[Path]]:
        """The file at ``path`` and every daily log of this root, in the order they are read
        (:meth:`SameFiles.names`), that is that very file (one inode; ``path`` among them):
        any user's, day's or kind's log, looked for only when the file has more than one
        link. The same day's log of another user was refused, but another day's or another
        kind's was read, each entry of it reported as not belonging there, and written to as
        a file of its own."""
        try:
            st = os.stat(path)
        except OSError:
            return None, []
        if st.st_nlink < 2 or self.ref_for_path(path) is None:
            return st, []
        return st, [Path(name) for name in self._same_files.names(os.path.realpath(path), st)]

    def _within(self, real: str) -> bool:
        return real == self._real_root or real.startswith(self._real_root + os.sep)

    def iter_users(self, outside: list[str] | None = None,
                   invalid: list[tuple[str, str]] | None = None,
                   irregular: list[str] | None = None) -> Iterator[UserRef]:
        """Every user with a folder under the root, sorted; folders with unsafe names skipped
        (``(folder, why)`` appended to ``invalid`` when given: such a user's logs are never
        read, which ``lint`` must say), and so are symlinked folders that lead outside the root
        (their paths are appended to ``outside`` when given, for ``lint`` to report).
        ``irregular``, when given, gets what stands where an app, a project, ``users`` or a
        user folder goes but is no folder (a file, a FIFO): nothing under it is read."""
        if not self.root.is_dir():
            return
        found = []
        if irregular is not None:  # a file at the top, where only apps and config go
            irregular.extend(self._not_folders(self.root, broken=False))
        for app in self._subdirs(self.root, outside, irregular):
            if irregular is not None:
                irregular.extend(self._not_folders(app.path))
            for project in self._subdirs(app, outside, irregular):
                users = Path(project.path) / "users"
                try:
                    is_folder, there = users.is_dir(), users.exists() or users.is_symlink()
                except PermissionError:  # the project folder may not be entered
                    self._note_denied(Path(project.path), irregular)
                    continue
                if irregular is not None and there and not is_folder:
                    irregular.append(self._label(users))
                if not is_folder or self._escapes(users, outside):
                    continue
                if irregular is not None:
                    irregular.extend(self._not_folders(users))
                for user in self._subdirs(users, outside, irregular):
                    try:
                        found.append(UserRef(app.name, project.name, user.name))
                    except InvalidId:
                        if invalid is not None:
                            invalid.append(self._invalid_folder(app, project, user))
        yield from sorted(found)

    def _invalid_folder(self, *folders: os.DirEntry[str]) -> tuple[str, str]:
        """The first of an app, project and user folder whose name is no valid id, and why:
        an app named "my app" was reported once per user folder under it (a thousand users,
        a thousand errors), each naming the user's folder for the app's name."""
        for folder, what in zip(folders, ("app_id", "project_id", "user_id"), strict=True):
            try:
                validate_name(folder.name, what)
            except InvalidId as exc:
                # named as it is (the output escapes what a terminal cannot show), so `--json`
                # gives the folder's real path; the reason quotes the name with escapes
                return self._label(Path(folder.path)), str(exc)
        raise AssertionError("no invalid name among the folders")

    def iter_files(
        self,
        ref: UserRef | None = None,
        kinds: Iterable[Kind] | None = None,
        outside: list[str] | None = None,
        invalid: list[tuple[str, str]] | None = None,
        irregular: list[str] | None = None,
        misnamed: list[str] | None = None,
    ) -> Iterator[Path]:
        """Daily-log files (sorted by user, kind, day) of one user or all users. Files and
        folders that are symlinks leading outside the root are skipped (and appended to
        ``outside`` when given); so are user folders with unsafe names (see :meth:`iter_users`
        for ``invalid``), and anything named like a log that is not a regular file, a FIFO or
        a folder (its path appended to ``irregular`` when given: a writer that must see every
        log, like ``undo``, refuses to go on without it). ``misnamed``, when given, gets the
        Markdown files of a kind's folder that no reader opens (:meth:`_misnamed`)."""
        wanted = list(kinds) if kinds is not None else list(Kind)
        for user in [ref] if ref is not None else self.iter_users(outside, invalid, irregular):
            user_dir = self.user_dir(user)
            try:
                if ref is not None and user_dir.is_dir() and self.leaves_root(user_dir):
                    if outside is not None:
                        outside.append(self._label(user_dir))
                    continue
            except PermissionError:  # a folder above it may not be entered
                continue
            if misnamed is not None and kinds is None:
                misnamed.extend(self._misplaced(user_dir))
            for kind in wanted:
                folder = user_dir / kind.folder
                try:
                    found = self._kind_logs(folder, kind, outside, irregular, misnamed)
                except PermissionError:
                    self._note_denied(user_dir if not os.access(user_dir, os.X_OK)
                                      else folder, irregular)
                    continue
                yield from found

    def _kind_logs(self, folder: Path, kind: Kind, outside: list[str] | None,
                   irregular: list[str] | None, misnamed: list[str] | None) -> list[Path]:
        """The logs in one kind's ``folder`` (see :meth:`iter_files`); raises
        ``PermissionError`` when this process may not list or enter it."""
        if not folder.is_dir():
            # a file where it goes, or a link leading nowhere (a loop, a target gone)
            if irregular is not None and (folder.exists() or folder.is_symlink()):
                irregular.append(self._label(folder))
            return []
        if self._escapes(folder, outside):
            return []
        # listed, not globbed: a glob of a folder it may not list found nothing, in silence
        names = sorted(name for name in os.listdir(folder)
                       if name.startswith(f"{kind.stem}-") and name.endswith(".md"))
        if misnamed is not None:
            misnamed.extend(self._misnamed(folder, kind))
        found = []
        for path in (folder / name for name in names):
            if not log_name_match(path.name) or self._escapes(path, outside):
                continue
            if path.is_file():
                found.append(path)
            elif irregular is not None and (path.exists() or path.is_symlink()):
                # a dangling link or a symlink loop too: no log is read there, and every
                # write to that day's log fails on it, while `lint` said all was well
                irregular.append(self._label(path))
        return found

    def _note_denied(self, folder: Path, irregular: list[str] | None) -> None:
        """A folder of the layout this process may not list or enter (its mode, an ACL,
        another account's folder): nothing under it is read. It stopped ``lint``, ``status``
        and ``reindex`` ("Permission denied: …/episodes"), or, listed by a glob, its logs were
        passed over without a word. Noted in ``irregular`` for ``lint`` and ``status`` to
        name (and for a writer that must see every log, ``undo``, to refuse)."""
        if irregular is not None:
            irregular.append(self._label(folder))

    def _misnamed(self, folder: Path, kind: Kind) -> list[str]:
        """Markdown files in ``kind``'s folder whose name is not ``<stem>-YYYY-MM-DD.md``
        ("episode-2026-10-02 (copy).md", "episode-2026-10-5.md", "Episode-….md", another
        kind's log, "episode-….md " with a space or a dot past ``.md``): nothing reads them,
        so the entries a person writes there are in no index, search or merge. Hidden files
        (editors' swap and lock files, this daemon's temp files) are not Markdown a person
        edits, and are left out."""
        try:
            names = sorted(e.name for e in os.scandir(folder) if e.is_file())
        except OSError:
            return []
        return [self._label(folder / name) for name in names
                if not name.startswith(".") and _MD_END.search(name)
                and not ((m := log_name_match(name)) and m.group(1) == kind.stem)]

    def _misplaced(self, user_dir: Path) -> list[str]:
        """Files named like a daily log in a user's folder but outside every kind's folder:
        in the user's folder itself, or in a sub-folder that is no kind's ("Episodes/",
        "insights/" without its dot, "episode/"). Nothing reads them, and ``lint`` said
        "0 files checked, 0 errors"."""
        kinds = {kind.folder for kind in Kind}
        found: list[str] = []
        try:
            items = list(os.scandir(user_dir))
        except OSError:
            return []
        for item in items:
            if item.name in kinds:
                continue
            try:
                if item.is_dir(follow_symlinks=False):
                    names = [e.name for e in os.scandir(item.path) if e.is_file()]
                    found += [self._label(Path(item.path) / n) for n in names
                              if _FILENAME_RE.fullmatch(n)]
                elif item.is_file() and _FILENAME_RE.fullmatch(item.name):
                    found.append(self._label(Path(item.path)))
            except OSError:
                continue
        return found

    def _not_folders(self, folder: str | os.PathLike[str], *, broken: bool = True) -> list[str]:
        """What is in ``folder`` (not hidden) but no folder, nor a link to one: in an app or a
        ``users`` folder, where only project or user folders go. A link leading nowhere (a
        loop, a target gone) is one too, unless ``broken`` is False (the root's top, where
        such a link is nobody's folder): every write for that user or project failed on it,
        while ``lint`` said all was well."""
        try:
            entries = [e for e in os.scandir(folder) if not e.name.startswith(".")]
        except OSError:
            return []
        return [self._label(Path(e.path)) for e in entries
                if not _is_dir(e) and (os.path.exists(e.path) or (broken and e.is_symlink()))]

    def _subdirs(self, folder: str | os.PathLike[str], outside: list[str] | None,
                 irregular: list[str] | None = None) -> list[os.DirEntry[str]]:
        """Sub-folders (not hidden) of ``folder`` that stay inside the root; none of a
        folder this process may not list (noted: :meth:`_note_denied`)."""
        try:
            found = [e for e in os.scandir(folder) if not e.name.startswith(".") and _is_dir(e)]
        except (FileNotFoundError, NotADirectoryError):
            return []
        except PermissionError:
            if Path(folder) == self.root:  # the root itself: the command fails, saying so
                raise
            self._note_denied(Path(folder), irregular)
            return []
        return [e for e in found if not (e.is_symlink() and self._escapes(e.path, outside))]

    def _escapes(self, path: str | os.PathLike[str], outside: list[str] | None) -> bool:
        """A symlink (or a path through one) leading outside the root; noted in ``outside``."""
        if not os.path.islink(path) or not self.leaves_root(path):
            return False
        if outside is not None:
            outside.append(self._label(Path(path)))
        return True

    def read(self, path: str | os.PathLike[str]) -> DailyLog:
        """Parse one file (raises ``FileNotFoundError`` when it does not exist). A file over
        ``limits.max_file_bytes``, or one this process may not read, is not read: the log is
        ``unread``, with one fatal diagnostic saying why."""
        path = Path(path)
        if (problem := self.link_problem(path)) is not None:
            return self._refused(path, problem)
        try:
            data = self._load(path)
        except TooLarge as exc:
            label = self._label(path)
            log = DailyLog(label, None, None, {}, unread=True)
            log.diagnostics.append(Diagnostic(label, 0, f"{exc}; not read", "fatal"))
            return log
        except PermissionError as exc:
            # There, but this process may not read it (its mode, an ACL, another user's
            # file): unread, as a log over the limit is, so its entries are unknown rather
            # than deleted. Raised, it stopped get_many's callers (provenance, search,
            # explain, Reflection) with a traceback.
            return self._refused(path, _denied(exc))
        except OutsideRoot as exc:
            return self._refused(path, exc.strerror)
        parsed: dict[Path, tuple[bytes, DailyLog]] | None = getattr(self._reuse, "logs", None)
        if parsed is None:
            return self._parse(data, path)
        seen = parsed.get(path)
        if seen is not None and seen[0] == data:  # the very bytes parsed before: same log
            return seen[1]
        log = self._parse(data, path)
        parsed[path] = (data, log)
        return log

    @contextmanager
    def reusing_parses(self) -> Iterator[None]:
        """Inside the block, :meth:`read` on this thread still reads every file's bytes, but
        parses them only when they differ from the bytes it last parsed for that path (the
        same bytes always parse to the same log, so nothing read can be older than the file).
        For a caller that reads one log several times in a row (a commit checks its sources,
        finds their facts, then archives into them) and never changes what it is given."""
        if getattr(self._reuse, "logs", None) is not None:
            yield
            return
        self._reuse.logs = {}
        try:
            yield
        finally:
            self._reuse.logs = None

    def refusal(self, path: str | os.PathLike[str]) -> str | None:
        """Why :meth:`read` would leave ``path`` unread for want of permission ("not read:
        Permission denied", its diagnostic), else None; only opens the file. For ``status``,
        which counts from the index and reads no log: the indexer skips a log it may not
        open, so nothing recorded named it, while ``lint`` did."""
        try:
            with open_regular(path):
                return None
        except PermissionError as exc:
            return f"not read: {_denied(exc)}"
        except OSError:  # gone since listed, or no regular file: reported where listed
            return None

    def _refused(self, path: Path, reason: str) -> DailyLog:
        label = self._label(path)
        log = DailyLog(label, None, None, {}, unread=True)
        log.diagnostics.append(Diagnostic(label, 0, f"not read: {reason}", "fatal"))
        return log

    def _load(self, path: Path) -> bytes:
        """The file's bytes, never more than ``limits.max_file_bytes`` in memory (raises
        :class:`TooLarge` beyond, ``FileNotFoundError`` when absent)."""
        limit = self.limits.max_file_bytes
        with open_regular(path, within=self._real_root) as fh:
            size = os.fstat(fh.fileno()).st_size
            data = read_at_most(fh, limit + 1) if size <= limit else b""
        if size > limit or len(data) > limit:
            raise TooLarge("the log", max(size, len(data)), "limits.max_file_bytes", limit)
        return data

    def mentions(self, path: str | os.PathLike[str], needle: bytes) -> bool:
        """Whether the file's bytes contain ``needle``, read in pieces of at most
        :data:`_SCAN_CHUNK` bytes: a cheap pre-filter before a parse that never holds a huge
        (or endless) file whole. Raises ``FileNotFoundError`` when it is absent and ``OSError``
        for anything but a regular file (a FIFO would block a plain read for ever)."""
        keep = max(len(needle) - 1, 0)
        tail = b""
        with open_regular(path, within=self._real_root) as fh:
            while chunk := fh.read(_SCAN_CHUNK):
                window = tail + chunk
                if needle in window:
                    return True
                tail = window[-keep:] if keep else b""
        return False

    def get(self, ref: UserRef, entry_id: str) -> Entry:
        """The entry ``entry_id`` of ``ref``. Raises :class:`UnknownEntry` when its log has
        no such entry, and :class:`MarkdownError` when it may have one that cannot be read
        now (the log not read: no permission, over ``limits.max_file_bytes``, not UTF-8; or
        the entry's own block broken): "no entry …" sent a person looking for a deletion
        that never happened, the same error the API and MCP answer as 409."""
        path = self.path_for_id(ref, entry_id)
        if path.is_file():
            log = self.read(path)
            for entry in log.entries:
                if entry.id == entry_id:
                    return entry
            if log.unread or entry_id in log.unreadable:
                fatal = next((d for d in log.diagnostics if d.severity == "fatal"), None)
                # else the problem of its own block, on that block's line as lint names it
                # (it was said to be on line 0)
                found = fatal or next((d for d in log.diagnostics if d.message.startswith(
                    (f"entry {entry_id}:", f"entry {entry_id} "))), None)
                why = (fatal.message if fatal else
                       f"its entry block cannot be read: {found.message}" if found else
                       "its entry block cannot be read (see lint)")
                # the line the problem is on (a byte that is not UTF-8): "column 1" of no line
                line = found.line if found else 0
                raise MarkdownError(log.path, line, f"cannot look up {entry_id}: {why}")
        raise UnknownEntry(f"no entry {entry_id} for user {ref}")

    def get_many(self, ref: UserRef, entry_ids: Iterable[str],
                 unreadable: set[str] | None = None) -> dict[str, Entry]:
        """The entries of ``entry_ids`` that exist, parsing each file once: many ids in one
        large log must not cost one full parse of that log per id. With ``unreadable``, the
        ids still in their file but unreadable now (``DailyLog.unreadable``) are added to it,
        and so is every wanted id of a file that cannot be read at all (``DailyLog.unread``)
        or whose frontmatter is broken (not ``ok``), or whose text ends inside an entry (a
        writer caught mid-write, a lost closing marker: what came after is not there): a
        caller that must not take a typo for a deletion tells the two apart.

        A folder or FIFO where the log goes (or a file where its folder goes) is no log, as
        the indexer sees it (it drops that log's rows): none of its ids exist. Raised, it
        stopped provenance's check of the owner (so nothing of theirs went stale) and every
        ``revalidate_insights`` run."""
        by_path: dict[Path, set[str]] = {}
        for entry_id in entry_ids:
            by_path.setdefault(self.path_for_id(ref, entry_id), set()).add(entry_id)
        found: dict[str, Entry] = {}
        with self.one_listing():
            for path, wanted in by_path.items():
                try:
                    log = self.read(path)
                except (FileNotFoundError, NotADirectoryError, NotRegularFile):
                    continue
                for entry in log.entries:
                    if entry.id in wanted and entry.id not in found:
                        found[entry.id] = entry
                if unreadable is not None:
                    # a log not read whole (broken frontmatter, its text ending inside an
                    # entry): an id missing from it is not known to be deleted until it
                    # reads whole again
                    unreadable |= (wanted if not log.whole else wanted & log.unreadable)
        return found

    def entries(self, ref: UserRef, kind: Kind) -> list[Entry]:
        """All parseable entries of one user and kind, in day and file order."""
        with self.one_listing():
            return [e for path in self.iter_files(ref, [kind]) for e in self.read(path).entries]

    def _parse(self, data: bytes, path: Path, *, entries: bool = True) -> DailyLog:
        label = self._label(path)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line, problem = not_utf8(data, exc)
            log = DailyLog(label, None, None, {}, unread=True)
            log.diagnostics.append(Diagnostic(label, line, problem, "fatal"))
            return log
        return self.parse_text(text, label, entries=entries,
                               max_entry_bytes=self.limits.max_entry_bytes)

    def parse_text(self, text: str, label: str, *, entries: bool = True,
                   max_entry_bytes: int = MAX_ENTRY_BYTES) -> DailyLog:
        """:func:`parse_log` of the text of the log ``label`` (its path relative to the root),
        answered from the last parse of that log when it was of this very text
        (:mod:`~everos_reflect.markdown.parsed`): a record write, the entry read back, the
        index's sync and the provenance check after it read the same bytes, parsed once."""
        return parsed.parse(text, label, scope=self._real_root, entries=entries,
                            max_entry_bytes=max_entry_bytes)

    def holding_more_parses(self) -> AbstractContextManager[None]:
        """Inside the block, the parse memo holds many more logs (within its character cap):
        for a pass that reads the same hundreds of logs at several steps (a Reflection run);
        see :func:`~everos_reflect.markdown.parsed.holding_more`."""
        return parsed.holding_more()

    def forget_parses(self) -> None:
        """Drop every parse :meth:`parse_text` holds of this root's logs: the next read of
        each parses it anew (``reindex``, which promises a rebuild from Markdown as it reads)."""
        parsed.forget(self._real_root)

    def _label(self, path: Path) -> str:
        try:
            return self.rel(path)
        except ValueError:
            return str(path)

    # -- writing --------------------------------------------------------------------------------
    @contextmanager
    def lock(self, path: str | os.PathLike[str]) -> Iterator[None]:
        """Cross-process lock of one file (re-entrant within a thread)."""
        key = self._label(Path(path))
        lock_file = self._lock_file(key)
        with self._locks_guard:
            lock = self._locks.get(key)
            if lock is None:
                lock = self._locks[key] = FileLock(str(lock_file))
        try:
            self._acquire(lock, lock_file)
        except Timeout as exc:
            raise MarkdownError(key, 0, "timed out waiting for the file's write lock") from exc
        try:
            yield
        finally:
            lock.release()

    def _acquire(self, lock: FileLock, lock_file: Path) -> None:
        """Take ``lock``, on the file at ``lock_file`` now: a failed write removes the lock
        file it made (:meth:`_undone_if_failed`), and a writer that was waiting on it then
        holds a file no other writer finds. It lets go and takes the new one."""
        deadline = time.monotonic() + self.lock_timeout if self.lock_timeout >= 0 else None
        while True:
            lock_file.parent.mkdir(parents=True, exist_ok=True)
            left = -1.0 if deadline is None else max(0.0, deadline - time.monotonic())
            lock.acquire(timeout=left)
            if lock.lock_counter > 1 or _held_at(lock, lock_file):
                return
            lock.release()

    def _lock_file(self, key: str) -> Path:
        digest = hashlib.sha256(key.encode()).hexdigest()[:24]
        return self.root / ".index" / "locks" / f"md-{digest}.lock"

    def _next_seq(self, ref: UserRef, kind: Kind, day: date, log: DailyLog,
                  count: int = 1) -> int:
        """The sequence number of the next id of ``log`` (the first of ``count``): past every
        id the file mentions and every id of its stem the index saw mentioned in any log
        (:attr:`seen_seq`), unless that leaves no room under the largest sequence an id may
        have. The watermark is only ever raised and kept by ``reindex``: one mention of
        ``ep_20260908_999999999999999999`` in any log, a typo removed since, made every later
        id of that day ``…_1000000000000000000``, which no id may be, so nothing could be
        added to that day again. Then only the file's own ids are gone past, as before."""
        floor = 1
        if self.seen_seq is not None:
            stem = f"{kind.prefix}_{day_stamp(day)}_"
            seen = self.seen_seq(ref, stem)
            if seen + count <= SEQ_MAX:
                floor = seen + 1
            else:
                _log.warning("ids of %s mentioned up to %s_%d leave no room past them: "
                             "allocating past the ids of %s alone", ref, stem, seen, log.path)
        seq = max(next_seq(log), floor)
        if seq + count - 1 <= SEQ_MAX:
            return seq
        # the file's own text mentions an id too large to go past (a person's or a client's
        # typo in an Episode): every later id of the day was ``…_1000000000000000000``, refused
        # as invalid, so nothing could be added to that day again. Past its entries' ids
        # instead, never onto an id it mentions.
        for low in dict.fromkeys((floor, 1)):
            seq_free = free_seq(log, count, low, SEQ_MAX)
            if seq_free is not None:
                _log.warning("%s mentions an id too large to allocate past: allocating past "
                             "the ids of its entries", log.path)
                return seq_free
        raise MarkdownError(log.path, 0, f"no free entry id is left for {count} more "
                            f"entr{'y' if count == 1 else 'ies'} of this day (ids go up to "
                            f"{SEQ_MAX_DIGITS} digits)")

    def next_free_seq(self, ref: UserRef, kind: Kind, day: date, count: int = 1) -> int:
        """The sequence number the next append of ``count`` entries to ``ref``'s ``kind`` log of
        ``day`` would take now (the first of them), read without locking: for a caller that
        must size those entries before it writes them (a merge, before its journal row
        exists). A log that cannot be written (over the limit, a fatal problem) counts as
        new; its write reports that itself."""
        text: str | None = None
        try:
            _, text = self._editable(self.log_path(ref, kind, day), settle=False)
        except EverosError:
            text = None
        log = parse_log(text or writer.new_log_text(kind, ref.user_id, day), entries=False)
        return self._next_seq(ref, kind, day, log, count)

    def append(
        self,
        ref: UserRef,
        kind: Kind,
        meta: Mapping[str, Any],
        sections: Mapping[str, str],
        *,
        day: date | None = None,
        withdrawable: bool = False,
        derived: bool = False,
    ) -> Entry:
        """Append a new entry to ``ref``'s ``kind`` log of ``day`` (today, UTC, by default).

        ``owner_id`` defaults to the user and ``timestamp`` to now; the id is the file's next
        free one, allocated under the file lock. ``withdrawable``: the log must also keep room
        for the ``deprecated_entries`` key that would withdraw the entry (see
        :func:`_withdrawn_size`), else :class:`TooLarge`. ``derived``: the entry rests on the
        user's own records, so :class:`UserGone` when the user's folder is gone.
        """
        now = datetime.now(UTC)  # one read: the default stamp falls on the default day
        day = day or now.date()
        owner = meta.get("owner_id", ref.user_id)
        if owner != ref.user_id:
            raise InvalidId(f"owner_id {quoted_value(owner)} does not match user "
                            f"{quoted_value(ref.user_id)}")
        stamp = meta.get("timestamp")
        when = now if stamp is None else _given_time(stamp)
        if when is None:
            raise MarkdownError(
                self.rel(self.log_path(ref, kind, day)), 0, f"unreadable timestamp "
                                                            f"{quoted_value(stamp)}"
            )
        values = {"owner_id": owner, "timestamp": when, **meta}
        values["owner_id"], values["timestamp"] = owner, when
        path = self.log_path(ref, kind, day)
        label = self._label(path)
        created: list[Entry] = []

        def edit(text: str | None) -> str:
            created.clear()
            if derived:
                self._check_user(ref, kind)
            if text is None or not text.strip():
                text = writer.new_log_text(kind, ref.user_id, day)
            log = self._writable(self.parse_text(text, label, entries=False))
            entry_id = str(EntryId(kind, day, self._next_seq(ref, kind, day, log)))
            block = writer.render_entry(entry_id, values, sections)
            size = len(block.encode("utf-8"))
            if size > self.limits.max_entry_bytes:
                raise TooLarge("the entry", size, "limits.max_entry_bytes",
                               self.limits.max_entry_bytes)
            new_text = writer.append_entry(text, block)
            grown = (_withdrawn_size(new_text, [entry_id], day, [block]) if withdrawable
                     else len(new_text.encode("utf-8")))
            if grown > self.limits.max_file_bytes:
                raise TooLarge(f"{label} with this entry", grown, "limits.max_file_bytes",
                               self.limits.max_file_bytes)
            created.extend(self._parse_back(log, text, new_text, [(entry_id, block)]))
            return new_text

        self._edit(path, edit)
        return created[0]

    def append_many(
        self,
        ref: UserRef,
        kind: Kind,
        items: Iterable[tuple[Mapping[str, Any], Mapping[str, str]]],
        *,
        day: date | None = None,
        withdrawable: bool = False,
        derived: bool = False,
        refer: Refer | None = None,
    ) -> list[Entry]:
        """Append several entries to one daily log in one atomic write: all or none of them.

        A derivation that writes several records (a worldview run's convictions, a detector's
        edges) can then never leave half of them behind after a crash. ``withdrawable`` and
        ``derived`` as for :meth:`append`. ``refer``: for entries of the batch that name each
        other (a lesson contesting another of its run), called under the file lock with each
        item's place, its metadata and the ids the write gives the batch, in order; it returns
        the metadata to write. Without it, such entries could only be written one by one,
        each a copy of the whole log.
        """
        return self.append_to_logs([(ref, kind, day, items)], withdrawable=withdrawable,
                                   derived=derived, refer=refer)[0]

    def append_copy(self, ref: UserRef, entry: Entry) -> Entry | None:
        """Append ``entry``, another user's, to ``ref``'s log of its day under its own id (its
        ``owner_id`` made ``ref``'s): a copy of it owed in that log, which entries of ``ref``
        already point at by that id (a merge's narrative, its user's folder copied by hand
        while the merge ran, the copy taken after some sources were archived toward the
        narrative, before the narrative was written). ``None``, nothing written, when the
        log already mentions the id: ids are unique per user only, so it may be another
        entry's, and an id is never written twice."""
        eid = parse_entry_id(entry.id)
        path = self.log_path(ref, eid.kind, eid.day)
        label = self._label(path)
        block = writer.render_entry(entry.id, {**entry.meta, "owner_id": ref.user_id},
                                    entry.sections)
        if len(block.encode("utf-8")) > self.limits.max_entry_bytes:
            raise TooLarge("the entry", len(block.encode("utf-8")), "limits.max_entry_bytes",
                           self.limits.max_entry_bytes)
        created: list[Entry] = []

        def edit(text: str | None) -> str | None:
            created.clear()
            if text is None or not text.strip():
                text = writer.new_log_text(eid.kind, ref.user_id, eid.day)
            elif entry.id in text:
                return None
            log = self._writable(self.parse_text(text, label, entries=False))
            new_text = writer.append_entry(text, block)
            size = len(new_text.encode("utf-8"))
            if size > self.limits.max_file_bytes:
                raise TooLarge(f"{label} with this entry", size, "limits.max_file_bytes",
                               self.limits.max_file_bytes)
            created.extend(self._parse_back(log, text, new_text, [(entry.id, block)]))
            return new_text

        self._edit(path, edit)
        return created[0] if created else None

    def append_to_logs(
        self,
        batches: Iterable[tuple[UserRef, Kind, date | None,
                                Iterable[tuple[Mapping[str, Any], Mapping[str, str]]]]],
        *,
        withdrawable: bool = False,
        derived: bool = False,
        refer: Refer | None = None,
    ) -> list[list[Entry]]:
        """:meth:`append_many` for several logs at once, one ``(ref, kind, day, items)`` per log
        (each log at most once): each log gets its own atomic write, all or none of its
        entries, exactly as alone, but the files' fsyncs overlap (:meth:`_edit_many`): a
        Reflection batch appends to the logs of many users at once. The created entries, per
        log, in order. ``withdrawable`` and ``derived`` as for :meth:`append`, for every
        entry."""
        edits: dict[Path, Callable[[str | None], str | None]] = {}
        created: list[list[Entry]] = []
        now = datetime.now(UTC)  # one read, as in append()
        for ref, kind, day, items in batches:
            day = day or now.date()
            path = self.log_path(ref, kind, day)
            if path in edits:
                raise ValueError(f"{self._label(path)} given twice")
            made: list[Entry] = []
            created.append(made)
            edit = self._appending(ref, kind, day, path, items, made, now, withdrawable,
                                   derived, refer)
            if edit is not None:
                edits[path] = edit
        self._edit_many(edits)
        return [list(made) for made in created]

    def _appending(
        self,
        ref: UserRef,
        kind: Kind,
        day: date,
        path: Path,
        items: Iterable[tuple[Mapping[str, Any], Mapping[str, str]]],
        created: list[Entry],
        now: datetime,
        withdrawable: bool = False,
        derived: bool = False,
        refer: Refer | None = None,
    ) -> Callable[[str | None], str | None] | None:
        """The text edit appending ``items`` to ``path`` (None when there is nothing to
        append); each run of it leaves the entries it made in ``created``. ``now`` stamps the
        items without a timestamp."""
        label = self._label(path)
        rows = []
        for meta, sections in items:
            owner = meta.get("owner_id", ref.user_id)
            if owner != ref.user_id:
                raise InvalidId(f"owner_id {quoted_value(owner)} does not match user "
                                f"{quoted_value(ref.user_id)}")
            stamp = meta.get("timestamp")
            when = now if stamp is None else _given_time(stamp)
            if when is None:
                raise MarkdownError(label, 0, f"unreadable timestamp {quoted_value(stamp)}")
            rows.append(({**meta, "owner_id": owner, "timestamp": when}, sections))
        if not rows:
            return None

        def edit(text: str | None) -> str:
            created.clear()
            if derived:
                self._check_user(ref, kind)
            if text is None or not text.strip():
                text = writer.new_log_text(kind, ref.user_id, day)
            log = self._writable(self.parse_text(text, label, entries=False))
            seq = self._next_seq(ref, kind, day, log, len(rows))
            ids = [str(EntryId(kind, day, seq + offset)) for offset in range(len(rows))]
            blocks = []
            for offset, (meta, sections) in enumerate(rows):
                entry_id = ids[offset]
                if refer is not None:
                    meta = {**refer(offset, meta, ids), "owner_id": meta["owner_id"],
                            "timestamp": meta["timestamp"]}
                block = writer.render_entry(entry_id, meta, sections)
                size = len(block.encode("utf-8"))
                if size > self.limits.max_entry_bytes:  # the limits append() enforces
                    raise TooLarge("the entry", size, "limits.max_entry_bytes",
                                   self.limits.max_entry_bytes)
                blocks.append((entry_id, block))
            # one copy of the log for the whole batch: a copy per entry was quadratic
            new_text = writer.append_entries(text, [block for _, block in blocks])
            created.extend(self._parse_back(log, text, new_text, blocks))
            grown = (_withdrawn_size(new_text, [e.id for e in created], day,
                                     [block for _, block in blocks]) if withdrawable
                     else len(new_text.encode("utf-8")))
            if grown > self.limits.max_file_bytes:
                raise TooLarge(f"{label} with these entries", grown, "limits.max_file_bytes",
                               self.limits.max_file_bytes)
            return new_text

        return edit

    def _check_user(self, ref: UserRef, kind: Kind) -> None:
        """:class:`UserGone` when ``ref``'s folder is gone, for a record derived from the
        user's own records: they were there when it was derived, so the folder was deleted or
        renamed meanwhile (checked under the log's lock, right before the write)."""
        if self.user_gone(ref):
            raise UserGone(f"the folder of user {ref} is gone (deleted or renamed meanwhile): "
                           f"the {kind.value} derived from its records is not written")

    def update_meta(self, ref: UserRef, entry_id: str, updates: Mapping[str, Any]) -> Entry:
        """Set (``None``: remove) metadata keys of one entry the daemon created; returns the
        entry as written. Raises :class:`UnknownEntry` when it is not there."""
        path = self.path_for_id(ref, entry_id)
        label = self._label(path)

        def edit(text: str | None) -> str:
            if text is None:
                raise UnknownEntry(f"no entry {entry_id} for user {ref}")
            log = self._writable(self.parse_text(text, label))
            if all(e.id != entry_id for e in log.entries):
                raise UnknownEntry(f"no entry {entry_id} for user {ref}")
            return writer.set_entry_meta(text, entry_id, updates,
                                          parse=lambda t: self.parse_text(t, label))

        self._edit(path, edit)
        return self.get(ref, entry_id)

    def update_metas(self, ref: UserRef, updates: Mapping[str, Mapping[str, Any]]) -> None:
        """:meth:`update_meta` for several entries, one atomic write per log they are in
        (all of a log's updates or none): a run updating many of its records one by one
        wrote a copy of the whole log per record. Raises :class:`UnknownEntry`, writing
        nothing to that log, when an id is not an entry of it."""
        by_file: dict[Path, dict[str, Mapping[str, Any]]] = {}
        for entry_id, values in updates.items():
            by_file.setdefault(self.path_for_id(ref, entry_id), {})[entry_id] = values
        edits: dict[Path, Callable[[str | None], str | None]] = {}
        for path, mine in by_file.items():
            label = self._label(path)

            def edit(text: str | None, mine: dict[str, Mapping[str, Any]] = mine,
                     label: str = label) -> str:
                if text is None:
                    raise UnknownEntry(f"no entry {', '.join(sorted(mine))} for user {ref}")
                log = self._writable(self.parse_text(text, label))
                missing = sorted(set(mine) - {e.id for e in log.entries})
                if missing:
                    raise UnknownEntry(f"no entry {', '.join(missing)} for user {ref}")
                return writer.set_entries_meta(text, mine,
                                               parse=lambda t: self.parse_text(t, label))

            edits[path] = edit
        self._edit_many(edits)

    def deprecate(self, ref: UserRef, mapping: Mapping[str, str]) -> dict[str, str]:
        """Record ``old -> new`` in the frontmatter of each old entry's file.

        Additive: an old id already recorded keeps its mapping. Returns those conflicts as
        ``{old: new_already_recorded}`` for the pairs whose recorded value differs (empty when
        everything was recorded as asked). Raises :class:`UnknownEntry` — before writing
        anything — when an old id is not an entry of that user.
        """
        by_file: dict[Path, dict[str, str]] = {}
        for old, new in mapping.items():
            if new != UNDONE:
                parse_entry_id(new)
            by_file.setdefault(self.path_for_id(ref, old), {})[old] = new
        for path, pairs in by_file.items():
            log = self.read(path) if path.is_file() else None
            if log is not None and log.unread:  # say why, not "no entry …"
                self._writable(log)
            known = {e.id for e in log.entries} if log is not None else set()
            if log is not None and not set(pairs) <= known:
                # read again once it stands still: a log being rewritten in place, read cut
                # short, answered "no entry" for an entry it holds
                data = self._settled_bytes(path)
                known = {e.id for e in self._parse(data, path).entries} if data else set()
            missing = sorted(set(pairs) - known)
            if missing:
                raise UnknownEntry(f"no entry {', '.join(missing)} for user {ref}")
        conflicts: dict[str, str] = {}
        found: dict[Path, dict[str, str]] = {}  # per file: the last run of its edit counts
        edits: dict[Path, Callable[[str | None], str | None]] = {}
        for path, pairs in by_file.items():
            label = self._label(path)

            def edit(text: str | None, pairs: dict[str, str] = pairs, label: str = label,
                     path: Path = path) -> str:
                if text is None:
                    raise UnknownEntry(f"no entry {', '.join(sorted(pairs))} for user {ref}")
                log = self._writable(self.parse_text(text, label, entries=False))
                _refuse_duplicates(text, label, "archiving into")
                # every key as the writer sees it, those with a value that is no id too
                # (``null``): the writer leaves them as they are, so they are conflicts
                raw = log.frontmatter.get(writer.DEPRECATED_KEY) or {}
                recorded = {str(k): str(v) for k, v in raw.items()}
                found[path] = {old: recorded[old] for old, new in pairs.items()
                               if old in recorded and recorded[old] != new}
                return writer.add_deprecations(text, pairs)

            edits[path] = edit
        self._edit_many(edits)
        for pairs in found.values():
            conflicts.update(pairs)
        return conflicts

    def undeprecate(self, ref: UserRef, ids: Iterable[str]) -> dict[str, str]:
        """Remove ``ids`` from ``deprecated_entries`` (explicit undo). Returns what was removed.
        All the files or none (:meth:`_edit_many`): one refused (an id twice in it) after
        another was written left an undo's sources half restored."""
        by_file: dict[Path, list[str]] = {}
        for old in ids:
            by_file.setdefault(self.path_for_id(ref, old), []).append(old)
        removed: dict[str, str] = {}
        edits: dict[Path, Callable[[str | None], str | None]] = {}
        for path, olds in by_file.items():
            if not path.is_file():
                continue
            label = self._label(path)

            def edit(text: str | None, olds: list[str] = olds, label: str = label) -> str | None:
                if text is None:
                    return None  # deleted meanwhile: nothing left to restore
                log = self._writable(self.parse_text(text, label, entries=False))
                _refuse_duplicates(text, label, "restoring entries of")
                removed.update(
                    {o: log.deprecated_entries[o] for o in olds if o in log.deprecated_entries}
                )
                return writer.remove_deprecations(text, olds)

            edits[path] = edit
        self._edit_many(edits)
        return removed

    def refuse_unarchivable(self, ref: UserRef, ids: Iterable[str], what: str) -> None:
        """Raise, before anything is written, what :meth:`deprecate` or :meth:`undeprecate`
        would raise on a file holding one of ``ids``: an id twice in it
        (:class:`MarkdownError`, its lines named), over the size limit (:class:`TooLarge`).
        A command that writes several logs (``undo``: the sources' logs, then the
        narrative's) checks them all first, so a refusal leaves every log as it was.
        ``what``: the words of the refusal ("not {what} this file")."""
        for path in sorted({self.path_for_id(ref, i) for i in ids}):
            try:
                data = self._load(path)
            except FileNotFoundError:
                continue
            _refuse_duplicates(data.decode("utf-8", "replace"), self._label(path), what)

    def archive_blockers(self, ref: UserRef, ids: Iterable[str]) -> list[str]:
        """Why the files holding ``ids`` cannot be archived into (duplicate ids, over the size
        limit), one reason per file; empty when they all can. Reflection checks this before it
        commits, so a cluster is skipped with the reason instead of failing half-way."""
        reasons = []
        for path in sorted({self.path_for_id(ref, i) for i in ids}):
            try:
                data = self._load(path)
            except FileNotFoundError:
                continue
            except TooLarge as exc:
                reasons.append(f"{self.rel(path)}: {exc}")
                continue
            dups = duplicate_ids(data.decode("utf-8", "replace"))
            if dups:
                reasons.append(f"{self.rel(path)}: " + "; ".join(
                    f"duplicate entry id {i} (lines {', '.join(map(str, at))})"
                    for i, at in sorted(dups.items())))
        return reasons

    def _parse_back(self, log: DailyLog, text: str, new_text: str,
                    blocks: list[tuple[str, str]]) -> list[Entry]:
        """The entries of ``blocks`` (``(id, rendered block)``, appended to ``text`` to make
        ``new_text``) parsed as the file will hold them; strict with our own writes: never
        write an entry that would not read back. All blocks are parsed in one go (once per
        entry, each after the file's header, cost a parse and a line count of the whole log
        per entry); only when that fails is each block parsed alone, to name the first one
        that does not read back and why."""
        prefix_len = len(writer.append_entry(text, ""))  # the log with its last line ended
        header = header_text(new_text[:prefix_len])
        check = parse_log(header + new_text[prefix_len:], log.path,
                          max_entry_bytes=self.limits.max_entry_bytes)
        shift = new_text.count("\n", 0, prefix_len) - header.count("\n")
        if [e.id for e in check.entries] != [entry_id for entry_id, _ in blocks]:
            # the line named is the refused block's in the file as it would be written (its
            # problem's line, else its first): it was line 0, which no file has
            before = 0  # lines of the blocks before the one parsed alone
            for entry_id, block in blocks:
                alone = parse_log(writer.append_entry(header, block), log.path,
                                  max_entry_bytes=self.limits.max_entry_bytes)
                if all(e.id != entry_id for e in alone.entries):
                    check = alone
                    break
                before += block.count("\n")
            else:
                entry_id, before = blocks[0][0], 0
            reason = "; ".join(d.message for d in check.diagnostics) or "it does not parse back"
            line = min((d.line for d in check.diagnostics if d.line > header.count("\n")),
                       default=header.count("\n") + 1)
            raise MarkdownError(log.path, line + shift + before,
                                f"refusing to write {entry_id}: {reason}")
        for entry in check.entries:
            entry.line += shift
        return check.entries

    def _writable(self, log: DailyLog) -> DailyLog:
        fatal = next((d for d in log.diagnostics if d.severity == "fatal"), None)
        if fatal is not None:
            raise MarkdownError(fatal.path, fatal.line, f"not writing this file: {fatal.message}")
        return log

    def _editable(self, path: Path, *, settle: bool = True
                  ) -> tuple[bytes | None, str | None]:
        """The file's bytes as read (None if absent), to detect a hand edit before the write,
        and its text once checked writable (a log with a fatal problem is never rewritten).
        ``settle``: waited for while another program may be writing it (:meth:`_settled_bytes`;
        a write does, under the file's lock); a look that writes nothing takes it as it is."""
        before = self._settled_bytes(path) if settle else self._load_or_none(path)
        if before is None:
            return None, None
        if not before.strip():  # empty (a `touch`) or blank: nothing to keep, and an append
            return before, before.decode("ascii")  # writes the log anew; it was refused
        log = self._parse(before, path, entries=False)
        self._writable(log)
        return before, log.text

    def _settled_bytes(self, path: Path) -> bytes | None:
        """The file's bytes (None if absent), once it stands still, when another program
        wrote it within :data:`settling.JUST_WRITTEN_NS` (:meth:`_in_other_hands`): read
        again after each :data:`settling.SETTLE_SECONDS` it moved; one that never stood still
        in :data:`settling.SETTLE_TRIES` waits is not written (:class:`MarkdownError`).
        ``cp backup.md`` over a log, an editor saving in place: truncated, then written
        again. A write that read it in between, even cut exactly before an entry (a log that
        looks whole), put back only what it read and its own change; its rename put a new
        file in the log's place, and all the rewriter wrote after went into the old one, lost
        with it. A person's save costs one wait; a log this store wrote itself, none."""
        for _ in range(settling.SETTLE_TRIES):
            try:
                st = os.stat(path)
            except OSError:
                st = None  # absent, or no file: the write's own checks say what is wrong
            before = self._load_or_none(path)  # after the stat: a later change moves it
            torn = st is not None and before is not None and _moved_while_read(path, st, before)
            if not torn and (st is None or before is None or not self._in_other_hands(path, st)):
                return before
            settling.pause(settling.SETTLE_SECONDS)
            if torn:  # what was read is no state the file was ever in: read it again
                continue
            with suppress(OSError):
                if _still(os.stat(path), st):
                    self._remember_still(os.path.realpath(path), _file_state(st))
                    return before
        raise MarkdownError(self._label(path), 0, "the file keeps changing (another program "
                            "is writing it); edit not applied, try again once it is saved")

    def _in_other_hands(self, path: Path, st: os.stat_result) -> bool:
        """Whether the file ``st`` describes may still be being written by another program:
        written (by its mtime) within :data:`settling.JUST_WRITTEN_NS`, or stamped ahead of
        this clock (a network share, a skewed clock, ``touch -d tomorrow``: its age is
        unknown), and not the very file this store last wrote there (its own writes rename a
        whole file into place: nobody writes into it) nor one it already saw stand still, as
        it is now (a write's check before its lock waited for it: the write does not again)."""
        if not settling.just_written(st.st_mtime_ns, time.time_ns()):
            return False
        return self._still.get(os.path.realpath(path)) != _file_state(st)

    def _edit(self, path: Path, edit: Callable[[str | None], str | None]) -> None:
        """Apply ``edit`` (current text or None if absent -> new text, or None to leave the file
        alone) under the file lock."""
        with self.one_listing():
            self._edit_listed(path, edit)

    def _edit_listed(self, path: Path, edit: Callable[[str | None], str | None]) -> None:
        # A refused edit (a log that cannot be edited, an entry or a log over its limit)
        # leaves no lock file nor folder it made (_undone_if_failed): the edit runs once,
        # under the lock. A check before the lock ran the first edit of every log twice.
        with self._undone_if_failed([path]) as undo, self.lock(path), undo.locks_held():
            for _ in range(_EDIT_ATTEMPTS):
                before, text = self._editable(path)
                new_text = edit(text)
                if new_text is None or new_text == text:
                    return
                data = self._fits(path, new_text)
                if self._load_or_none(path) != before:
                    continue  # edited by hand meanwhile: redo the edit on the new text
                self._write(_write_target(path), data)
                return
            raise MarkdownError(self._label(path), 0, "file keeps changing; edit not applied")

    def _undone_if_failed(self, paths: Iterable[Path]) -> _MadeForWrite:
        """What a write of ``paths`` is about to make (a new user's folders, the files' lock
        files), removed again if the write fails: a full disk or an I/O error mid-``add``
        left the new user's empty folders (listed as a user from then on) and
        ``.index/locks/md-….lock`` in a root it did not change."""
        folders: list[Path] = []
        locks: list[Path] = []
        for path in paths:
            folders += _missing_folders(path.parent, self.root)
            lock_file = self._lock_file(self._label(path))
            if not lock_file.exists():
                locks.append(lock_file)
                folders += _missing_folders(lock_file.parent, self.root)
        return _MadeForWrite(folders, locks)

    def _fits(self, path: Path, text: str) -> bytes:
        """``text`` encoded, or :class:`TooLarge` when it is over ``limits.max_file_bytes``: the
        store never writes a log it would then refuse to read. Appends checked this; archiving
        (``deprecated_entries`` keys) and metadata updates did not, and a log they pushed past
        the limit was "not read" from then on, every entry of it gone from the index."""
        data = text.encode("utf-8")
        if len(data) > self.limits.max_file_bytes:
            raise TooLarge(f"{self._label(path)} after this change", len(data),
                           "limits.max_file_bytes", self.limits.max_file_bytes)
        return data

    def _edit_many(self, edits: Mapping[Path, Callable[[str | None], str | None]]) -> None:
        """:meth:`_edit` for several files: each file's edit, check and atomic write exactly as
        alone, in the order given, but with the files' temp copies written and fsynced
        together beforehand (:func:`staged_writes`), so their fsyncs overlap instead of
        queueing one behind the other. The locks of all the files are held throughout (taken
        in sorted order, so two such writers never deadlock). An edit that raises leaves
        every file as it was; a file changed underneath meanwhile takes :meth:`_edit`'s own
        retry path."""
        if len(edits) < 2:
            for path, edit in edits.items():
                self._edit(path, edit)
            return
        with ExitStack() as stack:
            stack.enter_context(self.one_listing())
            undo = stack.enter_context(self._undone_if_failed(edits))
            for path in sorted(edits):
                stack.enter_context(self.lock(path))
            stack.enter_context(undo.locks_held())
            planned: dict[Path, tuple[bytes | None, bytes]] = {}
            for path, edit in edits.items():
                before, text = self._editable(path)
                new_text = edit(text)
                if new_text is not None and new_text != text:
                    planned[path] = (before, self._fits(path, new_text))
            targets = {path: _write_target(path) for path in planned}
            with staged_writes({targets[path]: data for path, (_, data) in planned.items()}):
                for path, (before, data) in planned.items():
                    if self._load_or_none(path) != before:
                        self._edit(path, edits[path])  # edited by hand meanwhile: redo it
                    else:
                        self._write(targets[path], data)

    def _write(self, target: Path, data: bytes) -> None:
        """:func:`_atomic_write`, keeping the log one file with its hard-linked aliases: the
        rename gave the written name a new file, and a second user's name hard-linked to it
        (refused as "a hard link to …") kept the old one, an independent copy read from
        then on as that user's memory. Each such name is linked to the new file again, and
        so is a name a person moved or linked into the root meanwhile (:meth:`_relink_late`).
        Temp files killed writes of it left are removed first (:func:`_remove_leftovers`).
        """
        _remove_leftovers(target)
        st, names = self._same_file_logs(target)
        real = os.path.realpath(target)
        aliases = [other for other in names if str(other) != real]
        for alias in aliases:
            self._check_relinkable(target, alias)
        if st is None or st.st_nlink < 2:
            _atomic_write(target, data)
            self._written_here(real)
            return
        with ExitStack() as stack:
            old, fd = st, None
            with suppress(OSError):  # held open, its names are counted after the write
                fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                stack.callback(os.close, fd)
                old = os.fstat(fd)
            _atomic_write(target, data)
            self._written_here(real)
            done = [self._relink(target, alias, old) for alias in aliases]
            relinked = done.count("relinked")
            if "moved" in done or (fd is not None
                                   and os.fstat(fd).st_nlink > old.st_nlink - 1 - relinked):
                self._relink_late(target, old)
            elif aliases:
                self._same_files.forget()  # the names are of a new file now

    def _written_here(self, real: str) -> None:
        """Remember the file just renamed into place at ``real`` as this store's own
        (:meth:`_in_other_hands`): the next write to it need not wait for it to settle."""
        with suppress(OSError):
            self._remember_still(real, _file_state(os.stat(real)))

    def _remember_still(self, real: str, state: tuple[int, int, int, int]) -> None:
        """Remember ``state`` as the log at ``real`` this store wrote or saw stand still, and,
        once the count doubled since the last sweep (at least :data:`_STILL_KEPT`), forget the
        logs written longer ago than :data:`settling.JUST_WRITTEN_NS`: no write waits for
        those anyway, and a long-running ``serve`` kept one row per log it ever wrote. A burst
        of writes to many logs costs amortised O(1) each."""
        self._still[real] = state
        if len(self._still) < self._still_sweep_at:
            return
        settled = time.time_ns() - settling.JUST_WRITTEN_NS
        for path, (_, _, _, mtime_ns) in list(self._still.items()):
            if mtime_ns < settled:
                self._still.pop(path, None)
        self._still_sweep_at = max(_STILL_KEPT, 2 * len(self._still))

    def _relink_late(self, target: Path, old: os.stat_result) -> None:
        """Link to the new ``target`` every daily log of the root that is still the old file
        (``old``) after the write's own re-links: a name of it moved (``mv users/bob/…
        users/carol/…``) or linked into the root by a person while the write ran. Looked for
        in a listing made now, only when the old file's names were not all accounted for."""
        real = os.path.realpath(target)
        for name in self._same_files.listed_now(old):
            if name != real:
                self._relink(target, Path(name), old)
        self._same_files.forget()  # the names are of a new file now

    def _check_relinkable(self, target: Path, alias: Path) -> None:
        """Refuse the write, before anything is written, when ``alias`` could not be linked
        to the new file (its folder read-only, another account's): written anyway, the alias
        kept the old text as a file of its own, no longer a link, and was read from then on
        as its user's memory. A link made there and removed again is the proof."""
        probe = alias.with_name(f".{alias.name}.{secrets.token_hex(6)}.tmp")
        try:
            os.link(target, probe)
        except OSError as exc:
            raise MarkdownError(
                self._label(target), 0,
                f"not written: {self._label(alias)} is a hard link to it that could not be "
                f"linked to the new text ({os_reason(exc)}), so it would keep the old "
                "text as a log of its own; remove that link or make its folder writable"
            ) from None
        probe.unlink(missing_ok=True)

    def _hard_link_aliases(self, target: Path) -> list[tuple[Path, os.stat_result]]:
        """The other daily logs of this root that are ``target`` itself (one inode), each
        with that file's stat. Links outside the layout (a backup's, ``cp -al``) are left to
        keep the old text, as a backup should."""
        st, names = self._same_file_logs(target)
        real = os.path.realpath(target)
        return [(other, st) for other in names if st is not None and str(other) != real]

    def _relink(self, target: Path, alias: Path, old: os.stat_result) -> str:
        """``alias`` made a hard link of ``target`` again if it is still the file it was
        before the write (``old``): ``relinked``; ``moved`` when it is not (gone, or a
        person's file now), ``failed`` when it could not be (said in the log). The name is
        moved aside first and looked at there, never checked and then replaced: a file a
        person put at that name meanwhile (``mv notes.md users/bob/…``) was replaced by the
        log, its text lost. Such a file is put back, and one made at the name while it was
        aside stays."""
        hold = alias.with_name(f".{alias.name}.{secrets.token_hex(6)}.tmp")
        try:
            os.rename(alias, hold)
        except FileNotFoundError:  # moved away by a person: :meth:`_relink_late` looks
            return "moved"
        except OSError as exc:
            self._not_relinked(target, alias, exc)
            return "failed"
        try:
            aside = os.lstat(hold)
        except OSError:  # taken from there too, in the same instant
            return "moved"
        if not os.path.samestat(aside, old):
            self._put_back(hold, alias)
            return "moved"
        try:
            os.link(target, alias)
        except FileExistsError:  # a person's file made there meanwhile stays
            pass
        except OSError as exc:
            self._put_back(hold, alias)
            self._not_relinked(target, alias, exc)
            return "failed"
        with suppress(OSError):  # the new text is written and linked: this is tidying
            os.unlink(hold)
            _fsync_dir(alias.parent)
        return "relinked"

    def _put_back(self, hold: Path, alias: Path) -> None:
        """The file moved aside to ``hold`` named ``alias`` again, unless something took that
        name meanwhile: then it is left at ``hold`` and the log says where."""
        try:
            os.link(hold, alias)
        except FileExistsError:
            _log.warning("%s was replaced twice while a write re-linked it: the file that was "
                         "there first is kept as %s", self._label(alias), self._label(hold))
            return
        except OSError as exc:
            _log.warning("%s could not be put back after a write re-linked it (%s): it is "
                         "kept as %s", self._label(alias), os_reason(exc),
                         self._label(hold))
            return
        os.unlink(hold)

    def _not_relinked(self, target: Path, alias: Path, exc: OSError) -> None:
        _log.warning("%s is a hard link to %s, which was rewritten: it could not be "
                     "linked to the new file (%s), so it now holds a copy of the old text",
                     self._label(alias), self._label(target), os_reason(exc))

    def size_after(self, path: Path, change: Callable[[str | None], str | None]) -> int | None:
        """The bytes ``path`` would hold after ``change`` (the text edit a write would make:
        current text or None if absent -> new text, None for unchanged), measured without
        writing or locking. None when the file cannot be edited as it is (over the limit
        already, a fatal problem, a symlink out of the root): the write reports that itself.
        For callers that must know a write fits ``limits.max_file_bytes`` before they commit
        to it, as a merge must before its journal row exists."""
        try:
            _, text = self._editable(path, settle=False)
            new_text = change(text)
        except (EverosError, ValueError):
            return None
        if new_text is None:
            new_text = text or ""
        return len(new_text.encode("utf-8"))

    def _load_or_none(self, path: Path) -> bytes | None:
        if (problem := self.link_problem(path)) is not None:
            raise MarkdownError(self._label(path), 0, f"not writing this file: {problem}")
        try:
            return self._load(path)
        except FileNotFoundError:
            return None
        except OutsideRoot as exc:
            raise MarkdownError(self._label(path), 0,
                                f"not writing this file: {exc.strerror}") from None
        except TooLarge as exc:
            raise MarkdownError(self._label(path), 0, f"not writing this file: {exc}") from exc


def _file_state(st: os.stat_result) -> tuple[int, int, int, int]:
    """Which file, of which size and mtime, ``st`` describes."""
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _moved_while_read(path: Path, st: os.stat_result, data: bytes) -> bool:
    """Whether the file ``st`` described before ``data`` was read from it changed during the
    read (a truncation begun in between: ``cp backup.md`` over the log): the stats taken
    before said a log this store wrote, or one untouched for long, so a write took the bytes
    of the cut-short log for the log, and its rename left the rest of the copy in the old
    file, lost with it."""
    try:
        return len(data) != st.st_size or not _still(os.stat(path), st)
    except OSError:
        return True


def _still(now: os.stat_result, before: os.stat_result) -> bool:
    """Whether the file at a name is the same, unchanged, as ``before``."""
    return _file_state(now) == _file_state(before)


def _in_users_folder(parts: tuple[str, ...]) -> bool:
    """Whether a path of the root (its ``parts``) lies under some ``<app>/<project>/users/``
    folder, where only user folders and their logs go."""
    return len(parts) > 3 and parts[2] == "users"


def widest_seq(ids: Iterable[str]) -> int:
    """A sequence number never shorter than that of any of ``ids`` nor than seven digits
    (all nines): what a size check puts in an id not allocated yet. Seven digits alone were
    one byte short per mention of an eight-digit id (a day whose log holds a hand-written
    ``…_12345678``), so a merge measured as fitting was refused at its write."""
    digits = max((len(i.rpartition("_")[2]) for i in ids), default=0)
    return 10 ** min(max(7, digits), SEQ_MAX_DIGITS) - 1


def _withdrawn_size(text: str, ids: list[str], day: date, blocks: Iterable[str] = ()) -> int:
    """The bytes of ``text`` once ``deprecated_entries`` withdraws ``ids`` toward an episode of
    ``day``, whose id is never shorter than one the appended ``blocks`` name (the narrative's
    own, or the one its facts name as ``parent_id``; :func:`widest_seq`). Reflection appends
    its narrative and facts with this room kept: withdrawing a merge that cannot complete adds
    exactly such keys, and a log the appends had filled to the limit refused them, so the
    merge could be neither finished nor withdrawn (its narrative live beside its sources)."""
    named = [*ids, *(i for block in blocks for i in mentioned_ids(block))]
    toward = str(EntryId(Kind.EPISODE, day, widest_seq(named)))
    try:
        return len(writer.add_deprecations(text, dict.fromkeys(ids, toward)).encode("utf-8"))
    except EverosError as exc:  # the frontmatter cannot take the keys (YAML value bound)
        # refused like a log with no room: written anyway, the entry could not be withdrawn
        # (a merge stuck 'abandoning', its narrative live beside its sources)
        raise NoRoomToWithdraw(str(exc)) from exc


def _refuse_duplicates(text: str, label: str, what: str) -> None:
    """Archive writers never touch a file whose ids are not unique: a ``deprecated_entries`` key
    names an id, so it would also archive the second block, which nobody indexed or merged."""
    dups = duplicate_ids(text)
    if dups:
        entry_id, at = min(dups.items(), key=lambda item: item[1][0])
        raise MarkdownError(
            label, at[1],
            f"not {what} this file: duplicate entry id {entry_id} (lines "
            f"{', '.join(map(str, at))}); rename or remove one of them (see `lint`)")



#: Per thread: the folders whose renames still await their fsync, inside :func:`durable_group`.
_group = threading.local()


@contextmanager
def durable_group() -> Iterator[None]:
    """Writes of this thread inside the block fsync their file as always, but each folder they
    renamed into is fsynced once, when the block ends (also when it ends by an exception), not
    once per file: a step of a Reflection batch archives into dozens of logs in two folders per
    user. Everything written in the block is durable when it returns, which is when the
    caller records the step as done. Nested blocks join the outermost one."""
    if getattr(_group, "folders", None) is not None:
        yield
        return
    folders: dict[Path, None] = {}
    _group.folders = folders
    try:
        yield
    finally:
        _group.folders = None
        for folder in folders:
            _fsync_dir(folder)


def _fsync_dir(folder: Path) -> None:
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _held_at(lock: FileLock, lock_file: Path) -> bool:
    """Whether the file ``lock`` holds is the one at ``lock_file`` (True when filelock does
    not say which it holds)."""
    fd = getattr(getattr(lock, "_context", None), "lock_file_fd", None)
    if not isinstance(fd, int):
        return True
    try:
        return os.path.samestat(os.fstat(fd), os.stat(lock_file))
    except OSError:
        return False


def _missing_folders(folder: Path, root: Path) -> list[Path]:
    """``folder`` and its parents below ``root`` that do not exist, deepest first."""
    missing: list[Path] = []
    while folder != root and root in folder.parents and not folder.exists():
        missing.append(folder)
        folder = folder.parent
    return missing


class _MadeForWrite:
    """Context manager of :meth:`MarkdownStore._undone_if_failed`: on a failure, the lock
    files it names are removed while still held (:meth:`locks_held`; a writer waiting on one
    then finds it gone and takes a new one, :meth:`MarkdownStore.lock`), then the folders,
    deepest first, each only if still empty (another writer may have put a file there)."""

    def __init__(self, folders: list[Path], locks: list[Path]) -> None:
        self.folders = sorted(set(folders), key=lambda p: len(p.parts), reverse=True)
        self.locks = locks

    def __enter__(self) -> _MadeForWrite:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        if kind is None:
            return
        for folder in self.folders:
            with suppress(OSError):
                folder.rmdir()

    @contextmanager
    def locks_held(self) -> Iterator[None]:
        try:
            yield
        except BaseException:
            for lock_file in self.locks:
                with suppress(OSError):
                    lock_file.unlink()
            raise


def _write_target(path: Path) -> Path:
    """The file an atomic write of ``path`` replaces: a link that stays inside the root (the
    callers checked that) is written through, so the rename replaces its target, never the
    link itself."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


#: Per thread: temp files already written and fsynced, by destination (:func:`staged_writes`).
_staging = threading.local()
#: Threads that write and fsync staged temp files (they wait on the disk, not the CPU).
_STAGING_THREADS = 8
_stager: ThreadPoolExecutor | None = None
_stager_guard = threading.Lock()


@contextmanager
def staged_writes(writes: Mapping[Path, bytes]) -> Iterator[None]:
    """Write and fsync a temp file for each of ``writes`` now, all at once on a few threads
    (a disk acknowledges fsyncs that overlap together: ~5x faster than one after the other
    for 30 small files); inside the block, :func:`_atomic_write` of one of those paths with
    those very bytes renames its temp file instead of writing and fsyncing one. Nothing is
    renamed here, so which files change, in which order, and what a crash at any point
    leaves are the writer's as before; a temp file not used by the end of the block is
    deleted. A temp file that cannot be written is simply not staged (the write itself
    then meets the error where it always did)."""
    if len(writes) < 2 or getattr(_staging, "temps", None) is not None:
        yield
        return
    items = list(writes.items())
    temps: dict[Path, tuple[bytes, Path]] = {}
    for (path, data), tmp in zip(items, _stage_pool().map(_staged_temp, items), strict=True):
        if tmp is not None:
            temps[path] = (data, tmp)
    _staging.temps = temps
    try:
        yield
    finally:
        _staging.temps = None
        for _, tmp in temps.values():
            tmp.unlink(missing_ok=True)


def _stage_pool() -> ThreadPoolExecutor:
    global _stager
    with _stager_guard:
        if _stager is None:
            _stager = ThreadPoolExecutor(_STAGING_THREADS, thread_name_prefix="md-fsync")
        return _stager


def _staged_temp(item: tuple[Path, bytes]) -> Path | None:
    try:
        return _write_temp(*item)
    except OSError:
        return None


def _write_temp(path: Path, data: bytes) -> Path:
    """``.<name>.<random>.tmp`` beside ``path`` holding ``data``, fsynced."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    for attempt in range(3):
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            # 0o666 lets the kernel apply the umask to a new file; an existing one keeps its mode.
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            break
        except FileNotFoundError as exc:  # the folder just made, removed by a failed write
            if attempt == 2:
                raise _naming(exc, path) from None
        except OSError as exc:
            raise _naming(exc, path) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise _naming(exc, path) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def _naming(exc: OSError, path: Path) -> OSError:
    """``exc`` (of the temp file a write of ``path`` goes through) naming ``path``: the log a
    person knows, not ``.episode-….md.3f2b5b1f98f2.tmp`` (a read-only folder), nor no file at
    all ("[Errno 28] No space left on device" from a write or fsync)."""
    return OSError(exc.errno, os_reason(exc), str(path))


#: A temp file of a write (``.<name>.<12 hex>.tmp``) this much older than now was left by a
#: write that was killed before its rename: every write makes and renames its own in well
#: under a second, under the log's lock.
LEFTOVER_SECONDS = 60.0


#: Per folder (its path as written to): when this process last listed it for temp files
#: (monotonic seconds), and the temp files found there too young to be a killed write's, by
#: the name of their log (:func:`_remove_leftovers`).
_listed: dict[str, tuple[float, dict[str, list[str]]]] = {}
_listed_guard = threading.Lock()


def look_for_leftovers(folder: str | os.PathLike[str]) -> None:
    """Have the next write of a log in ``folder`` list it for leftover temp files again: a
    scan found one there (:func:`_remove_leftovers` lists a folder at most once a minute)."""
    with _listed_guard:
        _listed.pop(os.fspath(folder), None)


def _remove_leftovers(path: Path) -> None:
    """Remove the temp files writes of ``path`` that were killed before their rename left
    beside it (:data:`LEFTOVER_SECONDS` old), saying so in the log. Called under the log's
    lock, when it is written again: each was a whole copy of the log, kept for good (a crash
    loop, a power cut), unseen by ``lint`` and ``status`` and listed by ``git status``. None
    holds anything the log lacks: a write is not made until its rename. A file of another
    name, or a link, is left alone.

    The folder is listed at most once per :data:`LEFTOVER_SECONDS` (and again once a scan
    saw a temp file in it: :func:`look_for_leftovers`); the temp files of each log found
    too young then are looked at by name at its next writes. Listed at every write, a
    folder of 3,650 daily logs cost 1.4 ms a write. Nothing is missed: a killed write's temp
    file is stamped when it was last written to, so one a minute old was there at a listing
    made since, or none was made for a minute and this write lists the folder."""
    folder, clock = os.fspath(path.parent), time.monotonic()
    with _listed_guard:
        seen = _listed.get(folder)
        if seen is not None and clock - seen[0] >= LEFTOVER_SECONDS:
            seen = None
    if seen is None:
        try:
            names = os.listdir(folder)
        except OSError:
            return
        temps: dict[str, list[str]] = {}
        for name in names:
            if name.startswith(".") and name.endswith(".tmp") and len(name) > 18 \
                    and name[-17] == "." and _is_temp_tag(name[-16:-4]):
                temps.setdefault(name[1:-17], []).append(name)
        seen = (clock, temps)
        with _listed_guard:
            _listed[folder] = seen
    with _listed_guard:
        names = seen[1].pop(path.name, [])
    young: list[str] = []
    now = time.time()
    for name in names:
        leftover = path.parent / name
        with suppress(OSError):  # gone: renamed by the write that made it
            st = os.lstat(leftover)
            if not stat.S_ISREG(st.st_mode):
                continue
            if now - st.st_mtime <= LEFTOVER_SECONDS:
                young.append(name)  # maybe a live write's: looked at again next time
                continue
            leftover.unlink()
            _log.warning("removed %s: a copy of %s an interrupted write left",
                         leftover, path.name)
    if young:
        with _listed_guard:
            seen[1].setdefault(path.name, []).extend(young)


def _is_temp_tag(tag: str) -> bool:
    """Whether ``tag`` is the random part :func:`_write_temp` puts in a temp file's name."""
    return len(tag) == 12 and all(c in "0123456789abcdef" for c in tag)


def _atomic_write(path: Path, data: bytes) -> None:
    """Temp file ``.<name>.<random>.tmp`` in the same folder, fsync, rename, fsync the folder
    (inside :func:`durable_group`: once per folder, when the group ends). Inside
    :func:`staged_writes`, the temp file staged for these bytes is renamed instead."""
    temps: dict[Path, tuple[bytes, Path]] | None = getattr(_staging, "temps", None)
    staged = temps.pop(path, None) if temps else None
    if staged is not None and staged[0] == data:
        tmp = staged[1]
    else:
        if staged is not None:
            staged[1].unlink(missing_ok=True)
        tmp = _write_temp(path, data)
    try:
        with suppress(FileNotFoundError):
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise _naming(exc, path) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    folders = getattr(_group, "folders", None)
    if folders is not None:
        folders[path.parent] = None  # an ordered set: fsynced in the order first written
    else:
        _fsync_dir(path.parent)
