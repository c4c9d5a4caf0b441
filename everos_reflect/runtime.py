"""One memory root, opened: settings, the Markdown store and lazily built providers/indexes.

Every edge (CLI, HTTP API, scheduler) works through a :class:`Runtime`, so tests can hand in
fakes (an in-memory embedder, a scripted LLM) and everything else stays real.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
import threading
import time
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from everos_reflect.errors import EverosError, IndexReadOnly, NeverIndexed, NoRoot, RootGone
from everos_reflect.fileio import expand_user
from everos_reflect.index import db as dbmod
from everos_reflect.markdown.store import MarkdownStore
from everos_reflect.model import UserRef, shell_path, shown_path, validate_name
from everos_reflect.settings import OME_FILE_NAME, USER_FILE_NAME, Settings, load_settings

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    from everos_reflect.embedding.base import Embedder
    from everos_reflect.index.vectors import VectorIndex
    from everos_reflect.llm.base import LLM


def resolve_root(root: str | os.PathLike[str] | None) -> Path:
    """``--root``, else ``EVEROS_ROOT``, else ``~/.everos`` (SPEC §2).

    Raises :class:`EverosError` naming the path when it runs into a symlink loop: Python
    3.11's ``Path.resolve`` raises a bare ``RuntimeError`` there, which every command
    printed as a traceback.

    An explicit empty path (``--root ""``, ``init ""``: what ``"$ROOT"`` gives when the
    variable is unset) is refused rather than read as "not given": it would silently send the
    command, an ``undo`` or a ``reindex`` say, to ``EVEROS_ROOT`` or ``~/.everos`` instead of
    the root the caller meant. An empty ``EVEROS_ROOT`` still means unset, as for any
    environment variable."""
    if root is not None and not os.fspath(root):
        raise EverosError("the memory root is an empty path: pass the root's folder")
    if root:
        given = expand_user(root, "the root")
    elif os.environ.get("EVEROS_ROOT"):
        given = expand_user(os.environ["EVEROS_ROOT"], "EVEROS_ROOT")
    else:
        given = expand_user("~/.everos", "the default root")
    try:
        return given.resolve()
    except (RuntimeError, OSError) as exc:  # RuntimeError: 3.11's "Symlink loop from ..."
        if isinstance(exc, OSError) and exc.errno != errno.ELOOP:
            raise
        raise EverosError(f"{given.absolute()} is a symlink loop, not a memory root") from None


#: What ``init`` (or any earlier use) leaves in a memory root; one of them makes a folder a root.
ROOT_MARKERS = (USER_FILE_NAME, OME_FILE_NAME, ".index")


def is_memory_root(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a memory root: a folder holding ``everos.toml``, ``ome.toml`` or
    ``.index/``, or the SPEC §2 layout ``<app>/<project>/users/`` (a root written by hand or by
    another tool, never opened yet).

    The one definition every command uses, so none of them turns an arbitrary folder (a home
    directory, a typo'd path) into a root by creating ``.index/`` or a log inside it.
    """
    folder = Path(path)
    if not folder.is_dir():
        return False
    if any((folder / marker).exists() for marker in ROOT_MARKERS):
        return True
    try:
        apps = [e for e in os.scandir(folder) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return False
    for app in apps:
        try:
            validate_name(app.name, "app_id")
            projects = [e for e in os.scandir(app.path) if e.is_dir(follow_symlinks=False)]
        except (OSError, ValueError):
            continue
        if any(os.path.isdir(os.path.join(p.path, "users")) for p in projects):
            return True
    return False


def not_a_root_reason(path: Path) -> str | None:
    """Why ``path`` cannot be opened as a memory root (None when it can)."""
    shown = shown_path(path)
    if not path.exists():
        return (f"no memory root at {shown}: create one with "
                f"`everos-reflect init {shell_path(path)}`")
    if not path.is_dir():
        return f"{shown} is not a folder, so not a memory root"
    if not is_memory_root(path):
        return (f"{shown} is not a memory root (it has no everos.toml, ome.toml, .index/ or "
                f"<app>/<project>/users/ folder): create one with "
                f"`everos-reflect init {shell_path(path)}`")
    return None


class Runtime:
    """Shared handles for one memory root. Thread-safe: SQLite connections are per thread."""

    def __init__(
        self,
        root: Path,
        settings: Settings | None = None,
        *,
        embedder: Embedder | None = None,
        llm: LLM | None = None,
        ome_defaults: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        from everos_reflect import wiring

        wiring.install()  # change-event subscribers (clustering, provenance): once per process
        self.root = Path(root)
        #: the root folder's identity when opened (None: not there yet, e.g. a new root)
        self._root_id = _identity(self.root)
        self.settings = settings if settings is not None else load_settings(self.root)
        self.store = MarkdownStore(self.root, limits=self.settings.limits,
                                   seen_seq=self._seen_seq)
        #: Strategy tables the root's own ``ome.toml`` is laid over (a fleet's defaults):
        #: every :class:`~everos_reflect.engine.engine.Engine` of this runtime reads its
        #: strategies so, whether it runs them or only reports them (``status``, ``clusters``).
        self.ome_defaults: dict[str, dict[str, Any]] = {
            k: dict(v) for k, v in (ome_defaults or {}).items()}
        self._local = threading.local()
        #: bumped each time the index is found deleted or replaced (:meth:`check_index`): a
        #: thread's connection, or a cache, made for an older generation is let go at its
        #: next use
        self.index_generation = 0
        #: identity of the ``system.db`` the handles are open on (None: none opened since)
        self._index_id: tuple[int, int] | None = None
        #: identity of the ``lancedb`` folder :attr:`vectors` is open on (None: not opened)
        self._vectors_id: tuple[int, int] | None = None
        self._index_lock = threading.Lock()
        #: cleared from when a lost index is noticed until :attr:`index_keeper` rebuilt it
        self._index_ready = threading.Event()
        self._index_ready.set()
        #: scans embedding again the entries of a vector table found deleted (:meth:`refilling`)
        self._refills = 0
        self._refilled = threading.Condition()
        #: told (on the thread that noticed) when the index was found lost; set by whoever
        #: rebuilds it, the watcher of ``serve``. Without one a lost index starts empty, as
        #: a new root's does, until a ``reindex``.
        self.index_keeper: Callable[[], None] | None = None
        if embedder is not None:
            self.__dict__["embedder"] = embedder
        if llm is not None:
            self.__dict__["llm"] = llm

    @classmethod
    def open(cls, root: str | os.PathLike[str] | None = None, **kwargs: object) -> Runtime:
        return cls(resolve_root(root), **kwargs)  # type: ignore[arg-type]

    @property
    def index_dir(self) -> Path:
        return self.root / ".index"

    @cached_property
    def read_only(self) -> bool:
        """Whether this process cannot write the root's index: a read-only mount, a root of
        another user. Such a root is still read: its index is opened read-only, as it was
        last built (a hand edit since then is not seen), and whatever would write to it
        says so in one line (:class:`~everos_reflect.errors.IndexReadOnly`). A root without
        an index is judged by its own folder (the first write creates ``.index``)."""
        return index_read_only(self.root)

    def index_to_read(self) -> None:
        """Raise :class:`~everos_reflect.errors.NeverIndexed` before a read of the index of a
        read-only root that has none (``search``, ``briefing``, ``clusters``; CLI, API and
        MCP alike): nothing here can build it."""
        if self.read_only and not dbmod.db_built(self.root):
            raise NeverIndexed(shown_path(self.root))

    def writable(self) -> None:
        """Raise :class:`~everos_reflect.errors.IndexReadOnly` before a write to a root this
        process cannot write, as the CLI's writing commands do: an MCP ``add_episode`` failed
        naming the lock file it could not create ("Read-only file system: .index/locks/…")."""
        if self.read_only:
            raise IndexReadOnly(self.index_dir)

    def connect(self) -> sqlite3.Connection:
        """A new connection to ``system.db`` (the root checked first), for one thread to
        :meth:`adopt`; its owner closes it."""
        self.check_root()
        self.check_index()
        return self._open()

    def _open(self) -> sqlite3.Connection:
        conn = dbmod.connect(self.root, readonly=self.read_only)
        if self._index_id is None:
            self._index_id = _file_identity(dbmod.db_path(self.root))
        return conn

    def adopt(self, conn: sqlite3.Connection) -> None:
        """Make ``conn`` this thread's connection (:meth:`db`), e.g. one opened by the thread
        that started this thread's work while the root was certainly there."""
        self._local.conn, self._local.generation = conn, self.index_generation

    def _seen_seq(self, ref: UserRef, stem: str) -> int:
        """The store's id watermark (:func:`reads.id_watermark`): none before the root has an
        index (the first append of a new root creates no database), nor from an index that
        cannot be read (the file's own ids decide alone, as they did before there was one)."""
        from everos_reflect.index import reads

        if not dbmod.db_path(self.root).is_file():
            return 0
        try:
            return reads.id_watermark(self.db(), ref, stem, self.root,
                                      self.settings.limits.max_file_bytes)
        except sqlite3.Error:
            return 0

    def db(self) -> sqlite3.Connection:
        """This thread's connection to ``system.db`` (created and migrated on first use, and
        again once the index it was opened on was found deleted or replaced).

        The connection of a lost index is let go, never closed here: a frame further up this
        thread may hold it still (a run's record, an undo's journal row, a transaction's
        block) and goes on with it, into the old file, to the end of its work; closing it
        under that frame failed it with "Cannot operate on a closed database" (``rm -rf
        .index`` under ``serve``). Once no frame holds it, it is freed, and so closed, by the
        next garbage collection (it and its statement cache refer to each other), as the
        connection of a thread that ended is."""
        conn = getattr(self._local, "conn", None)
        if conn is not None and getattr(self._local, "generation", 0) != self.index_generation:
            self._local.conn = conn = None
        if conn is None:
            self.check_root()
            self.check_index()
            conn = self._open()
            self._local.conn, self._local.generation = conn, self.index_generation
        return conn

    @cached_property
    def embedder(self) -> Embedder:
        from everos_reflect.embedding import CachingEmbedder, make_embedder

        return CachingEmbedder(make_embedder(self.settings.embedding))

    @cached_property
    def vectors(self) -> VectorIndex:
        from everos_reflect.index.vectors import VectorIndex

        self.check_root()
        vectors = VectorIndex(self.index_dir / "lancedb", dim=self.embedder.dim,
                              read_only=self.read_only, embedder_name=self.embedder.name)
        self._vectors_id = _identity(vectors.path)
        return vectors

    def index_lost(self) -> bool:
        """Whether the ``system.db`` this runtime's handles are open on is no longer at its
        path: deleted (``rm -rf .index``, which the index being derived makes safe) or
        replaced by another one (deleted, then made again by another process); or the
        ``lancedb`` folder :attr:`vectors` is open on, likewise. Two ``stat``; False before
        any was opened."""
        held = self._index_id
        if held is not None and _file_identity(dbmod.db_path(self.root)) != held:
            return True
        # only the vector index deleted (``rm -rf .index/lancedb`` to free space): its open
        # tables fail "Not found" and, made again empty, would answer every search with less
        held = self._vectors_id
        return held is not None and _identity(self.index_dir / "lancedb") != held

    def check_index(self) -> bool:
        """Let go of every handle on an index found lost (:meth:`index_lost`) and tell the
        :attr:`index_keeper`; True for the one call that noticed.

        SQLite and LanceDB notice nothing: every thread's connection went on writing into
        the deleted file (lost), and every LanceDB read and write failed ("Not found:
        .../_versions") until a restart. Each thread's connection is replaced at its next
        use (:attr:`index_generation`), the vector index at once; caches kept per runtime
        compare the generation."""
        if not self.index_lost():
            return False
        with self._index_lock:
            if not self.index_lost():
                return False  # another thread noticed first
            keeper = self.index_keeper
            if keeper is not None:
                self._index_ready.clear()
            self.index_generation += 1
            self._index_id = self._vectors_id = None
            self.__dict__.pop("vectors", None)
        if keeper is not None:
            keeper()
        return True

    @property
    def index_rebuilding(self) -> bool:
        """Whether an index found lost is still waiting to be rebuilt (or being rebuilt), or a
        scan is embedding again the entries of a vector table found deleted."""
        return not self._index_ready.is_set() or self._refills > 0

    def wait_index(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a lost index to be rebuilt (and every refill of
        :meth:`refilling` to end); whether it was."""
        deadline = time.monotonic() + timeout
        if not self._index_ready.wait(timeout):
            return False
        with self._refilled:
            return self._refilled.wait_for(lambda: self._refills == 0,
                                           max(0.0, deadline - time.monotonic()))

    @contextmanager
    def refilling(self) -> Iterator[None]:
        """Say :attr:`index_rebuilding` for the length of a ``with`` block: a scan embedding
        again the entries of a vector table deleted by hand (``rm -rf .index/lancedb``).

        A request checks that the ``lancedb`` folder is still the one it opened; a scan that
        found the tables gone made the folder again, and a file system that gave the new
        folder the deleted one's inode (ext4 does) passed that check: searches in between
        answered 200 with no hits, an empty list passed off as the answer."""
        with self._refilled:
            self._refills += 1
        try:
            yield
        finally:
            with self._refilled:
                self._refills -= 1
                self._refilled.notify_all()

    def index_rebuilt(self) -> None:
        """Said by the :attr:`index_keeper` once the index is rebuilt (or given up on)."""
        self._index_ready.set()

    @cached_property
    def llm(self) -> LLM:
        from everos_reflect.llm import make_llm

        return make_llm(self.settings.llm, self.embedder)

    def root_gone(self) -> bool:
        """Whether the root folder this runtime opened is no longer at its path (moved,
        deleted, or replaced by another folder). Always False for a root that did not exist
        when opened (it is being created)."""
        return self._root_id is not None and _identity(self.root) != self._root_id

    def check_root(self) -> None:
        """Raise :class:`NoRoot` when the root folder does not exist (and never did since
        this runtime opened it), :class:`RootGone` once it was moved or deleted. Reads call
        this before touching the index: SQLite and LanceDB create their folders, so a read
        of a mistyped path made that path an empty root. A root that appears later (the first
        append of a new root creates it) is taken as the root from then on."""
        if self._root_id is None:
            self._root_id = _identity(self.root)
            if self._root_id is None:
                raise NoRoot(f"no memory root at {shown_path(self.root)}: create one with "
                             f"`everos-reflect init {shell_path(self.root)}`")
        if self.root_gone():
            raise RootGone(f"the memory root {shown_path(self.root)} is gone (moved or deleted "
                           "while in use)")

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


def index_read_only(root: Path) -> bool:
    """:attr:`Runtime.read_only` of ``root``, for a command that writes without a runtime."""
    index_dir = root / ".index"
    folder = index_dir if index_dir.is_dir() else root
    return folder.is_dir() and not os.access(folder, os.W_OK)


def _file_identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path``, or None when there is none."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def _identity(folder: Path) -> tuple[int, int] | None:
    """(device, inode) of ``folder``, or None when it is not an existing folder."""
    try:
        st = os.stat(folder)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None
