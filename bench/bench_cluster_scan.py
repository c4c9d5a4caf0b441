"""Clustering inside the indexer: what ``scan`` of a LoCoMo root spends in the clustering
subscriber, per Episode, and how many transactions it opens (issue 15).

``bench_clustering.py`` times ``ClusterService`` fed directly; this times it where it runs in
the daemon: the indexer publishes each flush's changes, and the ``clustering`` subscriber
(one transaction per file before, one per flush now) assigns the Episodes. The root is written
by ``locomo_root.py`` into a temporary folder (LoCoMo: one Episode per session and speaker,
so about one per daily file), indexed with the hash embedder (no model: its vectors are
reproducible and cost nothing), and scanned ``--repeat`` times from a fresh copy. Reported:
CPU time (``time.process_time``) inside the subscriber per Episode (median run), the
clustering transactions opened (``BEGIN IMMEDIATE`` from the clustering service) and a digest
of the resulting clusters, so two checkouts can be compared run against run:

    PYTHONPATH=/path/to/checkout python bench/bench_cluster_scan.py locomo10.json [--repeat 5]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import locomo_root
from cluster_digest import cluster_dump

from everos_reflect.clustering import service as service_mod
from everos_reflect.embedding import HashEmbedder
from everos_reflect.index import events
from everos_reflect.index.sync import Indexer
from everos_reflect.runtime import Runtime
from everos_reflect.settings import load_settings


def _timed(fn: Callable[..., Any], spent: list[float]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            spent.append(time.process_time() - t0)
    return wrapper


def scan_once(base: Path, work: Path) -> dict[str, Any]:
    """Copy ``base`` to ``work``, scan it, and report the clustering subscriber's share."""
    shutil.copytree(base, work)
    settings = load_settings(work)
    settings = replace(settings, embedding=replace(settings.embedding, provider="hash"))
    rt = Runtime(work, settings, embedder=HashEmbedder(settings.embedding.dimensions))
    rt.db()  # migrate before timing
    spent: list[float] = []
    opened: list[int] = []
    real_tx = service_mod.transaction

    def counted(conn: Any) -> Any:
        opened.append(1)
        return real_tx(conn)

    # whichever way this checkout subscribes clustering (per file or per flush), time it
    per_file = events._subscribers.get("clustering")
    per_flush = events._batch_subscribers.get("clustering")
    service_mod.transaction = counted  # type: ignore[assignment]
    if per_file is not None:
        events._subscribers["clustering"] = _timed(per_file, spent)
    if per_flush is not None:
        events._batch_subscribers["clustering"] = _timed(per_flush, spent)
    try:
        t0 = time.process_time()
        report = Indexer(rt).scan()
        total = time.process_time() - t0
    finally:
        service_mod.transaction = real_tx  # type: ignore[assignment]
        if per_file is not None:
            events._subscribers["clustering"] = per_file
        if per_flush is not None:
            events._batch_subscribers["clustering"] = per_flush
    conn = rt.db()
    episodes = conn.execute("SELECT COUNT(*) FROM entries WHERE kind='episode'").fetchone()[0]
    dump = cluster_dump(conn)
    rt.close()
    return {"episodes": episodes, "files": report.files_seen, "clustering_s": sum(spent),
            "calls": len(spent), "transactions": len(opened), "scan_s": total,
            "clusters": len(dump["clusters"]),
            "digest": hashlib.sha256(json.dumps(dump).encode()).hexdigest()[:16]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("locomo", help="path to locomo10.json")
    parser.add_argument("--repeat", type=int, default=5, help="scans, median reported")
    args = parser.parse_args(argv)
    import everos_reflect
    print(f"library: {Path(everos_reflect.__file__).resolve().parent}")
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        locomo_root.build(args.locomo, base, bulk=True)
        Runtime(base, load_settings(base))  # installs the subscribers, as any process does
        runs = [scan_once(base, Path(tmp) / f"scan{n}") for n in range(max(1, args.repeat))]
    mid = sorted(runs, key=lambda r: r["clustering_s"])[(len(runs) - 1) // 2]
    per_ep = [r["clustering_s"] / r["episodes"] * 1e6 for r in runs]
    print(f"scan of a LoCoMo root: {mid['files']:,} files, {mid['episodes']:,} Episodes, "
          f"hash embedder, {len(runs)} scans")
    print(f"  clustering subscriber  {statistics.median(per_ep):7.1f} CPU-µs per Episode "
          f"(median; runs {', '.join(f'{x:.1f}' for x in per_ep)})")
    print(f"  calls {mid['calls']:,}, clustering transactions {mid['transactions']:,}, "
          f"whole scan {mid['scan_s']:.2f} CPU-s")
    print(f"  {mid['clusters']:,} clusters, digest {mid['digest']} "
          f"(all runs equal: {len({r['digest'] for r in runs}) == 1})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
