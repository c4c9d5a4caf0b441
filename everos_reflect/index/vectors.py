"""LanceDB: the derived vector + full-text copy of every indexed entry.

One table per kind. Rows are keyed by ``app/project/user/id`` so tenants never collide, and
every row records which embedding model made its vector, so a model change is detected and
forces a re-embed instead of mixing vector spaces. Everything here is rebuildable from Markdown.

Concurrency: every mutation takes a thread lock (this process) and a file lock (other
processes on the same root), so writes never race each other. ``optimize`` (compaction, the ANN
index build) runs outside that pair, under a lock of its own, so writes proceed while it works:
a compaction that loses to a concurrent write is refused by LanceDB and tried again (see
:meth:`VectorIndex.optimize`).
"""

from __future__ import annotations

import math
import os
import shutil
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import lancedb
import numpy as np
import pyarrow as pa
from filelock import FileLock
from lancedb.index import FTS, BTree, IvfPq
from lancedb.query import MultiMatchQuery

from everos_reflect.errors import (
    EmbedderMismatch,
    EverosError,
    IndexReadOnly,
    VectorIndexUnreadable,
)
from everos_reflect.index.filters import sql_str
from everos_reflect.model import Kind, UserRef

TABLES: dict[Kind, str] = {kind: kind.table for kind in Kind}
#: Name prefix of a table folder renamed away by ``reset`` before it is deleted (no ``.lance``
#: suffix, so LanceDB never lists it as a table).
DROPPED_PREFIX = ".dropped-"
#: The folder of a Lance table that holds its version manifests (without one it cannot open).
VERSIONS = "_versions"

# Columns every caller may read back (all but the vector and the internal key).
META_COLUMNS: tuple[str, ...] = (
    "id",
    "app_id",
    "project_id",
    "user_id",
    "kind",
    "ts",
    "timestamp",
    "subject",
    "text",
    "parent_type",
    "parent_id",
    "session_id",
    "sources",
    "deprecated_by",
    "content_hash",
    "path",
    "embed_model",
)
# Full-text (BM25) search looks at both; a word in the Subject counts like one in the body.
FTS_COLUMNS: tuple[str, ...] = ("subject", "text")
_REQUIRED = ("id", "app_id", "project_id", "user_id", "embed_model")

# Below this many rows an exact (flat) scan is fast enough and perfectly accurate; above it
# ``optimize`` builds an IVF_PQ index (a flat scan of 100k x 384 took ~140 ms on 2 cores; IVF_PQ
# ~15 ms, and builds ~2.5x faster than IVF_HNSW_SQ). Candidates are re-ranked exactly.
ANN_MIN_ROWS = 50_000
#: LanceDB cache caps per process (index pages; table manifests and file metadata)
INDEX_CACHE_BYTES = 128 << 20
METADATA_CACHE_BYTES = 32 << 20
REFINE_FACTOR = 4
#: Compactions refused by a concurrent write before one runs under the write lock.
COMPACTION_ATTEMPTS = 3
#: An upsert of at most this many rows said to be new (:meth:`VectorIndex.upsert`) first
#: counts those of their keys the table holds, and appends them when it holds none instead
#: of matching them against every key: ``merge_insert`` reads every row written since the
#: key index was last built, ~100 ms for the one row of an ``add`` once a Reflection has
#: written hundreds of fragments, against ~29 ms for the count and the append
#: (``bench/vector_upsert.py``, loaded). Every write holds the index's write lock, so no key
#: is written by another writer between the count and the append.
FEW_ROWS = 16
#: How LanceDB says a commit lost to a concurrent one and may simply be tried again.
COMMIT_CONFLICT = "Retryable commit conflict"


def _tie_key(row: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """Orders rows of equal score by tenant, user and id. LanceDB returns ties in the order it
    stored them, which a rebuild from Markdown changes: the same search ranked a narrative and
    the entry it replaced the other way round after ``reindex``."""
    return (row["app_id"], row["project_id"], row["user_id"], row["id"])


def _schema(dim: int) -> pa.Schema:
    return pa.schema(
        [
            pa.field("key", pa.string(), nullable=False),
            pa.field("id", pa.string(), nullable=False),
            pa.field("app_id", pa.string(), nullable=False),
            pa.field("project_id", pa.string(), nullable=False),
            pa.field("user_id", pa.string(), nullable=False),
            pa.field("kind", pa.string()),
            pa.field("ts", pa.float64()),
            pa.field("timestamp", pa.string()),
            pa.field("subject", pa.string()),
            pa.field("text", pa.string()),
            pa.field("parent_type", pa.string()),
            pa.field("parent_id", pa.string()),
            pa.field("session_id", pa.string()),
            pa.field("sources", pa.list_(pa.string())),
            pa.field("deprecated_by", pa.string()),
            pa.field("content_hash", pa.string()),
            pa.field("path", pa.string()),
            pa.field("embed_model", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dim)),
        ]
    )


def _stored_dim(table: Any) -> int:
    """The dimension of the vectors ``table`` holds, as its schema says on disk now."""
    return int(table.schema.field("vector").type.list_size)


def row_key(app: str, project: str, user_id: str, entry_id: str) -> str:
    return f"{app}/{project}/{user_id}/{entry_id}"


def _epoch(value: object) -> float:
    if isinstance(value, datetime):
        return value.timestamp()
    return float(value) if value is not None else math.nan  # type: ignore[arg-type]


def _as_kind(kind: Kind | str) -> Kind:
    try:
        return Kind(kind)
    except ValueError as exc:
        raise EverosError(f"unknown entry kind {kind!r}") from exc


class VectorIndex:
    """The LanceDB tables under ``path`` (``<root>/.index/lancedb``) for vectors of ``dim``."""

    def __init__(
        self,
        path: str | Path,
        dim: int,
        *,
        cleanup_older_than: timedelta = timedelta(minutes=5),
        ann_min_rows: int | None = ANN_MIN_ROWS,
        read_only: bool = False,
        embedder_name: str = "an embedder",
    ) -> None:
        self.path = Path(path)
        #: a root that cannot be written (a read-only mount, another user's root): tables are
        #: opened without the write lock (whose file cannot be created there), none is created
        #: or given its indexes, and a kind never indexed reads as empty
        self.read_only = read_only
        self.dim = int(dim)
        #: the embedder of ``dim`` (``hash:16``): an index holding vectors of another
        #: dimension is refused naming it (:class:`EmbedderMismatch`)
        self.embedder_name = embedder_name
        self.cleanup_older_than = cleanup_older_than
        self.ann_min_rows = ann_min_rows
        if not read_only:
            self.path.mkdir(parents=True, exist_ok=True)
        # Always read the latest committed version: another process (CLI, daemon) may write.
        self._db = lancedb.connect(
            str(self.path), read_consistency_interval=timedelta(0),
            # LanceDB's defaults let its caches grow to gigabytes; a daemon gets a budget
            # (docs/memory.md). Beyond it, index pages are re-read from the local disk.
            session=lancedb.Session(index_cache_size_bytes=INDEX_CACHE_BYTES,
                                    metadata_cache_size_bytes=METADATA_CACHE_BYTES),
        )
        self._tables: dict[Kind, Any] = {}
        self._thread_lock = threading.RLock()
        self._file_lock = FileLock(str(self.path.parent / f".{self.path.name}.write.lock"))
        self._build_thread_lock = threading.Lock()
        self._build_file_lock = FileLock(str(self.path.parent / f".{self.path.name}.build.lock"))
        self._compact_thread_lock = threading.Lock()
        self._compact_file_lock = FileLock(
            str(self.path.parent / f".{self.path.name}.compact.lock"))
        #: compactions this object saw refused by a concurrent write (then tried again)
        self.compaction_conflicts = 0

    # -- plumbing ---------------------------------------------------------------------------

    @contextmanager
    def _writing(self) -> Iterator[None]:
        if self.read_only:
            raise IndexReadOnly(self.path)
        with self._thread_lock, self._file_lock:
            yield

    def _table(self, kind: Kind | str) -> Any:
        """``kind``'s table, opened (or created, with its indexes) on first use; in a
        read-only index, None for a kind never written, which every read takes as empty."""
        kind = _as_kind(kind)
        table = self._tables.get(kind)
        if table is not None:
            if self._has_manifest(TABLES[kind]):
                return table
            # dropped under this handle (a reindex of another process moved it aside): it
            # failed "Not found" until a restart, as the kinds that reindex made no table
            # for were never made again
            with self._thread_lock:
                if self._tables.get(kind) is table:
                    del self._tables[kind]
        if self.read_only:
            return self._open_read_only(kind)
        with self._writing():
            table = self._tables.get(kind)
            if table is None:
                table = self._open_or_create(kind)
                self._tables[kind] = table
        return table

    def _open_read_only(self, kind: Kind) -> Any:
        """``kind``'s table as it is on disk, or None when it was never written; a write to a
        read-only index is refused naming the root's state, not LanceDB's lock file."""
        name = TABLES[kind]
        if not self._has_manifest(name):
            return None
        try:
            table = self._db.open_table(name)
        except (ValueError, RuntimeError, OSError) as exc:
            raise VectorIndexUnreadable(name, exc) from None
        self._check_dimension(table)
        with self._thread_lock:
            return self._tables.setdefault(kind, table)

    def _open_or_create(self, kind: Kind) -> Any:
        name = TABLES[kind]
        try:
            table = self._db.open_table(name)
        except ValueError:  # "not found"
            if (self.path / f"{name}.lance").exists():
                # what is left of a table whose manifests were deleted (not yet moved aside
                # by a scan, :meth:`missing`): a table created in it would be empty, and the
                # scan would take it for whole and embed nothing again
                raise VectorIndexUnreadable(
                    name, FileNotFoundError(f"{name}.lance has no {VERSIONS} manifest")) from None
            table = self._db.create_table(name, schema=_schema(self.dim), exist_ok=True)
        except (RuntimeError, OSError) as exc:  # LanceDB's "lance error: ..." on damaged files
            raise VectorIndexUnreadable(name, exc) from None
        self._check_dimension(table)
        names = {ix.name for ix in table.list_indices()}
        for column in FTS_COLUMNS:
            if f"{column}_idx" not in names:
                table.create_index(column, config=FTS(), name=f"{column}_idx")
        # BTree on key: merge/delete/update by key; on user_id: a per-user prefilter reads a
        # few thousand rows instead of scanning all (measured ~3x faster at 100k rows).
        for column in ("key", "user_id"):
            if f"{column}_idx" not in names:
                table.create_index(column, config=BTree(), name=f"{column}_idx")
        return table

    def _check_dimension(self, table: Any) -> None:
        """Refuse ``table`` when it holds vectors of another dimension than this embedder's,
        as it is opened (writable or read-only alike): a read-only root skipped it, so its
        keyword search answered as if nothing were wrong and a read of two stored vectors
        failed with numpy's "index 1 is out of bounds" instead of naming both embedders."""
        stored = _stored_dim(table)
        if stored != self.dim:
            raise self._mismatch(table, stored)

    def _mismatch(self, table: Any, stored: int) -> EmbedderMismatch:
        """The refusal of ``table`` holding ``stored``-dimensional vectors, naming the model
        that made them (read from the table: ``embed_model`` would open it again)."""
        try:
            names = {r["embed_model"] for r in table.search().select(["embed_model"])
                     .limit(max(1, table.count_rows())).to_list()}
        except (ValueError, RuntimeError, OSError):
            names = set()  # the dimensions still say it
        return EmbedderMismatch(stored, ", ".join(sorted(names)) or None, self.embedder_name,
                                self.dim)

    @contextmanager
    def _same_dimension(self, table: Any) -> Iterator[None]:
        """A use of ``table`` that failed as it holds vectors of another dimension (a
        ``reindex`` of another process with other embedding settings rebuilt it under this
        handle) raises :class:`EmbedderMismatch`. LanceDB's own words for it ("cannot cast
        field 'vector' from FixedSizeList(64 x Float32) ...", "query dim(64) doesn't match",
        "variable length vectors") reached a client as they were; the stored dimension,
        read on failure only, says it whatever LanceDB's words."""
        try:
            yield
        except (ValueError, RuntimeError, VectorIndexUnreadable) as exc:
            try:
                stored = _stored_dim(table)
            except (ValueError, RuntimeError, OSError, AttributeError):
                raise exc from None
            if stored == self.dim:
                raise
            raise self._mismatch(table, stored) from None

    @staticmethod
    def _keys_where(ref: UserRef, ids: Iterable[str]) -> str | None:
        keys = [sql_str(row_key(ref.app, ref.project, ref.user_id, i)) for i in ids]
        return f"key IN ({', '.join(keys)})" if keys else None

    def _to_arrow(self, kind: Kind, rows: Sequence[Mapping[str, Any]]) -> pa.Table:
        columns: dict[str, list[Any]] = {f: [] for f in ("key", *META_COLUMNS)}
        vectors = np.empty((len(rows), self.dim), dtype=np.float32)
        for n, row in enumerate(rows):
            missing = [c for c in _REQUIRED if not row.get(c)]
            if missing:
                raise EverosError(f"index row {row.get('id')!r} lacks {', '.join(missing)}")
            vector = np.asarray(row.get("vector"), dtype=np.float32).reshape(-1)
            if vector.shape != (self.dim,) or not np.isfinite(vector).all():
                raise EverosError(
                    f"index row {row['id']!r}: vector must be {self.dim} finite floats, "
                    f"got shape {vector.shape}"
                )
            vectors[n] = vector
            ref = UserRef(row["app_id"], row["project_id"], row["user_id"])
            columns["key"].append(row_key(ref.app, ref.project, ref.user_id, str(row["id"])))
            for column in META_COLUMNS:
                value = row.get(column)
                if column == "kind":
                    value = kind.value
                elif column == "sources":
                    value = [str(v) for v in value or []]
                elif column == "ts":
                    value = _epoch(value)
                elif value is not None:
                    value = str(value)
                columns[column].append(value)
        schema = _schema(self.dim)
        arrays = [pa.array(columns[f.name], type=f.type) for f in schema if f.name != "vector"]
        flat = pa.array(vectors.reshape(-1), type=pa.float32())
        arrays.append(pa.FixedSizeListArray.from_arrays(flat, self.dim))
        return pa.Table.from_arrays(arrays, schema=schema)

    # -- writes -----------------------------------------------------------------------------

    def upsert(self, kind: Kind | str, rows: Sequence[Mapping[str, Any]], *,
               new: bool = False) -> None:
        """Insert or replace rows (matched on tenant + user + id). Validates before writing.
        ``new``: the caller's index holds none of them (an ``add``, a tier's new record);
        a few such rows are appended when the table holds none of their keys either (a row a
        killed sync wrote may be there: then they are matched as any)."""
        if not rows:
            return
        kind = _as_kind(kind)
        data = self._to_arrow(kind, rows)
        if len(set(data.column("key").to_pylist())) != len(rows):
            raise EverosError("upsert got the same entry id twice in one batch")
        table = self._table(kind)
        with self._writing(), self._same_dimension(table):
            if new and len(rows) <= FEW_ROWS and not table.count_rows(
                    "key IN (" + ", ".join(sql_str(k) for k in data.column("key").to_pylist())
                    + ")"):
                table.add(data)  # none of them there yet (an add, a tier's new record)
                return
            (
                table.merge_insert("key")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute(data)
            )

    def append(self, kind: Kind | str, rows: Sequence[Mapping[str, Any]]) -> None:
        """Add rows known to be new (a reindex into freshly reset tables): a plain append.

        ``upsert`` matches every key against the table, and rows written since the key index
        was last built are scanned for that, so a long series of upserts into a growing table
        is quadratic; a rebuild from Markdown knows its keys are new and unique."""
        if not rows:
            return
        kind = _as_kind(kind)
        data = self._to_arrow(kind, rows)
        if len(set(data.column("key").to_pylist())) != len(rows):
            raise EverosError("append got the same entry id twice in one batch")
        table = self._table(kind)
        with self._writing(), self._same_dimension(table):
            table.add(data)

    def delete(self, kind: Kind | str, ref: UserRef, ids: Iterable[str]) -> None:
        where = self._keys_where(ref, ids)
        if where is None:
            return
        table = self._table(kind)
        with self._writing():
            table.delete(where)

    def set_deprecated(
        self, kind: Kind | str, ref: UserRef, ids: Iterable[str], by: str | None
    ) -> None:
        """Mark (``by`` = the replacing entry id) or clear (``by=None``) ``deprecated_by``."""
        where = self._keys_where(ref, ids)
        if where is None:
            return
        table = self._table(kind)
        with self._writing():
            table.update(where=where, values={"deprecated_by": by})

    def set_deprecated_many(
        self, kind: Kind | str, marks: Sequence[tuple[UserRef, str, str | None]]
    ) -> None:
        """``deprecated_by`` of many rows, each ``(ref, id, by)`` with its own value, in one
        table write (a partial merge on ``key``; ids not in the table are skipped). One
        ``set_deprecated`` per replacing entry is one LanceDB version each, and a batch of
        merges archives toward dozens of narratives at once."""
        if not marks:
            return
        kind = _as_kind(kind)
        by_key = {row_key(ref.app, ref.project, ref.user_id, i): by for ref, i, by in marks}
        data = pa.table({"key": pa.array(list(by_key), pa.string()),
                         "deprecated_by": pa.array(list(by_key.values()), pa.string())})
        table = self._table(kind)
        with self._writing():
            table.merge_insert("key").when_matched_update_all().execute(data)

    def reset(self) -> None:
        """Drop every table (a full reindex follows); they are recreated empty on next use.

        Crash-safe: each table's folder is first *renamed* out of the way (one atomic step),
        then deleted. Deleting it in place (``drop_table``) and being killed half-way left a
        table whose manifest names data files already gone: every later read failed with
        "Not found" until the next full reindex (found by bench/chaos.py)."""
        with self._writing():
            self._tables.clear()
            self._remove_dropped()
            for name in TABLES.values():
                folder = self.path / f"{name}.lance"
                if not folder.exists():
                    continue
                trash = self.path / f"{DROPPED_PREFIX}{name}-{uuid.uuid4().hex[:8]}"
                os.replace(folder, trash)
            self._remove_dropped()

    def missing(self) -> list[Kind]:
        """The kinds whose table is not on disk (never written, or deleted by hand:
        ``rm -rf .index/lancedb`` to free space, or only a table's ``_versions`` folder). A
        handle this process holds on such a table is let go, so the next use creates it anew
        instead of writing into a deleted one.

        A table folder without a version manifest is no table: LanceDB cannot open it and
        made a new, empty one in its place, which the next scan took for whole, so nothing
        was embedded again. Its remnant (data files no manifest names) is moved aside and
        deleted, as :meth:`reset` does, and the kind counts as missing. Checked under the
        write lock: a table being created (by any process) has no manifest yet either."""
        gone = [kind for kind, name in TABLES.items()
                if not (self.path / f"{name}.lance").is_dir()]
        headless = [kind for kind, name in TABLES.items()
                    if kind not in gone and not self._has_manifest(name)]
        if headless:
            with self._writing():
                for kind in headless:
                    name = TABLES[kind]
                    folder = self.path / f"{name}.lance"
                    if folder.is_dir() and not self._has_manifest(name):
                        os.replace(folder, self.path / f"{DROPPED_PREFIX}{name}-"
                                                       f"{uuid.uuid4().hex[:8]}")
                        gone.append(kind)
                self._remove_dropped()
        if gone:
            with self._thread_lock:
                for kind in gone:
                    self._tables.pop(kind, None)
        return gone

    def _has_manifest(self, name: str) -> bool:
        """Whether table ``name``'s folder holds a version manifest (what opens it)."""
        try:  # scandir: stops at the first manifest of a table with many versions
            with os.scandir(self.path / f"{name}.lance" / VERSIONS) as found:
                return any(e.name.endswith(".manifest") for e in found)
        except OSError:  # no _versions folder (or no folder at all)
            return False

    def _remove_dropped(self) -> None:
        """Delete the folders of tables renamed away by :meth:`reset` (a kill may leave some)."""
        for trash in self.path.glob(f"{DROPPED_PREFIX}*"):
            shutil.rmtree(trash, ignore_errors=True)

    def optimize(self) -> dict[str, Any]:
        """Compact files, fold new rows into the indexes, drop old versions; build the ANN
        index once a table is large.

        Neither step holds the write lock, so writes go on meanwhile. Compaction rewrites data
        files; a write committed during it that touched those files (an update, a delete, a
        merge onto existing rows) wins, and the compaction's commit is refused with a
        retryable conflict (LanceDB 0.40: the writer never fails, the rewrite is dropped). So
        a compaction is tried ``COMPACTION_ATTEMPTS`` times, and only after that many refusals
        in a row -- a stream of writes onto the very rows being rewritten -- once more under
        the write lock, as it always ran before. Building the ANN index (tens of seconds past
        50k rows) does not rewrite data: its commit lands on top of the writes (rows written
        during the build are searched exactly until the next build). Compactions, and builds,
        are serialized among themselves by a lock of their own.
        """
        if self.read_only:
            raise IndexReadOnly(self.path)
        report: dict[str, Any] = {}
        for kind, name in TABLES.items():
            table = self._table(kind)
            with self._compact_thread_lock, self._compact_file_lock:
                self._compact(table)
            rows = table.count_rows()
            report[name] = rows
            if self.ann_min_rows is not None and rows >= self.ann_min_rows:
                with self._build_thread_lock, self._build_file_lock:
                    if "vector_idx" not in {ix.name for ix in table.list_indices()}:
                        table.create_index(
                            "vector",
                            config=IvfPq(distance_type="cosine"),
                            name="vector_idx",
                        )
        return report

    def _compact(self, table: Any) -> None:
        """LanceDB's ``optimize`` of one table (compaction, old versions dropped, new rows
        folded into the scalar and full-text indexes), beside the writers while it can be."""
        for _ in range(COMPACTION_ATTEMPTS):
            try:
                table.optimize(cleanup_older_than=self.cleanup_older_than)
                return
            except RuntimeError as exc:  # the lance error type is not exported
                if COMMIT_CONFLICT not in str(exc):
                    raise
                self.compaction_conflicts += 1
        with self._writing():
            table.optimize(cleanup_older_than=self.cleanup_older_than)

    # -- reads ------------------------------------------------------------------------------

    @contextmanager
    def _reading(self, kind: Kind | str) -> Iterator[None]:
        """A query of ``kind``'s table whose failure in LanceDB ("lance error: ...": data
        files overwritten or truncated while the manifests that open the table are whole)
        is :class:`VectorIndexUnreadable`: it escaped as a RuntimeError traceback out of
        ``search`` (a 500 from the API), where a table that does not open said "run
        reindex"."""
        try:
            yield
        except (RuntimeError, OSError) as exc:
            raise VectorIndexUnreadable(TABLES[_as_kind(kind)], exc) from None

    def count(self, kind: Kind | str, where: str | None = None) -> int:
        table = self._table(kind)
        if table is None:
            return 0
        with self._reading(kind):
            return int(table.count_rows(where))

    def get_vectors(
        self, kind: Kind | str, ref: UserRef, ids: Iterable[str]
    ) -> dict[str, np.ndarray]:
        """Stored vectors by entry id (ids not in the index are simply absent)."""
        ids = list(dict.fromkeys(ids))
        where = self._keys_where(ref, ids)
        table = self._table(kind)
        if where is None or table is None:
            return {}
        with self._same_dimension(table):
            with self._reading(kind):
                result = (
                    table.search().where(where).select(["id", "vector"]).limit(len(ids))
                ).to_arrow()
            matrix = np.asarray(
                result.column("vector").combine_chunks().flatten(), dtype=np.float32
            ).reshape(-1, self.dim)
        return {eid: matrix[n] for n, eid in enumerate(result.column("id").to_pylist())}

    def get_vectors_many(
        self, kind: Kind | str, wanted: Mapping[UserRef, Sequence[str]], *, chunk: int = 20_000
    ) -> dict[UserRef, dict[str, np.ndarray]]:
        """Stored vectors of many users at once: one filtered scan per group of users holding
        up to ``chunk`` wanted keys, instead of one per user.

        Filtering on ``user_id`` (rather than on a list of thousands of keys) lets the scan read
        vectors only for the users' rows, also in the tail written since the last index build.
        """
        by_key = {row_key(ref.app, ref.project, ref.user_id, eid): (ref, eid)
                  for ref, ids in wanted.items() for eid in ids}
        out: dict[UserRef, dict[str, np.ndarray]] = {ref: {} for ref in wanted}
        groups: list[list[UserRef]] = [[]]
        size = 0
        for ref, ids in wanted.items():
            if groups[-1] and size + len(ids) > chunk:
                groups.append([])
                size = 0
            groups[-1].append(ref)
            size += len(ids)
        for group in groups:
            if not group:
                continue
            users = ", ".join(sql_str(u) for u in sorted({r.user_id for r in group}))
            table = self._table(kind)
            if table is None:
                break
            with self._same_dimension(table):
                with self._reading(kind):
                    result = (
                        table.search().where(f"user_id IN ({users})").select(["key", "vector"])
                        .limit(max(1, table.count_rows(f"user_id IN ({users})")))
                    ).to_arrow()
                matrix = np.asarray(
                    result.column("vector").combine_chunks().flatten(), dtype=np.float32
                ).reshape(-1, self.dim)
            for n, key in enumerate(result.column("key").to_pylist()):
                hit = by_key.get(key)
                if hit is not None:
                    out[hit[0]][hit[1]] = matrix[n]
        return out

    def rows(
        self, kind: Kind | str, where: str | None = None, *, columns: Sequence[str] = META_COLUMNS
    ) -> list[dict[str, Any]]:
        """Every row matching ``where`` (no vectors unless asked)."""
        table = self._table(kind)
        if table is None:
            return []
        with self._reading(kind):
            query = table.search().select(list(columns)).limit(max(1, table.count_rows(where)))
            if where:
                query = query.where(where)
            return query.to_list()

    def rows_by_keys(
        self, kind: Kind | str, keys: Sequence[tuple[str, str, str, str]], *,
        with_vectors: bool = False,
    ) -> list[dict[str, Any]]:
        """The rows of the given ``(app, project, user, id)`` keys, in no particular order;
        keys not in the index are simply absent."""
        wanted = [sql_str(row_key(*k)) for k in dict.fromkeys(keys)]
        table = self._table(kind) if wanted else None
        if table is None:
            return []
        columns = [*META_COLUMNS, *(("vector",) if with_vectors else ())]
        with self._reading(kind):
            return (
                table.search().where(f"key IN ({', '.join(wanted)})")
                .select(columns).limit(len(wanted))
            ).to_list()

    def parents_with_rows(
        self, kind: Kind | str, keys: Sequence[tuple[str, str, str, str]], *,
        where: str | None = None,
    ) -> set[tuple[str, str, str, str]]:
        """Those of the Episode ``keys`` (``(app, project, user, id)``) that at least one row
        of ``kind`` matching ``where`` names as its parent (``parent_type`` episode)."""
        wanted = set(keys)
        table = self._table(kind) if wanted else None
        if table is None:
            return set()
        users = ", ".join(sql_str(u) for u in sorted({k[2] for k in wanted}))
        ids = ", ".join(sql_str(i) for i in sorted({k[3] for k in wanted}))
        # user_id first: its BTree index narrows the scan to the candidates' owners
        clause = f"user_id IN ({users}) AND parent_type = 'episode' AND parent_id IN ({ids})"
        if where:
            clause = f"({where}) AND {clause}"
        with self._reading(kind):
            rows = (table.search().where(clause)
                    .select(["app_id", "project_id", "user_id", "parent_id"])
                    .limit(None)).to_list()  # every match: a plain query stops at 10
        found = {(r["app_id"], r["project_id"], r["user_id"], r["parent_id"]) for r in rows}
        return found & wanted

    def embed_model(self, kind: Kind | str) -> str | None:
        """The model that made the stored vectors: ``None`` when empty, several names joined
        by ``", "`` when mixed — either way, compare with the embedder's ``name``."""
        names = {r["embed_model"] for r in self.rows(kind, columns=("embed_model",))}
        return ", ".join(sorted(names)) or None

    def search_vector(
        self, kind: Kind | str, vector: np.ndarray, *, k: int = 10, where: str | None = None,
        with_vectors: bool = False,
    ) -> list[dict[str, Any]]:
        """Nearest rows by cosine distance (``_distance`` = 1 - cosine similarity); with
        ``with_vectors`` each row also carries its stored ``vector`` (search's latest-version
        ranking compares hits with it, at no extra query)."""
        vector = np.asarray(vector, dtype=np.float32).reshape(-1)
        if vector.shape != (self.dim,):
            raise EverosError(f"query vector must have {self.dim} values, got {vector.shape[0]}")
        table = self._table(kind)
        if table is None:
            return []
        # building the query reads the table's schema
        with self._same_dimension(table), self._reading(kind):
            query = (
                table
                .search(vector, vector_column_name="vector")
                .distance_type("cosine")
                .refine_factor(REFINE_FACTOR)  # exact re-rank; a no-op without an ANN index
                .select([*META_COLUMNS, *(("vector",) if with_vectors else ()), "_distance"])
                .limit(k)
            )
            if where:
                query = query.where(where, prefilter=True)
            return sorted(query.to_list(), key=lambda r: (r["_distance"], *_tie_key(r)))

    def search_text(
        self, kind: Kind | str, query: str, *, k: int = 10, where: str | None = None
    ) -> list[dict[str, Any]]:
        """BM25 full-text matches over subject and text (``_score``, higher is better).

        Rows written since the last ``optimize`` are searched too (LanceDB scans the unindexed
        tail), so results are fresh right after a write."""
        table = self._table(kind) if query.strip() else None
        if table is None:
            return []
        with self._reading(kind):  # building the query reads the table's schema
            builder = (
                table
                # an explicit query object: a plain string in quotes would be parsed as a
                # phrase query, which LanceDB refuses over several columns
                .search(MultiMatchQuery(query, list(FTS_COLUMNS)), query_type="fts")
                .select([*META_COLUMNS, "_score"])
                .limit(k)
            )
            if where:
                builder = builder.where(where, prefilter=True)
            return sorted(builder.to_list(), key=lambda r: (-r["_score"], *_tie_key(r)))
