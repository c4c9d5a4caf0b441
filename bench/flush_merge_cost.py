"""What ``ClusterService.on_entries_indexed_many`` costs of its own per index flush (issue 15,
session 48): the watcher's flush hands it one ``(ref, entries, vectors)`` per daily log, and
it reads each file's Episodes (epoch, id), checks that one user's consecutive files can be
handed over as one call, and joins them, before any clustering. A LoCoMo flush holds one
Episode per file (544 files in three flushes of 256), so that work is paid per Episode.

Times ``on_entries_indexed_many`` over the flushes of a stream of ``bench_clustering.py``
(``flush_of``: one batch per owner and UTC day, in path order, built before the clock) with
``on_entries_indexed`` and the transaction stubbed out: CPU-µs per Episode, the least and
the median of ``--repeat`` passes, and how many calls the files were merged into.

    python bench/flush_merge_cost.py LOCOMO_JSON --vectors-cache vecs.npy [--scale 20]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_clustering as bc

from everos_reflect.clustering.service import ClusterService
from everos_reflect.model import UserRef


class _Merged(ClusterService):
    """The service with its clustering and transaction taken out: what is left of
    ``on_entries_indexed_many`` is its own work. Counts the calls it hands on."""

    def __init__(self) -> None:  # no runtime: nothing here reads one
        self.calls = 0

    @contextlib.contextmanager
    def _writing(self) -> Iterator[Any]:
        yield None

    def on_entries_indexed(self, ref: UserRef, entries: Any, vectors: Any) -> dict[str, str]:
        self.calls += 1
        return {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("locomo")
    parser.add_argument("--vectors-cache", type=Path)
    parser.add_argument("--scale", type=int, default=0, help="one owner ×N; 0: LoCoMo")
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args(argv)
    base, _ = bc.locomo_stream(args.locomo, args.vectors_cache)
    items = bc.one_owner_stream(base, args.scale) if args.scale else base
    entries = bc._entries(items)
    refs = {o: UserRef.of(o) for o in sorted({it.owner for it in items})}
    flushes = [bc.flush_of(items[s:s + bc.BATCH], refs, entries)
               for s in range(0, len(items), bc.BATCH)]
    svc = _Merged()
    figures = []
    for _ in range(args.repeat):
        svc.calls = 0
        t0 = time.process_time()
        for flush in flushes:
            svc.on_entries_indexed_many(flush)
        figures.append((time.process_time() - t0) / len(items) * 1e6)
    files = sum(len(f) for f in flushes)
    name = f"one owner x{args.scale}" if args.scale else "LoCoMo"
    print(f"{name}: {len(items):,} Episodes in {files:,} files, {len(flushes)} flushes, merged "
          f"into {svc.calls:,} calls: least {min(figures):.2f}, median "
          f"{statistics.median(figures):.2f} CPU-µs per Episode")
    return 0


if __name__ == "__main__":
    sys.exit(main())
