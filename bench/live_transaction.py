"""The clustering's transaction on the live path: how many one watcher flush commits, and what
one lone Episode's costs as the users held in memory grow.

1. **Transactions per flush.** A watcher's settled events are synced as one batch
   (``Indexer.sync_paths``: one flush up to ``flush_entries``), and the clustering takes the
   whole flush in one transaction (``wiring._clustering``, ``ClusterService.batch``). Counted
   here on a real root (hash embedder): ``FILES`` logs of ``PER_FILE`` new Episodes each,
   synced as the watcher does, and the transactions the clustering service opened.
2. **One lone Episode** (an ``add``, or an agent writing slower than the debounce: a flush of
   one file holding one new Episode): CPU-µs of its ``on_entries_indexed`` transaction, the
   median of ``--lone`` of them, with ``--users`` other users' clusters held in memory (each
   placed once before, as a daemon serving them would hold them), and the CPU-µs per user
   of placing those users in one batch (a flush or scan over many users).

    python bench/live_transaction.py [--users 20 2000 8000] [--lone 300]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_clustering as bc

from everos_reflect.clustering import service
from everos_reflect.clustering.service import ClusterService
from everos_reflect.model import Entry, Kind, UserRef, format_timestamp
from everos_reflect.settings import Settings

FILES, PER_FILE = 4, 4
DIM = 384
#: Episodes (and clusters: far apart) each other user holds
HELD_EACH = 3


@contextlib.contextmanager
def _counted_transactions() -> Iterator[list[int]]:
    """The clustering service's transactions, counted while the block runs."""
    count = [0]
    real = service.transaction

    @contextlib.contextmanager
    def counted(conn: Any) -> Iterator[Any]:
        count[0] += 1
        with real(conn) as c:
            yield c

    service.transaction = counted  # type: ignore[assignment]
    try:
        yield count
    finally:
        service.transaction = real  # type: ignore[assignment]


def per_flush() -> None:
    from everos_reflect.embedding.base import HashEmbedder
    from everos_reflect.index.sync import Indexer
    from everos_reflect.runtime import Runtime

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        (root / ".index").mkdir(parents=True)
        os.environ["HOME"] = tmp
        rt = Runtime(root, Settings(), embedder=HashEmbedder(16))
        try:
            paths = set()
            for f in range(FILES):
                ref = UserRef.of(f"user{f % 2}")
                day = date(2026, 10, 12 + f)
                for n in range(PER_FILE):
                    e = rt.store.append(
                        ref, Kind.EPISODE, {"timestamp": f"{day.isoformat()}T{9 + n:02d}:00:00Z"},
                        {"Subject": f"s{n}", "Content": f"Episode {n} of file {f}."}, day=day)
                    paths.add(rt.store.path_for_id(ref, e.id))
            with _counted_transactions() as count:
                Indexer(rt).sync_paths(sorted(paths))
            placed = rt.db().execute("SELECT COUNT(*) FROM cluster_members").fetchone()[0]
        finally:
            rt.close()
    print(f"one flush of {len(paths)} files, {placed} Episodes placed: "
          f"{count[0]} clustering transaction(s)")


def _entry(owner: str, eid: str, ts: float) -> Entry:
    e = Entry(eid, Kind.EPISODE,
              {"owner_id": owner, "timestamp": format_timestamp(datetime.fromtimestamp(ts, UTC)),
               "parent_type": "memcell"},
              {"Subject": eid, "Content": f"episode {eid}"})
    _ = e.timestamp, e.text_hash
    return e


def lone(users: int, count: int, rng: np.random.Generator) -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    with tempfile.TemporaryDirectory() as tmp:
        rt = bc._Runtime(Path(tmp), Settings())
        svc = ClusterService(rt)  # type: ignore[arg-type]
        rt.db()
        loading = time.process_time()
        with svc.batch():  # every other user's clusters placed once: held in memory
            for u in range(users):
                owner = f"held{u}"
                entries = [_entry(owner, f"{owner}_{k}", t0 + k * 90 * 86400.0)
                           for k in range(HELD_EACH)]
                vecs = rng.standard_normal((HELD_EACH, DIM)).astype(np.float32)
                svc.on_entries_indexed(UserRef.of(owner), entries,
                                       {e.id: v for e, v in zip(entries, vecs, strict=True)})
        loading = time.process_time() - loading
        held = len(svc._cache.users)
        clusters = sum(len(s) for s in svc._cache.users.values())
        ref = UserRef.of("writer")
        vecs = rng.standard_normal((count, DIM)).astype(np.float32)
        lone_entries = [_entry("writer", f"writer_{k}", t0 + k * 600.0) for k in range(count)]
        spent = []
        gc.collect()
        gc.freeze()
        try:
            for e, v in zip(lone_entries, vecs, strict=True):
                start = time.process_time()
                svc.on_entries_indexed(ref, [e], {e.id: v})
                spent.append(time.process_time() - start)
        finally:
            gc.unfreeze()
    print(f"{users:6d} other users held ({held} users, {clusters} clusters in memory): "
          f"{statistics.median(spent) * 1e6:7.1f} CPU-µs per lone Episode's transaction "
          f"(median of {count}; least {min(spent) * 1e6:.1f}); placing them, one batch: "
          f"{loading * 1e6 / users:.1f} CPU-µs per user")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, nargs="*", default=[20, 2000, 8000])
    parser.add_argument("--lone", type=int, default=300)
    args = parser.parse_args(argv)
    per_flush()
    rng = np.random.default_rng(44)
    for users in args.users:
        lone(users, args.lone, rng)
    return 0


if __name__ == "__main__":
    sys.exit(main())
