"""What writing the cluster rows of an index batch costs SQLite, and what each part of it is.

On a scratch ``system.db`` (the real schema, migrated), writes batches shaped like one owner
×20's (43 transactions of 171 new clusters and 253 member rows) and prints CPU-µs per Episode
for the cluster inserts, the member inserts and ``COMMIT``, in variants that each take one
thing away, to size it (none of them is a change to make as such):

- ``base``: as the service writes them (a 1.5 KB float32 centroid per cluster);
- ``small``: an empty centroid (what the blob costs: its bytes in the page and the WAL);
- ``no-trigger``: without ``clusters_version_insert`` (the per-row version bump);
- ``no-checkpoint``: ``wal_autocheckpoint`` off (what the WAL checkpoints cost at COMMIT).

    python bench/cluster_row_cost.py [base small no-trigger no-checkpoint ...]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from everos_reflect.index import db as dbmod

BATCHES, CLUSTERS, MEMBERS, DIM = 43, 171, 253, 384


def run(variant: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        conn = dbmod.connect(Path(tmp))
        if variant == "no-checkpoint":
            conn.execute("PRAGMA wal_autocheckpoint = 0")
        if variant == "no-trigger":
            conn.execute("DROP TRIGGER clusters_version_insert")
        conn.execute("INSERT OR IGNORE INTO cluster_versions (app_id, project_id, user_id, "
                     "version) VALUES ('a', 'p', 'u', 0)")
        conn.commit()
        rng = np.random.default_rng(0)
        key, entry = 1, 0
        inserts = members = commits = 0.0
        for _ in range(BATCHES):
            conn.execute("BEGIN IMMEDIATE")
            blobs = [b"" if variant == "small" else
                     rng.standard_normal(DIM).astype("<f4").tobytes() for _ in range(CLUSTERS)]
            rows = [(f"cl_{key + n:012x}", "a", "p", "u", blobs[n], 1.0, 1, float(n),
                     float(n), None, "t", key + n) for n in range(CLUSTERS)]
            t0 = time.process_time()
            conn.executemany(
                "INSERT INTO clusters (cluster_id, app_id, project_id, user_id, centroid, "
                "centroid_norm, member_count, first_ts, last_ts, consolidated_entry_id, "
                "created_at, cluster_key) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", rows)
            inserts += time.process_time() - t0
            member_rows = [("a", "p", "u", f"ep_{entry + n:07d}", f"cl_{key + n % CLUSTERS:012x}",
                            1.0, None, "h", "t", key + n % CLUSTERS) for n in range(MEMBERS)]
            t0 = time.process_time()
            conn.executemany(
                "INSERT INTO cluster_members (app_id, project_id, user_id, entry_id, "
                "cluster_id, ts, similarity, text_hash, joined_at, cluster_key) "
                "VALUES (?,?,?,?,?,?,?,?,?,?)", member_rows)
            members += time.process_time() - t0
            t0 = time.process_time()
            conn.execute("COMMIT")
            commits += time.process_time() - t0
            key += CLUSTERS
            entry += MEMBERS
        conn.close()
    n = BATCHES * MEMBERS
    return (f"{variant:14s} cluster rows {inserts / n * 1e6:5.2f}   member rows "
            f"{members / n * 1e6:5.2f}   COMMIT {commits / n * 1e6:5.2f}   "
            f"sum {(inserts + members + commits) / n * 1e6:5.2f} CPU-µs per Episode")


def main(argv: list[str]) -> int:
    for variant in argv or ["base", "small", "no-trigger", "no-checkpoint"]:
        if variant not in ("base", "small", "no-trigger", "no-checkpoint"):
            raise SystemExit(f"unknown variant {variant!r}")
        print(run(variant))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
