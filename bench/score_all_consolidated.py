"""Where scoring every consolidated cluster stops being cheaper than bounding them with the
pivot index (``UserClusters.candidate_positions``, ``SCORE_ALL_CONSOLIDATED``).

A user's clusters: ``k`` consolidated ones spread over 300 days around 30 topics, and 40 plain
ones in the last week; Episodes near the topics, at the end of that week, decided by
``UserClusters.choose`` (the rule a rebuild replays per Episode) with the limit above ``k``
(all scored) and at 0 (the pivot index). Printed per ``k``: CPU-µs per decision, the least of
``--repeat`` passes each way, the ways alternating in one process, and whether the decisions
were the same. 384-dimensional random unit vectors; one BLAS thread, as the rule runs.

    python bench/score_all_consolidated.py [--ks 8,16,32,64,128,256] [--repeat 7]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from everos_reflect.clustering import matrix
from everos_reflect.clustering.matrix import ClusterRow, UserClusters, one_blas_thread

DAY = 86400.0
DIM = 384
RULE = {"threshold": 0.55, "window_seconds": 7 * DAY, "rejoin_threshold": 0.8}


def _unit(rng: np.random.Generator, near: np.ndarray | None, noise: float) -> np.ndarray:
    v = rng.normal(size=DIM) * noise + (0 if near is None else near)
    return (v / np.linalg.norm(v)).astype(np.float32)


def state_and_probes(k: int, seed: int = 7) -> tuple[UserClusters, np.ndarray]:
    rng = np.random.default_rng(seed)
    topics = [_unit(rng, None, 1.0) for _ in range(30)]
    state = UserClusters()
    for n in range(k):
        when = float(rng.uniform(0, 300)) * DAY
        state.put(ClusterRow(f"cl_c{n:05d}", _unit(rng, topics[n % 30] * 12, 1.0), 1.0, 3,
                             when, when + DAY, f"ep_n{n}"))
    for n in range(40):
        when = (393 + float(rng.uniform(0, 7))) * DAY
        state.put(ClusterRow(f"cl_r{n:05d}", _unit(rng, topics[n % 30] * 12, 1.0), 1.0, 2,
                             when, when + 3600.0, None))
    probes = np.stack([_unit(rng, topics[n % 30] * 12, 1.0) for n in range(400)])
    return state, probes


def one_pass(state: UserClusters, probes: np.ndarray, limit: int) -> tuple[float, list]:
    matrix.SCORE_ALL_CONSOLIDATED = limit
    with one_blas_thread():
        start = time.process_time()
        decided = [state.choose(v, 400 * DAY, **RULE).cluster_id for v in probes]
        spent = time.process_time() - start
    return spent / len(probes), decided


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ks", default="8,16,32,64,128,256")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    kept = matrix.SCORE_ALL_CONSOLIDATED
    print(f"SCORE_ALL_CONSOLIDATED in the code: {kept}")
    print("| consolidated clusters | all scored, CPU-µs | pivot index, CPU-µs | same decisions |")
    print("|---:|---:|---:|---|")
    for k in (int(x) for x in args.ks.split(",")):
        state, probes = state_and_probes(k)
        best = {"all": float("inf"), "index": float("inf")}
        same = True
        for _ in range(args.repeat):
            t_all, d_all = one_pass(state, probes, k)
            t_idx, d_idx = one_pass(state, probes, 0)
            best["all"], best["index"] = min(best["all"], t_all), min(best["index"], t_idx)
            same = same and d_all == d_idx
        print(f"| {k} | {best['all'] * 1e6:.1f} | {best['index'] * 1e6:.1f} | {same} |")
    matrix.SCORE_ALL_CONSOLIDATED = kept
    return 0


if __name__ == "__main__":
    sys.exit(main())
