"""The embedding interface and its deterministic in-memory implementation.

Every consumer (indexer, clustering, search) depends only on :class:`Embedder`, so tests run with
:class:`HashEmbedder` — instant, reproducible, no model file — and production swaps in the ONNX
or OpenAI-compatible provider without any other change.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol, runtime_checkable

import numpy as np

_WORD_RE = re.compile(r"\w+", re.UNICODE)


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit vectors; ``name`` is recorded next to each stored vector."""

    name: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """Return a float32 array of shape ``(len(texts), dim)`` whose rows have unit L2 norm."""
        ...


#: Set while an answer someone is waiting on is being made: see :func:`answer_waiting`.
_ANSWER_WAITING: ContextVar[bool] = ContextVar("everos_answer_waiting", default=False)


@contextmanager
def answer_waiting() -> Iterator[None]:
    """Embedding calls made inside are for an answer a person or agent is waiting on (a
    search's or briefing's query, the entry ``add`` indexes before it answers): a remote
    embedder takes one attempt for them, without retries or a server's Retry-After sleep.
    With its retries, a rate-limited server held a search for minutes before it failed."""
    token = _ANSWER_WAITING.set(True)
    try:
        yield
    finally:
        _ANSWER_WAITING.reset(token)


#: Called between two model calls of an ``embed`` (:func:`pausing`), or None.
_PAUSE: ContextVar[Callable[[], None] | None] = ContextVar("everos_embed_pause", default=None)


@contextmanager
def pausing(between: Callable[[], None]) -> Iterator[None]:
    """Run ``between`` at each point inside an embedding call where the work may stop for a
    moment: between two of the model calls of one ``embed`` (:func:`pause_point`). The indexer
    lets a waiting add in there (:meth:`~everos_reflect.index.sync.Indexer._let_writers_in`):
    one ``embed`` of 256 texts held an add for seconds on a loaded machine, and cutting the
    texts into smaller calls costs 25–50 % more CPU (less length sorting, more padding)."""
    token = _PAUSE.set(between)
    try:
        yield
    finally:
        _PAUSE.reset(token)


def pause_point() -> None:
    """Where an embedder may pause between two model calls: runs what :func:`pausing` set."""
    if (between := _PAUSE.get()) is not None:
        between()


def current_pause() -> Callable[[], None] | None:
    """What :func:`pausing` set for the calling code, or None: an embedder that waits for
    others' model calls to end before it may make its own runs it while it waits (a sync
    holding the indexer lets a waiting add in meanwhile)."""
    return _PAUSE.get()


def is_answer_waiting() -> bool:
    """Whether the calling code runs inside :func:`answer_waiting`."""
    return _ANSWER_WAITING.get()


def embed_query(embedder: Embedder, text: str) -> np.ndarray:
    """One search query's vector: through :meth:`CachingEmbedder.embed_query` when the
    embedder caches (queries kept apart from documents), else a plain one-text call. Someone
    waits for it: one attempt (:func:`answer_waiting`)."""
    with answer_waiting():
        if isinstance(embedder, CachingEmbedder):
            return embedder.embed_query(text)
        return embedder.embed([text])[0]


def l2_normalize(vectors: np.ndarray) -> np.ndarray:
    """Row-wise unit vectors as float32; an all-zero row stays zero instead of becoming NaN."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0).astype(np.float32)


class HashEmbedder:
    """Hashed bag of word unigrams and bigrams: similarity means shared words.

    Deterministic across processes (sha1, not Python's salted ``hash``) and dependency-free, so
    clustering and search logic can be tested with predictable neighbours: texts that share
    words are close, texts that share none are near orthogonal. An empty text gets a fixed
    "blank" direction, so every row is still a unit vector.
    """

    def __init__(self, dim: int = 64) -> None:
        if dim < 2:
            raise ValueError(f"HashEmbedder dim must be at least 2, got {dim}")
        self.dim = dim
        self.name = f"hash:{dim}"

    def _features(self, text: str) -> list[str]:
        words = [w.lower() for w in _WORD_RE.findall(text)]
        return words + [f"{a} {b}" for a, b in itertools.pairwise(words)]

    def _bucket(self, feature: str) -> tuple[int, float]:
        digest = hashlib.sha1(feature.encode("utf-8")).digest()
        index = int.from_bytes(digest[:4], "little") % self.dim
        sign = 1.0 if digest[4] & 1 else -1.0
        return index, sign

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            features = self._features(text) or ["\x00blank"]
            for feature in features:
                index, sign = self._bucket(feature)
                # bigrams weigh less than words: sharing words matters most
                out[row, index] += sign * (1.0 if " " not in feature else 0.5)
        zero = ~out.any(axis=1)
        if zero.any():  # features cancelled out exactly: fall back to a fixed direction
            out[zero, 0] = 1.0
        return l2_normalize(out)


class CachingEmbedder:
    """Remembers the vectors of recently embedded texts (bounded, least recently used first out).

    A Reflection merge embeds the same new facts twice — once for the coverage guard, once when
    the indexer stores them — and the watcher may re-read text it has just embedded; the model is
    by far the most expensive step, so a small cache pays. ``name`` and ``dim`` are the wrapped
    embedder's: cached vectors are exactly what it returned, so spaces never mix.
    """

    def __init__(self, inner: Embedder, max_entries: int = 4096,
                 query_entries: int = 256) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.max_entries = max_entries
        self.query_entries = query_entries
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        # search queries apart: a stream of distinct queries (each ~2 KB here) would otherwise
        # push a merge's facts out and grow ``serve`` by up to ~8 MB (docs/memory.md)
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def embed_query(self, text: str) -> np.ndarray:
        """The vector of one search query. A text embedded as a document is reused from the
        main cache; queries are remembered in a small cache of their own, so searching never
        evicts the texts a merge or the indexer will ask for again."""
        with self._lock:
            vector = self._cache.get(text)
            if vector is None:
                vector = self._queries.get(text)
                if vector is not None:
                    self._queries.move_to_end(text)
            if vector is not None:
                self.hits += 1
                return vector.copy()
            self.misses += 1
        vector = np.asarray(self.inner.embed([text])[0], dtype=np.float32).copy()
        with self._lock:
            self._queries[text] = vector
            self._queries.move_to_end(text)
            while len(self._queries) > self.query_entries:
                self._queries.popitem(last=False)
        return vector.copy()

    def remember(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Seed the cache with vectors this embedder (same ``name``) made earlier, e.g. the ones
        stored in the index, so texts already embedded once are not embedded again."""
        with self._lock:
            for text, vector in zip(texts, vectors, strict=True):
                self._cache[text] = np.asarray(vector, dtype=np.float32).copy()
                self._cache.move_to_end(text)
            while len(self._cache) > self.max_entries:
                self._cache.popitem(last=False)

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        missing: dict[str, list[int]] = {}
        with self._lock:
            for i, text in enumerate(texts):
                vector = self._cache.get(text)
                if vector is None:
                    missing.setdefault(text, []).append(i)
                else:
                    self._cache.move_to_end(text)
                    out[i] = vector
            self.hits += len(texts) - sum(len(v) for v in missing.values())
            self.misses += len(missing)
        if missing:
            fresh = self.inner.embed(list(missing))
            with self._lock:
                for (text, rows), vector in zip(missing.items(), fresh, strict=True):
                    out[rows] = vector
                    self._cache[text] = vector.copy()
                    self._cache.move_to_end(text)
                while len(self._cache) > self.max_entries:
                    self._cache.popitem(last=False)
        return out
