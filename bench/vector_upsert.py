"""What one row's upsert into the vector index costs once many small writes have piled up.

    python bench/vector_upsert.py [--rows 20000] [--fragments 200] [--tries 15]

Builds an episode table of ``--rows`` rows (its key index built), then writes ``--fragments``
one-row batches (what a Reflection's commits and the adds beside it leave until the next
compaction). Then times, median of ``--tries`` each:

- ``upsert`` of one row new to the table (an ``add``): counted, then appended;
- ``upsert`` of one row the table holds (an entry changed): matched (``merge_insert``);
- ``merge_insert`` of one new row, which every upsert was before (the comparison).

Prints milliseconds. Asserts nothing. Vectors are random (384 floats, the local model's).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from everos_reflect.index.vectors import VectorIndex
from everos_reflect.model import Kind, UserRef

DIM = 384
REF = UserRef.of("u_bench")


def _row(entry_id: str, rng: np.random.Generator) -> dict[str, Any]:
    return {"id": entry_id, "app_id": REF.app, "project_id": REF.project,
            "user_id": REF.user_id, "ts": 1_760_000_000.0,
            "timestamp": "2025-10-09T08:53:20+00:00", "subject": "s", "text": "t",
            "parent_type": "memcell", "parent_id": None, "session_id": None,
            "content_hash": "h", "path": "p", "embed_model": "bench",
            "vector": rng.random(DIM, dtype=np.float32)}


def _median_ms(work: Callable[[int], object], tries: int) -> float:
    times = []
    for n in range(tries):
        began = time.perf_counter()
        work(n)
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--fragments", type=int, default=200)
    parser.add_argument("--tries", type=int, default=15)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    index = VectorIndex(Path(tempfile.mkdtemp(prefix="everos-bench-upsert-")) / "lancedb", DIM)
    index.append(Kind.EPISODE, [_row(f"ep_{n}", rng) for n in range(args.rows)])
    index.optimize()
    for n in range(args.fragments):
        index.append(Kind.EPISODE, [_row(f"fr_{n}", rng)])
    table = index._table(Kind.EPISODE)

    def merge_new(n: int) -> None:
        data = index._to_arrow(Kind.EPISODE, [_row(f"mg_{n}", rng)])
        with index._writing():
            (table.merge_insert("key").when_matched_update_all()
             .when_not_matched_insert_all().execute(data))

    new = _median_ms(lambda n: index.upsert(Kind.EPISODE, [_row(f"nw_{n}", rng)]), args.tries)
    known = _median_ms(lambda n: index.upsert(Kind.EPISODE, [_row(f"fr_{n}", rng)]),
                       args.tries)
    before = _median_ms(merge_new, args.tries)
    print(f"{args.rows:,} rows + {args.fragments} one-row fragments, median of {args.tries}:")
    print(f"  upsert of a new row:        {new:7.1f} ms")
    print(f"  upsert of a known row:      {known:7.1f} ms")
    print(f"  merge_insert of a new row:  {before:7.1f} ms (every upsert before)")


if __name__ == "__main__":
    main()
