"""Digest of a root's clusters after a full rebuild: proves a clustering change keeps results.

Copies ROOT to a temporary folder, runs ``reindex`` (which ends with ``recluster``) with the
chosen embedder, and prints the sha256 of the canonical dump of ``clusters`` and
``cluster_members`` (every column except the wall-clock ``*_at`` ones), plus counts. Run it on
two checkouts (``PYTHONPATH=/path/to/other/checkout``) to compare their clusterings byte for
byte; ``--dump FILE`` writes the dump itself for a diff.

    python bench/cluster_digest.py ROOT [--embedder hash|local] [--dump out.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sqlite3
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any


def cluster_dump(conn: sqlite3.Connection) -> dict[str, Any]:
    """``clusters`` and ``cluster_members`` as sorted, JSON-able rows (floats by ``repr``,
    centroids as hex), leaving out the wall-clock columns that differ between runs."""
    clusters = [
        [r[0], r[1], r[2], r[3], bytes(r[4]).hex(), repr(r[5]), r[6], repr(r[7]), repr(r[8]),
         r[9]]
        for r in conn.execute(
            "SELECT cluster_id, app_id, project_id, user_id, centroid, centroid_norm, "
            "member_count, first_ts, last_ts, consolidated_entry_id FROM clusters "
            "ORDER BY cluster_id")
    ]
    members = [
        [r[0], r[1], r[2], r[3], r[4], repr(r[5]), repr(r[6]), r[7], r[8]]
        for r in conn.execute(
            "SELECT app_id, project_id, user_id, entry_id, cluster_id, ts, similarity, "
            "deprecated_by, text_hash FROM cluster_members "
            "ORDER BY app_id, project_id, user_id, entry_id")
    ]
    return {"clusters": clusters, "members": members}


def compare(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Clusters byte for byte; members byte for byte but for ``similarity``, whose largest
    difference is reported (it is the one column BLAS rounding touched in the old code)."""
    sim = 6  # position of similarity in a member row
    old_m = {tuple(m[:4]): m for m in old["members"]}
    new_m = {tuple(m[:4]): m for m in new["members"]}
    same_rows = old_m.keys() == new_m.keys() and all(
        old_m[k][:sim] + old_m[k][sim + 1:] == new_m[k][:sim] + new_m[k][sim + 1:] for k in old_m)
    deltas = [abs(float(old_m[k][sim]) - float(new_m[k][sim])) for k in old_m
              if k in new_m and old_m[k][sim] != "None" and new_m[k][sim] != "None"]
    return {
        "clusters_identical": old["clusters"] == new["clusters"],
        "members_identical_but_similarity": same_rows,
        "members_identical": old["members"] == new["members"],
        "similarities_differing": sum(d != 0.0 for d in deltas),
        "max_similarity_delta": max(deltas, default=0.0),
    }


def digest(dump: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(dump, sort_keys=True).encode()).hexdigest()


def rebuild_and_dump(root: Path, embedder: str, threshold: float | None = None,
                     window_days: float | None = None) -> dict[str, Any]:
    from everos_reflect.embedding.base import HashEmbedder
    from everos_reflect.index.sync import Indexer
    from everos_reflect.runtime import Runtime
    from everos_reflect.settings import load_settings

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "root"
        shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".index"))
        kwargs: dict[str, Any] = {}
        if embedder == "hash":
            kwargs["embedder"] = HashEmbedder(64)
        settings = load_settings(copy)
        changes = {k: v for k, v in (("threshold", threshold),
                                     ("time_window_days", window_days)) if v is not None}
        settings = replace(settings, clustering=replace(settings.clustering, **changes))
        rt = Runtime(copy, settings, **kwargs)
        Indexer(rt).reindex()
        dump = cluster_dump(rt.db())
        rt.close()
        return dump


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--embedder", choices=("hash", "local"), default="hash")
    parser.add_argument("--threshold", type=float, help="override clustering.threshold")
    parser.add_argument("--window-days", type=float, help="override clustering.time_window_days")
    parser.add_argument("--dump", type=Path)
    parser.add_argument("--compare", type=Path, help="a --dump of another checkout to compare")
    args = parser.parse_args(argv)
    dump = rebuild_and_dump(args.root, args.embedder, args.threshold, args.window_days)
    if args.dump:
        args.dump.write_text(json.dumps(dump, indent=0, sort_keys=True))
    print(f"{digest(dump)}  clusters={len(dump['clusters'])} members={len(dump['members'])} "
          f"root={args.root} embedder={args.embedder} "
          f"threshold={args.threshold} window_days={args.window_days}")
    if args.compare:
        result = compare(json.loads(args.compare.read_text()), dump)
        print("vs", args.compare, json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
