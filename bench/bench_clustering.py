"""Assignment cost of online clustering at 10k and 100k Episodes (synthetic, real SQLite).

Synthetic users write ~7 Episodes a day for two years about a few hundred recurring topics
(vector = topic centre + noise, 384 dims); every Monday each eligible cluster is consolidated
(``mark_consolidated`` with the centroid as narrative vector), so the set of consolidated
clusters grows as it would in production. Each Episode goes through ``ClusterService.assign``
(candidates: clusters in the time window + the user's consolidated ones). In the same run, every
``--naive-every``-th assignment also times the naive alternative — load *every* cluster of the
user and score them all — on the same database state.

    python bench/bench_clustering.py [--sizes 10000 100000] [--per-user 5000]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from everos_reflect.clustering.online import Candidate, choose_cluster
from everos_reflect.clustering.service import ClusterService
from everos_reflect.index import db as dbmod
from everos_reflect.model import Kind, UserRef
from everos_reflect.settings import Settings

DIM = 384
START = datetime(2025, 1, 6, 8, 0, tzinfo=UTC)  # a Monday


class _Vectors:
    def __init__(self) -> None:
        self.data: dict[tuple[UserRef, str], np.ndarray] = {}

    def get_vectors(self, kind: Kind, ref: UserRef, ids: list[str]) -> dict[str, np.ndarray]:
        return {i: self.data[(ref, i)] for i in ids if (ref, i) in self.data}


class _Runtime:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.settings = Settings()
        self.vectors = _Vectors()
        self._conn: sqlite3.Connection | None = None

    def db(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = dbmod.connect(self.root)
        return self._conn


def _stream(n: int, per_user: int, seed: int):
    """(ref, entry_id, vector, ts) in time order across users."""
    rng = np.random.default_rng(seed)
    users = max(1, n // per_user)
    span = 730 * 86400.0
    rows = []
    for u in range(users):
        ref = UserRef.of(f"user{u:03d}")
        centres = rng.normal(size=(300, DIM)).astype(np.float32)
        count = per_user if u < users - 1 else n - per_user * (users - 1)
        ts = np.sort(rng.uniform(0, span, size=count))
        # topics come in bursts: a topic is likely to repeat within days
        topic = 0
        for k, t in enumerate(ts):
            if rng.random() < 0.35:
                topic = int(rng.zipf(1.3) % 300)
            v = centres[topic] + rng.normal(scale=0.6, size=DIM).astype(np.float32)
            v /= np.linalg.norm(v)
            rows.append((START.timestamp() + float(t), ref, f"ep_x_{u:03d}_{k:06d}", v))
    rows.sort(key=lambda r: r[0])
    return rows


def _naive(conn: sqlite3.Connection, svc: ClusterService, ref: UserRef, vec: np.ndarray,
           ts: float) -> int:
    rows = conn.execute("SELECT * FROM clusters WHERE app_id=? AND project_id=? AND user_id=?",
                        (ref.app, ref.project, ref.user_id)).fetchall()
    cands = [Candidate(r["cluster_id"], np.frombuffer(r["centroid"], dtype="<f4"),
                       r["first_ts"], r["last_ts"], r["consolidated_entry_id"] is not None)
             for r in rows]
    choose_cluster(vec, ts, cands, threshold=svc.threshold, window_seconds=svc.window_seconds,
                   rejoin_threshold=svc.rejoin_threshold)
    return len(cands)


def _consolidate(svc: ClusterService, rt: _Runtime, seq: list[int]) -> int:
    done = 0
    users = sorted({c.ref for c in svc.clusters()})
    for info in (c for ref in users for c in svc.eligible_for_reflection(ref, 10**9)):
        live = [m.entry_id for m in svc.members(info.cluster_id)]
        seq[0] += 1
        narrative = f"ep_n_{seq[0]:07d}"
        vecs = rt.vectors.get_vectors(Kind.EPISODE, info.ref, live)
        centre = np.mean(np.asarray(list(vecs.values())), axis=0)
        centre /= np.linalg.norm(centre)
        rt.vectors.data[(info.ref, narrative)] = centre.astype(np.float32)
        svc.mark_consolidated(info.cluster_id, narrative, centre, live)
        done += 1
    return done


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) * 1000 if values else float("nan")


def run(n: int, per_user: int, naive_every: int, seed: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rt = _Runtime(Path(tmp))
        svc = ClusterService(rt)  # type: ignore[arg-type]
        conn = rt.db()
        stream = _stream(n, per_user, seed)
        next_monday = START + timedelta(days=7, hours=-6)
        fast: list[float] = []
        naive: list[float] = []
        fast_same: list[float] = []
        naive_sizes: list[int] = []
        window_sizes: list[int] = []
        consolidated = 0
        seq = [0]
        started = time.perf_counter()
        for i, (ts, ref, eid, vec) in enumerate(stream):
            while ts >= next_monday.timestamp():
                consolidated += _consolidate(svc, rt, seq)
                next_monday += timedelta(days=7)
            rt.vectors.data[(ref, eid)] = vec
            if naive_every and i % naive_every == 0:
                t0 = time.perf_counter()
                window_sizes.append(len(svc._candidates(conn, ref, ts)))
                fast_same.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                naive_sizes.append(_naive(conn, svc, ref, vec, ts))
                naive.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            svc.assign(ref, eid, vec, ts)
            fast.append(time.perf_counter() - t0)
        total = time.perf_counter() - started
        clusters = conn.execute("SELECT COUNT(*) FROM clusters").fetchone()[0]
        users = len({r[1] for r in stream})
        print(f"\n{n} episodes, {users} user(s), {clusters} clusters, {consolidated} "
              f"consolidations; wall {total:.1f}s incl. weekly consolidation")
        print(f"  assign (window + consolidated): mean {statistics.mean(fast) * 1000:.2f} ms, "
              f"p50 {_pct(fast, 50):.2f} ms, p95 {_pct(fast, 95):.2f} ms, "
              f"p99 {_pct(fast, 99):.2f} ms")
        if naive:
            print(f"  candidate lookup + rule, sampled 1/{naive_every} "
                  f"({len(naive)} samples, same states):")
            print(f"    window + consolidated: mean {statistics.mean(fast_same) * 1000:.2f} ms, "
                  f"p95 {_pct(fast_same, 95):.2f} ms, candidates mean "
                  f"{statistics.mean(window_sizes):.0f}, max {max(window_sizes)}")
            print(f"    naive, every cluster:  mean {statistics.mean(naive) * 1000:.2f} ms, "
                  f"p95 {_pct(naive, 95):.2f} ms, candidates mean "
                  f"{statistics.mean(naive_sizes):.0f}, max {max(naive_sizes)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--per-user", type=int, default=5_000,
                        help="Episodes per synthetic user (over two years)")
    parser.add_argument("--naive-every", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    for n in args.sizes:
        run(n, args.per_user, args.naive_every, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
