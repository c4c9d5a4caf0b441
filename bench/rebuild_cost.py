"""What a rebuild of one user's clusters costs once Reflection has consolidated some of them:
the plan ``recluster``, the end of a Reflection run (``place_after_merges``) and ``undo``
(``place_after_undo``) make of a user's whole history, replaying the online rule Episode by
Episode.

One root is built once: one user holding ``scale`` replicas of every LoCoMo conversation's
Episodes (``bench/place_after_merges_cost.py``'s root, hash embedder), reclustered, then one
forced Reflection run merging at most ``--merges`` clusters, so that every later Episode's
rule also scores the consolidated clusters. Then each tree (``--tree``, e.g. a ``git
worktree`` of another commit; default this checkout) plans that user's rebuild ``--repeat``
times in a process of its own, the trees alternating for ``--rounds`` rounds. Nothing is
written: the plan is what is timed. Printed per tree and round: the median wall time and
process CPU time of a plan (CPU time counts BLAS's own threads too), and a digest of the
plan (its clusters and members) that must be the same for every tree.

    python bench/rebuild_cost.py /path/to/locomo10.json [--scale 20] [--merges 20]
        [--tree OLD --tree .] [--rounds 3] [--repeat 5]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cost
import place_after_merges_cost as place


def build(data_path: Path, root: Path, scale: int, merges: int) -> dict[str, Any]:
    """The root: one owner's history, reclustered, then one Reflection run."""
    from everos_reflect.clustering.service import ClusterService
    from everos_reflect.engine.engine import Engine
    from everos_reflect.index.sync import Indexer

    count = place.one_owner_root(data_path, root, scale, merges)
    rt = cost._runtime(root, "hash")
    Indexer(rt).scan()
    ClusterService(rt).recluster()
    out = Engine(rt).trigger("reflect_episodes", force=True, timeout=None)
    return {"episodes": count, "status": out.status, "merged": out.counts.get("merged")}


def plan_times(root: Path, repeat: int) -> dict[str, Any]:
    """Plan the owner's rebuild ``repeat`` times (read once, planned ``repeat`` times)."""
    from everos_reflect.clustering.service import ClusterService
    from everos_reflect.model import UserRef

    rt = cost._runtime(root, "hash")
    service = ClusterService(rt)
    (ref,) = [UserRef(*r) for r in service._db.execute(
        "SELECT DISTINCT app_id, project_id, user_id FROM entries WHERE kind='episode'")]
    rows = service._episode_rows(ref)
    vectors = service._user_vectors(ref, rows)
    named = service._narrative_namers()
    walls, cpus, digest = [], [], ""
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        planned = service._plan_user(ref, rows, vectors, named)
        cpus.append(time.process_time() - c0)
        walls.append(time.perf_counter() - w0)
        plan = planned.plan
        digest = hashlib.sha256(json.dumps(
            [sorted((c.cluster_id, c.count, c.consolidated_entry_id or "")
                    for c in plan.clusters.values()),
             sorted((m[0], m[1], m[4] or "") for m in plan.members)]).encode()).hexdigest()[:16]
    consolidated = sum(c.consolidated_entry_id is not None for c in plan.clusters.values())
    return {"episodes": len(rows), "clusters": len(plan.clusters),
            "consolidated": consolidated, "wall_s": round(statistics.median(walls), 3),
            "cpu_s": round(statistics.median(cpus), 3), "digest": digest,
            "load": round(os.getloadavg()[0], 1)}


def in_child(tree: Path, root: Path, repeat: int) -> dict[str, Any]:
    """:func:`plan_times` in a process importing ``tree``'s package."""
    return place.call_in_tree(tree, "rebuild_cost", f"plan_times(Path({str(root)!r}), {repeat})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_path", type=Path)
    parser.add_argument("--scale", type=int, default=20)
    parser.add_argument("--merges", type=int, default=20,
                        help="max_clusters_per_run of the run that consolidates")
    parser.add_argument("--tree", type=Path, action="append",
                        help="a source tree to time (default: this checkout)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5, help="plans per process")
    args = parser.parse_args(argv)
    trees = [t.resolve() for t in args.tree or [Path(__file__).resolve().parents[1]]]
    with tempfile.TemporaryDirectory(prefix="everos-rebuild-") as tmp:
        root = Path(tmp) / "root"
        print(json.dumps({"built": build(args.data_path.resolve(), root, args.scale,
                                         args.merges)}), flush=True)
        for _ in range(args.rounds):
            for tree in trees:
                print(json.dumps(in_child(tree, root, args.repeat)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
