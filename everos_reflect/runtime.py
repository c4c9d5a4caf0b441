"""One memory root, opened: settings, the Markdown store and lazily built providers/indexes.

Every edge (CLI, HTTP API, scheduler) works through a :class:`Runtime`, so tests can hand in
fakes (an in-memory embedder, a scripted LLM) and everything else stays real.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from everos_reflect.index import db as dbmod
from everos_reflect.markdown.store import MarkdownStore
from everos_reflect.settings import Settings, load_settings

if TYPE_CHECKING:
    from everos_reflect.embedding.base import Embedder
    from everos_reflect.index.vectors import VectorIndex
    from everos_reflect.llm.base import LLM


def resolve_root(root: str | os.PathLike[str] | None) -> Path:
    """``--root``, else ``EVEROS_ROOT``, else ``~/.everos`` (SPEC §2)."""
    if root:
        return Path(root).expanduser().resolve()
    env = os.environ.get("EVEROS_ROOT")
    if env:
        return Path(env).expanduser().resolve()
    return (Path.home() / ".everos").resolve()


class Runtime:
    """Shared handles for one memory root. Thread-safe: SQLite connections are per thread."""

    def __init__(
        self,
        root: Path,
        settings: Settings | None = None,
        *,
        embedder: Embedder | None = None,
        llm: LLM | None = None,
    ) -> None:
        self.root = Path(root)
        self.settings = settings if settings is not None else load_settings(self.root)
        self.store = MarkdownStore(self.root)
        self._local = threading.local()
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

    def db(self) -> sqlite3.Connection:
        """This thread's connection to ``system.db`` (created and migrated on first use)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = dbmod.connect(self.root)
            self._local.conn = conn
        return conn

    @cached_property
    def embedder(self) -> Embedder:
        from everos_reflect.embedding import CachingEmbedder, make_embedder

        return CachingEmbedder(make_embedder(self.settings.embedding))

    @cached_property
    def vectors(self) -> VectorIndex:
        from everos_reflect.index.vectors import VectorIndex

        return VectorIndex(self.index_dir / "lancedb", dim=self.embedder.dim)

    @cached_property
    def llm(self) -> LLM:
        from everos_reflect.llm import make_llm

        return make_llm(self.settings.llm, self.embedder)

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
