"""What reading each Episode's epoch costs once more per index flush (issue 15, session 47):
``on_entries_indexed_many`` sorts a flush's Episodes by ``(epoch, id)`` to merge one user's
consecutive files, and ``on_entries_indexed`` read every epoch again, where it now takes the
ones already read. Times that read alone (``entry_epoch`` of each Episode's memoised
timestamp, the sort) over the LoCoMo stream's pre-built Entries (``bench_clustering.py``,
their timestamps parsed once before, as the indexer leaves them), CPU-µs per Episode, the
least and the median of ``--repeat`` timings: the work the change took out of each flush.

    python bench/epoch_reads.py LOCOMO_JSON --vectors-cache vecs.npy
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_clustering as bc

from everos_reflect.clustering.service import _BY_TS_ID, entry_epoch
from everos_reflect.model import Kind


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("locomo")
    parser.add_argument("--vectors-cache", type=Path)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args(argv)
    items, _ = bc.locomo_stream(args.locomo, args.vectors_cache)
    entries = list(bc._entries(items).values())
    figures = []
    for _ in range(args.repeat):
        t0 = time.process_time()
        sorted(((entry_epoch(e.id, e.timestamp), e.id, e) for e in entries
                if e.kind is Kind.EPISODE), key=_BY_TS_ID)
        figures.append((time.process_time() - t0) / len(entries) * 1e6)
    print(f"{len(entries)} Episodes: one read of every epoch, sorted: least "
          f"{min(figures):.2f}, median {statistics.median(figures):.2f} CPU-µs per Episode")
    return 0


if __name__ == "__main__":
    sys.exit(main())
