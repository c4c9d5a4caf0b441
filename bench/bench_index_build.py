"""Write latency while ``optimize`` builds the IVF_PQ index (issue 15: no write waits > 1 s).

Fills an episode table with ``--rows`` random unit vectors (384 dims, 50 users), then runs
``VectorIndex.optimize()`` — compaction, then the first ANN build — while a writer thread
upserts one row at a time, as the watcher does. Prints the build time and the writer's latency
(max, p99, median) during the optimize, and how many writes completed meanwhile; then the
episode table's compaction (LanceDB's ``optimize`` call, timed from outside, so any version of
``VectorIndex`` can be measured) and the slowest upsert overlapping it.

    python bench/bench_index_build.py [--rows 60000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from everos_reflect.index.vectors import VectorIndex
from everos_reflect.model import UserRef

DIM = 384


def _row(ref: UserRef, entry_id: str, vector: np.ndarray) -> dict:
    return {"id": entry_id, "app_id": ref.app, "project_id": ref.project,
            "user_id": ref.user_id, "kind": "episode", "ts": 0.0,
            "timestamp": "2026-01-01T00:00:00+00:00", "subject": entry_id,
            "text": f"text of {entry_id}", "sources": [], "content_hash": "x",
            "path": "x.md", "embed_model": "bench", "vector": vector}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=60_000)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        index = VectorIndex(Path(tmp) / "lancedb", DIM)
        users = [UserRef.of(f"user_{u:02d}") for u in range(50)]
        for start in range(0, args.rows, 5000):
            vecs = rng.normal(size=(min(5000, args.rows - start), DIM)).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            index.append("episode", [_row(users[(start + i) % 50], f"ep_{start + i:07d}", v)
                                     for i, v in enumerate(vecs)])
        waits: list[float] = []
        spans: list[tuple[float, float]] = []  # (start, end) of each upsert
        compaction: list[tuple[float, float]] = []
        stop = threading.Event()
        table = index._table("episode")
        compact = table.optimize  # LanceDB's optimize: the compaction step, in any version

        def timed_compaction(**kwargs: object) -> object:
            t0 = time.perf_counter()
            try:
                return compact(**kwargs)
            finally:
                compaction.append((t0, time.perf_counter()))

        table.optimize = timed_compaction

        def writer() -> None:
            n = 0
            while not stop.is_set():
                v = rng.normal(size=DIM).astype(np.float32)
                v /= np.linalg.norm(v)
                t0 = time.perf_counter()
                index.upsert("episode", [_row(users[n % 50], f"ep_w{n:06d}", v)])
                t1 = time.perf_counter()
                waits.append(t1 - t0)
                spans.append((t0, t1))
                n += 1
                time.sleep(0.05)

        thread = threading.Thread(target=writer)
        thread.start()
        t0 = time.perf_counter()
        report = index.optimize()
        build = time.perf_counter() - t0
        stop.set()
        thread.join()
        names = {ix.name for ix in index._table("episode").list_indices()}
        print(f"{args.rows:,} rows: optimize (compaction + first IVF_PQ build) {build:.1f} s, "
              f"vector_idx built: {'vector_idx' in names}, rows now {report.get('episodes')}")
        if waits:
            q = np.percentile(waits, [50, 99])
            print(f"writer during optimize: {len(waits)} upserts, median {q[0] * 1000:.0f} ms, "
                  f"p99 {q[1] * 1000:.0f} ms, max {max(waits) * 1000:.0f} ms "
                  f"(target: no write waits > 1 s); mean {statistics.mean(waits) * 1000:.0f} ms")
            # the upserts that started or ended while the episode table was being compacted
            for c0, c1 in compaction:
                during = [(t1 - t0) for t0, t1 in spans if t0 < c1 and t1 > c0]
                print(f"compaction of the episode table: {(c1 - c0) * 1000:.0f} ms "
                      f"(attempts: {len(compaction)}), {len(during)} upserts overlapping it, "
                      f"max {max(during, default=0) * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
