"""Where ``ClusterService``'s assignment path spends its CPU on a stream of ``bench_clustering.py``:
the functions with the most own time (cProfile), per Episode, placed as an index flush does
(``on_entries_indexed`` per owner in one ``ClusterService.batch()`` of 256), or with
``--lone`` one ``assign`` transaction per Episode (a watcher syncing one file).

cProfile adds its own cost to every Python call (C calls less), so the total reads 2-3× the
bench's: the table ranks where to look, the bench says what a change gained. Its clock is
the process's CPU time (``time.process_time``), so other processes' load does not land on
whatever function was running.

    python bench/profile_assign.py LOCOMO_JSON --vectors-cache vecs.npy [--scale 20] [--lone]
        [--top 40] [--consolidate-days 30] [--part 0.9 1] [--distinct-texts] [--flush]

``--consolidate-days D``: every eligible cluster consolidated every D days of stream time
(``bench_clustering.py``'s consolidated row; the consolidating itself is not profiled).
``--part FROM TO``: profile only the batches starting in that fraction of the stream (``0.9 1``:
the last tenth), the rest placed unprofiled. ``--distinct-texts``: each copy of a one-owner
stream says its own texts (``bench_clustering.py``'s option of that name). ``--flush``: each
batch placed as the watcher's flush places it (``on_entries_indexed_many``, one batch per
daily log; ``bench_clustering.py --flush``).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_clustering as bc

from everos_reflect.clustering.service import ClusterService
from everos_reflect.settings import Settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("locomo")
    parser.add_argument("--vectors-cache", type=Path)
    parser.add_argument("--scale", type=int, default=0, help="one owner ×N; 0: LoCoMo")
    parser.add_argument("--lone", action="store_true", help="one transaction per Episode")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--consolidate-days", type=float, default=0.0)
    parser.add_argument("--part", type=float, nargs=2, default=(0.0, 1.0),
                        metavar=("FROM", "TO"))
    parser.add_argument("--distinct-texts", action="store_true")
    parser.add_argument("--flush", action="store_true",
                        help="place each batch as the watcher's flush does "
                             "(bench_clustering.py --flush)")
    args = parser.parse_args(argv)
    settings = Settings()
    settings = replace(settings, clustering=replace(settings.clustering, member_threshold=0.0))
    base, _ = bc.locomo_stream(args.locomo, args.vectors_cache)
    items = (bc.one_owner_stream(base, args.scale, distinct=args.distinct_texts) if args.scale
             else base)
    entries = bc._entries(items)
    # CPU time of the process, not wall time: the machine is shared, a wall clock charges
    # other processes' time slices to whichever function was running
    profile = cProfile.Profile(time.process_time)
    with tempfile.TemporaryDirectory() as tmp:
        rt, refs = bc.stream_runtime(Path(tmp), settings, items)
        svc = ClusterService(rt)  # type: ignore[arg-type]
        gc.collect()
        gc.freeze()
        step = 1 if args.lone else bc.BATCH
        n = 0  # Episodes profiled
        days = args.consolidate_days
        next_consolidation = items[0].ts + days * bc.DAY
        seq = 0
        for start in range(0, len(items), step):
            chunk = items[start:start + step]
            if days and chunk[0].ts >= next_consolidation:
                bc._consolidate_all(svc, rt, refs.values(), seq)
                seq += 1
                next_consolidation = chunk[0].ts + days * bc.DAY
            by_owner = bc.by_owner_of(chunk)
            flush = bc.flush_of(chunk, refs, entries) if args.flush and not args.lone else None
            if not args.part[0] * len(items) <= start < args.part[1] * len(items):
                bc.place_chunk(svc, chunk, by_owner, refs, entries, lone=args.lone, flush=flush)
                continue
            profile.enable()
            bc.place_chunk(svc, chunk, by_owner, refs, entries, lone=args.lone, flush=flush)
            profile.disable()
            n += len(chunk)
    stats = pstats.Stats(profile)
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])  # type: ignore[attr-defined]
    total = sum(v[2] for v in stats.stats.values())  # type: ignore[attr-defined]
    name = f"one owner x{args.scale}" if args.scale else "LoCoMo"
    way = "1 per transaction" if args.lone else f"{bc.BATCH} per transaction"
    if args.consolidate_days:
        way += f", consolidated every {args.consolidate_days:g} d"
    if args.distinct_texts:
        way += ", texts distinct per copy"
    if args.flush and not args.lone:
        way += ", as the watcher's flush places them"
    if tuple(args.part) != (0.0, 1.0):
        way += f", the batches from {args.part[0]:g} to {args.part[1]:g} of the stream"
    print(f"{name}, {n:,} Episodes, {way}: {total / n * 1e6:.1f} µs per Episode under cProfile")
    print("  own µs/Ep  cum µs/Ep   calls/Ep  function")
    for (file, line, func), (_, ncalls, tottime, cumtime, _) in rows[:args.top]:
        where = f"{Path(file).name}:{line}" if line else file
        print(f"  {tottime / n * 1e6:9.2f}  {cumtime / n * 1e6:9.2f}  {ncalls / n:9.2f}  "
              f"{func} ({where})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
