"""What the first scan of a copied merged root costs, and whether it leaves the clusters a
``reindex`` builds. A narrative naming a cluster id no cluster of the copy holds founds that
cluster during the scan; a rebuild seeds it before placing any Episode, so the user is placed
again (``place_after_merges``, after the flush commits) when one of their live Episodes would
join it (``ClusterService._draws_an_episode``).

One user holds ``scale`` replicas of every LoCoMo conversation's Episodes (as
``place_after_merges_cost.py`` builds them), indexed with the hash embedder, reclustered,
merged by one forced Reflection run of at most ``--merges`` clusters (the extractive
provider). The root is copied without ``.index/`` and scanned. Printed: the scan's wall time,
the placings it asked and their time, and whether the copy's cluster tables equal those of a
``reindex`` of a second copy. Each tree (``--tree``) runs in a process of its own, the trees
alternating; wall time, with the machine's load beside it.

    python bench/copied_root_scan_cost.py /path/to/locomo10.json [--scales 1,4] [--merges 20]
        [--tree OLD --tree .] [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cost
import place_after_merges_cost as pam


def measure(data_path: Path, root: Path, scale: int, merges: int) -> dict[str, Any]:
    from everos_reflect.clustering.service import ClusterService
    from everos_reflect.engine.engine import Engine
    from everos_reflect.index.sync import Indexer

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.test_cluster_history_as_reindex import cluster_tables

    count = pam.one_owner_root(data_path, root, scale, merges)
    rt = cost._runtime(root, "hash")
    Indexer(rt).scan()
    ClusterService(rt).recluster()
    out = Engine(rt).trigger("reflect_episodes", force=True, timeout=None)
    rt.close()
    copy, rebuilt = root.parent / f"{root.name}-copy", root.parent / f"{root.name}-rebuilt"
    for dest in (copy, rebuilt):
        shutil.copytree(root, dest, ignore=shutil.ignore_patterns(".index"))

    spent: list[float] = []
    original = ClusterService.place_after_merges

    def timed(self: ClusterService, refs: Any) -> None:
        start = time.perf_counter()
        try:
            original(self, refs)
        finally:
            spent.append(time.perf_counter() - start)

    ClusterService.place_after_merges = timed  # type: ignore[method-assign]
    live = cost._runtime(copy, "hash")
    try:
        t0 = time.perf_counter()
        Indexer(live).scan()
        scan_s = time.perf_counter() - t0
    finally:
        ClusterService.place_after_merges = original  # type: ignore[method-assign]
    fresh = cost._runtime(rebuilt, "hash")
    try:
        Indexer(fresh).reindex()
        same = cluster_tables(live) == cluster_tables(fresh)
    finally:
        fresh.close()
        live.close()
    return {"scale": scale, "episodes": count, "merged": out.counts.get("merged"),
            "scan_s": round(scan_s, 2), "placings": len(spent),
            "place_s": round(sum(spent), 2), "equals_reindex": same,
            "load": round(os.getloadavg()[0], 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_path", type=Path)
    parser.add_argument("--scales", type=cost._ints, default=[1, 4])
    parser.add_argument("--merges", type=int, default=20,
                        help="max_clusters_per_run of the run that merges the root")
    parser.add_argument("--tree", type=Path, action="append",
                        help="a source tree to time (default: this checkout)")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args(argv)
    trees = [t.resolve() for t in args.tree or [Path(__file__).resolve().parents[1]]]
    with tempfile.TemporaryDirectory(prefix="everos-copied-") as tmp:
        for scale in args.scales:
            for r in range(args.rounds):
                for n, tree in enumerate(trees):
                    got = pam.call_in_tree(
                        tree, "copied_root_scan_cost",
                        f"measure(Path({str(args.data_path.resolve())!r}), "
                        f"Path({str(Path(tmp) / f'x{scale}-r{r}-t{n}')!r}), {scale}, "
                        f"{args.merges})")
                    print(json.dumps(got), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
