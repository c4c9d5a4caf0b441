"""The consolidated clusters' pivot index, by tenth of a stream: the work it leaves and its CPU.

Places a stream of ``bench_clustering.py`` (one owner ×N, every eligible cluster consolidated
every ``--consolidate-days`` of stream time: the consolidated row) 256 per transaction, as
``bench_clustering.py --consolidated-only`` does, and counts, per tenth of the stream:

- **work** (the same on any machine, whatever its load): the (item, consolidated cluster)
  pairs the pivot bounds leave a run to score (:meth:`_PivotGroups.near`, pair by pair and
  in blocks), the later items a run rescores after each join of a consolidated cluster
  (:meth:`UserClusters._later_rejoin`), and the consolidated clusters that left their group
  (a move: a new pivot or another group, :meth:`_PivotGroups.put`);
- **CPU** (``time.process_time``, per Episode): the whole placement, the rule in memory
  (``UserClusters.assign_run``) and the index's own steps in it (``cosines``,
  ``_rejoin_pairs``, ``_later_rejoin``, ``put``);

and the clusters' digest (:func:`bench_clustering.cluster_digest`). Run once per tree, the
trees in turn (``PYTHONPATH=TREE:bench``), to compare a change to the index: the work
columns say what it saves, exactly; the CPU columns what that is worth at the load of the
day.

``--replay N``: the first run of each tenth is also kept (the owner's clusters as they stood
before it, its vectors and times) and placed again N times after the stream, each time on a
fresh copy, by ``UserClusters.assign_run`` alone (the rule in memory, without the join of a
newer version, which reads SQLite): the least CPU-µs per Episode of the N, the figure least
disturbed by a shared machine, at ten points of the history.

    PYTHONPATH=.:bench python bench/pivot_index_work.py LOCOMO_JSON --vectors-cache V \
        [--scale 20] [--consolidate-days 30] [--distinct-texts] [--replay 15]
"""

from __future__ import annotations

import argparse
import collections
import copy
import functools
import gc
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_clustering as bc

from everos_reflect.clustering import matrix, service
from everos_reflect.settings import Settings

#: per label, CPU seconds and calls of the tenth being placed
cpu: collections.Counter[str] = collections.Counter()
work: collections.Counter[str] = collections.Counter()
#: ``--replay``: set while the run to keep is placed; the runs kept, one per tenth
keep_next: list[bool] = [False]
kept: list[tuple[Any, np.ndarray, list[float], dict[str, Any]]] = []


def _timed(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            cpu[label] += time.process_time() - t0
    return timed


#: the functions :func:`instrument` replaced, to put back before a replay
originals: list[tuple[Any, str, Any]] = []


def instrument() -> None:
    """Counters around the rule, the index's steps and the work they leave."""
    originals[:] = [(owner, name, getattr(owner, name)) for owner, name in [
        (matrix._PivotGroups, "near"), (matrix._PivotGroups, "cosines"),
        (matrix._PivotGroups, "put"), (matrix.UserClusters, "assign_run"),
        (matrix.UserClusters, "_rejoin_pairs"), (matrix.UserClusters, "_later_rejoin")]]
    near = matrix._PivotGroups.near

    def counted_near(self: Any, cosines: np.ndarray, vectors: np.ndarray,
                     centroids: np.ndarray, reach: float, floor: float) -> Any:
        t0 = time.process_time()
        if self.group_of and cosines.size:
            items, groups = self._reached(cosines, reach)
            if items.size:
                _, spreads, starts, sizes = self._positions()
                big = sizes[groups] >= matrix.BLOCK_MEMBERS
                small = ~big
                at, _ = self._members_near(cosines, items[small], groups[small], reach,
                                           spreads, starts, sizes)
                work["pairs one by one"] += at.size
                work["pairs in blocks"] += int(sizes[groups[big]].sum())
        # the counting's own time, taken out of every figure that holds it
        cpu["counting"] += time.process_time() - t0
        return near(self, cosines, vectors, centroids, reach, floor)

    matrix._PivotGroups.near = counted_near  # type: ignore[method-assign]
    later_rejoin = matrix.UserClusters._later_rejoin

    def counted_later(self: Any, q: int, *args: Any) -> Any:
        later, span = later_rejoin(self, q, *args)
        work["consolidated joins"] += 1
        if later is not None:
            work["items rescored after them"] += (
                later.stop - later.start if isinstance(later, slice) else later.size)
        return later, span

    matrix.UserClusters._later_rejoin = counted_later  # type: ignore[method-assign]
    put = matrix._PivotGroups.put

    def counted_put(self: Any, cluster_id: str, centroid: np.ndarray, position: int) -> None:
        g = self.group_of.get(cluster_id)
        put(self, cluster_id, centroid, position)
        if g is not None and self.group_of.get(cluster_id) != g:
            work["moves out of a group"] += 1

    matrix._PivotGroups.put = counted_put  # type: ignore[method-assign]
    for owner, name, label in [
            (matrix.UserClusters, "assign_run", "assign_run"),
            (matrix._PivotGroups, "cosines", "cosines"),
            (matrix.UserClusters, "_rejoin_pairs", "_rejoin_pairs"),
            (matrix.UserClusters, "_later_rejoin", "_later_rejoin"),
            (matrix._PivotGroups, "put", "put")]:
        setattr(owner, name, _timed(label, getattr(owner, name)))
    assign_run = matrix.UserClusters.assign_run

    def keeping(self: Any, vectors: np.ndarray, ts: Any, new_id: Any, **kw: Any) -> Any:
        if keep_next[0]:
            keep_next[0] = False
            kept.append((copy.deepcopy(self), np.array(vectors, copy=True), list(ts),
                         {k: v for k, v in kw.items() if k != "version_of"}))
        return assign_run(self, vectors, ts, new_id, **kw)

    matrix.UserClusters.assign_run = keeping  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("locomo")
    parser.add_argument("--vectors-cache", type=Path)
    parser.add_argument("--scale", type=int, default=20, help="one owner ×N")
    parser.add_argument("--consolidate-days", type=float, default=30.0)
    parser.add_argument("--distinct-texts", action="store_true",
                        help="each copy of the stream says its own texts")
    parser.add_argument("--replay", type=int, default=0, metavar="N",
                        help="place the first run of each tenth again N times, the rule "
                             "alone, and print the least CPU-µs per Episode")
    args = parser.parse_args(argv)
    settings = Settings()
    settings = replace(settings, clustering=replace(settings.clustering, member_threshold=0.0))
    base, _ = bc.locomo_stream(args.locomo, args.vectors_cache)
    items = bc.one_owner_stream(base, args.scale, distinct=args.distinct_texts)
    entries = bc._entries(items)
    instrument()
    n = len(items)
    tenths: list[tuple[int, float, collections.Counter[str], collections.Counter[str]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        rt, refs = bc.stream_runtime(Path(tmp), settings, items)
        svc = service.ClusterService(rt)  # type: ignore[arg-type]
        gc.collect()
        gc.freeze()
        days = args.consolidate_days
        next_consolidation = items[0].ts + days * bc.DAY
        seq = 0
        for start in range(0, n, bc.BATCH):
            if days and items[start].ts >= next_consolidation:
                before = cpu.copy(), work.copy()
                bc._consolidate_all(svc, rt, refs.values(), seq)  # not counted
                seq += 1
                next_consolidation = items[start].ts + days * bc.DAY
                cpu.clear()
                cpu.update(before[0])
                work.clear()
                work.update(before[1])
            chunk = items[start:start + bc.BATCH]
            tenth = min(9, start * 10 // n)
            if len(tenths) <= tenth:
                tenths.append((0, 0.0, collections.Counter(), collections.Counter()))
                cpu.clear()
                work.clear()
                keep_next[0] = args.replay > 0
            counting = cpu["counting"]
            t0 = time.process_time()
            bc.place_chunk(svc, chunk, bc.by_owner_of(chunk), refs, entries, lone=False)
            took = time.process_time() - t0 - (cpu["counting"] - counting)
            count, total, _, _ = tenths[tenth]
            tenths[tenth] = (count + len(chunk), total + took, cpu.copy(), work.copy())
        digest = bc.cluster_digest(rt.db())
    print(f"one owner x{args.scale}: {n:,} Episodes, consolidated every {days:g} d, "
          f"256 per transaction; clusters digest {digest}")
    steps = ["assign_run", "cosines", "_rejoin_pairs", "_later_rejoin", "put"]
    kinds = ["pairs one by one", "pairs in blocks", "items rescored after them",
             "consolidated joins", "moves out of a group"]
    print("tenth | CPU-µs per Episode: all, " + ", ".join(steps) + " | per Episode: "
          + ", ".join(kinds))
    sums: collections.Counter[str] = collections.Counter()
    for k, (count, total, spent, did) in enumerate(tenths):
        sums.update(did)
        for step in ("assign_run", "_rejoin_pairs"):  # both hold the counting
            spent[step] -= spent["counting"]
        print(f"{k} | {total / count * 1e6:6.1f} "
              + " ".join(f"{spent[s] / count * 1e6:6.2f}" for s in steps) + " | "
              + " ".join(f"{did[w] / count:7.3f}" for w in kinds))
    print("whole stream, per Episode: " + ", ".join(f"{w} {sums[w] / n:.3f}" for w in kinds))
    if kept:
        for owner, name, fn in originals:  # the rule as shipped, without the counters
            setattr(owner, name, fn)
        print(f"the first run of each tenth placed again by assign_run alone, least of "
              f"{args.replay} (CPU-µs per Episode):")
        print("  " + ", ".join(f"{replay(*run, args.replay):.1f}" for run in kept))
    return 0


def replay(state: Any, vectors: np.ndarray, ts: list[float], kw: dict[str, Any],
           times: int) -> float:
    """The least CPU-µs per Episode of ``times`` placements of one run on fresh copies of
    ``state`` (each copy made, and given room for the run's rows, untimed)."""
    best = float("inf")
    for _ in range(times):
        fresh = copy.deepcopy(state)
        # room for the run's rows made untimed: a copy holds its arrays at their length, so
        # every copy would otherwise pay the growth the stream paid once in many runs
        fresh._grow(len(fresh.ids) + len(ts), vectors.shape[1])
        t0 = time.process_time()
        fresh.assign_run(vectors, ts, lambda i: f"cl_replay_{i:08d}", **kw)
        best = min(best, time.process_time() - t0)
    return best / len(ts) * 1e6


if __name__ == "__main__":
    sys.exit(main())
