"""Reflection run time on LoCoMo: this checkout against another one, measured in one run.

The machine is shared, so absolute seconds drift with the load; the ratio of two runs made
back to back, alternating, is what this reports. For each source tree (``--tree``, e.g. a
``git worktree`` of an older commit) a child process with that tree first on ``PYTHONPATH``
builds the LoCoMo root (observation Episodes), indexes it (bundled MiniLM), reclusters at the
shipped threshold and times one forced ``reflect_episodes`` run over the whole backlog.

    python bench/reflect_speed.py /path/to/locomo10.json --tree /tmp/old --tree . [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

CHILD = r"""
import json, sys, time
from pathlib import Path
tree, data, root = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
# an editable install's finder would import the installed checkout instead of this tree
sys.meta_path = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
sys.path[:0] = [str(tree), str(tree / "bench")]
import everos_reflect, locomo_episodes as lm, locomo_root
from everos_reflect.clustering.service import ClusterService
from everos_reflect.engine.engine import Engine
from everos_reflect.index.sync import Indexer
from everos_reflect.runtime import Runtime
where = Path(everos_reflect.__file__).resolve()
assert where.is_relative_to(tree.resolve()), where
root.mkdir(parents=True)
(root / "ome.toml").write_text("[strategies.reflect_episodes]\nenabled = false\n"
                               "max_clusters_per_run = 1000\n")
rows = lm.load(data)
locomo_root.write_root(root, lm.episodes(rows), locomo_root.observations(rows), bulk=True)
rt = Runtime(root)
t0 = time.perf_counter(); Indexer(rt).scan(); t1 = time.perf_counter()
ClusterService(rt).recluster()
t2 = time.perf_counter()
out = Engine(rt).trigger("reflect_episodes", force=True, timeout=None)
t3 = time.perf_counter()
print(json.dumps({"index_s": round(t1 - t0, 1), "reflect_s": round(t3 - t2, 1),
                  "status": out.status, "counts": out.counts}))
"""


def time_tree(tree: Path, data: Path, work: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree), "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run([sys.executable, "-c", CHILD, str(tree), str(data), str(work)],
                          env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: child failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_path", type=Path)
    parser.add_argument("--tree", type=Path, action="append", required=True,
                        help="a source tree to time (give two or more)")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args(argv)
    results: dict[str, list[dict[str, Any]]] = {str(t): [] for t in args.tree}
    with tempfile.TemporaryDirectory(prefix="everos-speed-") as tmp:
        for r in range(args.rounds):
            for i, tree in enumerate(args.tree):
                got = time_tree(tree.resolve(), args.data_path.resolve(),
                                Path(tmp) / f"r{r}-t{i}")
                results[str(tree)].append(got)
                print(f"round {r} {tree}: {got}", flush=True)
    base = args.tree[0]
    mean = {t: sum(x["reflect_s"] for x in runs) / len(runs) for t, runs in results.items()}
    for tree in args.tree[1:]:
        print(f"reflect time {tree} / {base}: {mean[str(tree)] / mean[str(base)]:.2f} "
              f"({mean[str(tree)]:.1f} s vs {mean[str(base)]:.1f} s, {args.rounds} round(s), "
              f"machine shared)")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
