"""Where an index batch's clustering time goes: CPU-µs per Episode by step and by statement.

Places a stream of ``bench_clustering.py`` (LoCoMo, or one owner ×N) as an index flush does
(``on_entries_indexed`` per owner inside one ``ClusterService.batch()`` of 256 Episodes), with
a CPU-time counter (``time.process_time``) around each step named below and each SQL
statement the service runs, and prints their totals per Episode. Steps nest (a total
includes what it calls: ``assign_run`` holds ``tells_change`` and ``_version_join``), so
each also gets its own time, less the steps and statements timed inside it (the first
statement after the queue fills writes it: ``_place_history``'s total holds that flush); the
counters add ~0.5 µs a call of their own, so a step called per Episode reads high by that.

    python bench/clustering_split.py LOCOMO_JSON --vectors-cache vecs.npy [--scale 20] \
        [--without-version-trigger] [--count-near] [--consolidate-days 30] [--distinct-texts] \
        [--flush]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import gc
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_clustering as bc

from everos_reflect.clustering import matrix, service
from everos_reflect.settings import Settings

spent: collections.Counter[str] = collections.Counter()
#: a step's time less the steps timed inside it (``_place_history`` holds the flush of the
#: queue its first statement triggers: its own cost is the rest)
own: collections.Counter[str] = collections.Counter()
calls: collections.Counter[str] = collections.Counter()
rows_written: collections.Counter[str] = collections.Counter()
#: per step open, the time of the steps timed inside it so far
_inner: list[float] = []


def _count(label: str, took: float, inside: float = 0.0) -> None:
    """``took`` CPU seconds of one call of ``label``, ``inside`` of them in steps timed
    inside it; counted inside the step open around it too."""
    if _inner:
        _inner[-1] += took
    spent[label] += took
    own[label] += took - inside
    calls[label] += 1


def _timed(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.process_time()
        _inner.append(0.0)
        try:
            return fn(*args, **kwargs)
        finally:
            took = time.process_time() - t0
            _count(label, took, _inner.pop())
    return timed


class _Statements:
    """The write transaction's connection, each statement timed under its first words."""

    def __init__(self, conn: Any) -> None:
        object.__setattr__(self, "_conn", conn)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        t0 = time.process_time()
        out = self._conn.execute(sql, params)
        _count("SQL " + " ".join(sql.split())[:60], time.process_time() - t0)
        return out

    def executemany(self, sql: str, rows: Any) -> Any:
        rows = list(rows)
        t0 = time.process_time()
        out = self._conn.executemany(sql, rows)
        key = "SQL many " + " ".join(sql.split())[:55]
        _count(key, time.process_time() - t0)
        rows_written[key] += len(rows)
        return out


def instrument() -> None:
    """Counters around the service's steps, its statements and its COMMIT."""
    for owner, name, label in [
            (service.ClusterService, "on_entries_indexed", "on_entries_indexed"),
            (service.ClusterService, "_assign_run", "_assign_run"),
            (service.ClusterService, "on_entries_indexed_many",
             "on_entries_indexed_many (the watcher's flush: one call per file, merged)"),
            (matrix.UserClusters, "assign_run", "assign_run (the rule, in memory)"),
            (matrix, "_may_reach", "_may_reach (may a cluster the run changed take a version)"),
            (service.ClusterService, "_version_join", "_version_join"),
            (service.ClusterService, "_place_history", "_place_history (before COMMIT)"),
            (service._Write, "named_elsewhere_of",
             "named_elsewhere_of (another user's narrative names an id)"),
            (service, "tells_change", "tells_change (extractive)"),
            (service, "tells_newer_version", "tells_newer_version (extractive)"),
            (service, "_free_id", "_free_id (hash id of a new cluster)"),
            (service._Write, "placed_run", "placed_run (queue the rows)"),
            (service._Write, "finish", "finish (write the queue)"),
            (service._Write, "flush", "flush (the queue's statements; inside the first "
                                      "statement after it fills, or finish)"),
            (matrix._PivotGroups, "put", "_PivotGroups.put (a consolidated cluster placed "
                                         "in the pivot index)"),
            (matrix._PivotGroups, "_matrix", "_PivotGroups._matrix (the pivots stacked)"),
            (matrix._PivotGroups, "cosines", "_PivotGroups.cosines (a run's pivot bounds)"),
            (matrix.UserClusters, "_rejoin_pairs", "_rejoin_pairs (a run's far rejoins)"),
            (matrix.UserClusters, "_later_rejoin",
             "_later_rejoin (the items a consolidated cluster just joined may still take)")]:
        setattr(owner, name, _timed(label, getattr(owner, name)))
    member_rows = service.ClusterService._member_rows
    service.ClusterService._member_rows = staticmethod(  # type: ignore[method-assign]
        _timed("_member_rows (membership look-up)", member_rows))
    init = service._Write.__init__

    def statements(self: Any, conn: Any, cache: Any) -> None:
        init(self, _Statements(conn), cache)

    service._Write.__init__ = statements  # type: ignore[method-assign]
    transaction = service.transaction

    @contextlib.contextmanager
    def timed_commit(conn: Any) -> Iterator[Any]:
        with transaction(conn) as c:
            yield c
            t0 = time.process_time()
        _count("COMMIT", time.process_time() - t0)

    service.transaction = timed_commit  # type: ignore[assignment]


def count_near() -> collections.Counter[str]:
    """Count the Episodes the run asks for the join of a newer version (``version_of``) and
    those of them with a cluster in their window scoring at least the version floor, by the
    exact test (``similarities`` and ``in_window`` over every cluster as it then stands): the
    most a sharper gate could spare."""
    from everos_reflect.clustering import online

    seen: collections.Counter[str] = collections.Counter()
    assign_run = matrix.UserClusters.assign_run

    def counted(self: Any, vectors: Any, ts: Any, new_id: Any, **kw: Any) -> Any:
        version_of = kw.get("version_of")
        if version_of is not None:
            window = kw["window_seconds"]

            def asked(q: int, placed: Any) -> Any:
                seen["asked"] += 1
                rows = self._rows_since(online.window_start(ts[q], window))
                near = rows.size and any(
                    sim >= online.VERSION_FLOOR
                    and online.in_window(ts[q], self._first[p], self._last[p], window)
                    for p, sim in zip(rows.tolist(), online.similarities(
                        self._c32[rows], vectors[q]).tolist(), strict=True))
                seen["near"] += bool(near)
                return version_of(q, placed)

            kw["version_of"] = asked
        return assign_run(self, vectors, ts, new_id, **kw)

    matrix.UserClusters.assign_run = counted  # type: ignore[method-assign]
    return seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("locomo")
    parser.add_argument("--vectors-cache", type=Path)
    parser.add_argument("--scale", type=int, default=0, help="one owner ×N; 0: LoCoMo")
    parser.add_argument("--member-threshold", type=float, default=0.0)
    parser.add_argument("--without-version-trigger", action="store_true",
                        help="drop clusters_version_insert first (to size it; not a change "
                             "to make: other writers' inserts would no longer be counted)")
    parser.add_argument("--consolidate-days", type=float, default=0.0,
                        help="every eligible cluster consolidated every that many days of "
                             "stream time (bench_clustering.py's consolidated row; the "
                             "consolidating itself is not counted)")
    parser.add_argument("--distinct-texts", action="store_true",
                        help="each copy of a one-owner stream says its own texts")
    parser.add_argument("--count-near", action="store_true",
                        help="also count the Episodes asked for the join of a newer version "
                             "and those with a cluster at the version floor (slows the run)")
    parser.add_argument("--flush", action="store_true",
                        help="place each batch as the watcher's flush does "
                             "(on_entries_indexed_many, one batch per daily log: "
                             "bench_clustering.py --flush)")
    args = parser.parse_args(argv)
    settings = Settings()
    settings = replace(settings, clustering=replace(settings.clustering,
                                                    member_threshold=args.member_threshold))
    base, _ = bc.locomo_stream(args.locomo, args.vectors_cache)
    items = (bc.one_owner_stream(base, args.scale, distinct=args.distinct_texts) if args.scale
             else base)
    entries = bc._entries(items)
    instrument()
    near = count_near() if args.count_near else None
    total = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        rt, refs = bc.stream_runtime(Path(tmp), settings, items)
        svc = service.ClusterService(rt)  # type: ignore[arg-type]
        if args.without_version_trigger:
            rt.db().execute("DROP TRIGGER clusters_version_insert")
        spent.clear()
        calls.clear()
        gc.collect()
        gc.freeze()
        days = args.consolidate_days
        next_consolidation = items[0].ts + days * bc.DAY
        seq = 0
        for start in range(0, len(items), bc.BATCH):
            if days and items[start].ts >= next_consolidation:
                counters = (spent, own, calls, rows_written)
                kept = [c.copy() for c in counters]
                bc._consolidate_all(svc, rt, refs.values(), seq)
                seq += 1
                next_consolidation = items[start].ts + days * bc.DAY
                for counter, before in zip(counters, kept, strict=True):
                    counter.clear()  # nothing of the consolidating is counted
                    counter.update(before)
            chunk = items[start:start + bc.BATCH]
            flush = bc.flush_of(chunk, refs, entries) if args.flush else None
            by_owner = bc.by_owner_of(chunk)
            t0 = time.process_time()
            bc.place_chunk(svc, chunk, by_owner, refs, entries, lone=False, flush=flush)
            total += time.process_time() - t0
    n = len(items)
    name = f"one owner x{args.scale}" if args.scale else "LoCoMo"
    print(f"{name}: {n:,} Episodes, {bc.BATCH} per transaction: {total / n * 1e6:.1f} CPU-µs "
          "per Episode in all (counters included)")
    if near is not None:
        print(f"  asked for the join of a newer version: {near['asked']:,}; with a cluster "
              f"in the window at the version floor: {near['near']:,}")
    print("    total      own  step or statement (own: less the steps and statements timed "
          "inside it)")
    for label, seconds in sorted(spent.items(), key=lambda kv: -kv[1]):
        rows = f", {rows_written[label]:,} rows" if label in rows_written else ""
        print(f"  {seconds / n * 1e6:7.2f}  {own[label] / n * 1e6:7.2f}  {label}  "
              f"({calls[label]:,} calls{rows})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
