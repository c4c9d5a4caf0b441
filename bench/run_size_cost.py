"""What ``UserClusters.assign_run`` costs per run and per item as the run's size varies: the
set-up a run pays once, which small runs (a watcher's flush of one file: often one Episode;
a LoCoMo speaker's share of a 256-Episode batch: ~14) pay for few items.

A user with 30 clusters (random unit vectors, 384 dimensions, an hour apart), then ``--runs``
runs of each size, each three days after the last (so each run sees a few clusters in its
window), items a minute apart. CPU time of the process (``time.process_time``).

    python bench/run_size_cost.py [--sizes 1 4 13 64] [--runs 400]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from everos_reflect.clustering.matrix import UserClusters

DAY = 86400.0
KW = {"threshold": 0.55, "window_seconds": 7 * DAY, "rejoin_threshold": 0.7}


def _units(rng: np.random.Generator, count: int) -> np.ndarray:
    v = rng.standard_normal((count, 384))
    return (v / np.linalg.norm(v, axis=1)[:, None]).astype(np.float32)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[1, 4, 13, 64])
    parser.add_argument("--runs", type=int, default=400)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(1)
    for size in args.sizes:
        st = UserClusters()
        made = iter(range(10**9))
        new_id = (lambda q, made=made: f"c{next(made)}")  # noqa: E731

        st.assign_run(_units(rng, 30), [i * 3600.0 for i in range(30)], new_id, **KW)
        t = 30 * 3600.0
        vectors = [_units(rng, size) for _ in range(args.runs)]
        spent = 0.0
        for v in vectors:
            ts = [t + i * 60.0 for i in range(size)]
            t += size * 60.0 + 3 * DAY
            start = time.process_time()
            st.assign_run(v, ts, new_id, **KW)
            spent += time.process_time() - start
        print(f"run of {size:3d}: {spent / args.runs * 1e6:7.1f} CPU-µs per run, "
              f"{spent / args.runs / size * 1e6:6.1f} per item")
    return 0


if __name__ == "__main__":
    sys.exit(main())
