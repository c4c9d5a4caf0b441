"""What a Reflection run costs as one user's history grows: its merges (each reads its
sources' day logs to select, check and archive them) and its end, which places the Episodes
of each user it merged for as a rebuild does (``ClusterService.place_after_merges``), under
the index's write lock that the watcher and another process's ``add`` wait for.

One user holds ``scale`` replicas of every LoCoMo conversation's Episodes (replica ``r`` a day
later, its sentences rotated, as ``bench/cost.py`` scales), indexed with the hash embedder and
reclustered; then one forced Reflection run merging at most ``--merges`` clusters (the
extractive provider). Printed: the run's wall time, the placing's (a timer around
``place_after_merges``), the longest wait of another process's write while the placing ran
(one ``BEGIN IMMEDIATE`` every 50 ms), and the logs the run parsed and the parses it reused
(``markdown.parsed``'s memo). Each tree (``--tree``, e.g. a ``git worktree`` of another
commit; default this checkout) runs in a process of its own, the trees alternating; wall
time, with the machine's load beside it.

    python bench/place_after_merges_cost.py /path/to/locomo10.json [--scales 1,10,40]
        [--merges 20] [--tree OLD --tree .] [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cost
import locomo_episodes as lm
import locomo_root


def one_owner_root(data_path: Path, root: Path, scale: int, merges: int) -> int:
    """Write ``scale`` replicas of LoCoMo's Episodes, all of one user, into ``root``."""
    episodes, _ = cost.scaled_episodes(lm.load(data_path), scale)
    owner = [replace(ep, sample_id="one", user_id="u_owner") for ep in episodes]
    owner.sort(key=lambda ep: ep.timestamp)
    root.mkdir(parents=True)
    (root / "ome.toml").write_text(
        f"[strategies.reflect_episodes]\nenabled = false\nmax_clusters_per_run = {merges}\n",
        encoding="utf-8")
    locomo_root.write_root(root, owner, None, bulk=True)
    return len(owner)


class _Writer(threading.Thread):
    """Another process's writer: takes the index's write lock every 50 ms while ``on`` is
    set, and keeps the longest wait."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path, self.on, self.done, self.longest = path, threading.Event(), False, 0.0

    def run(self) -> None:
        conn = sqlite3.connect(self.path, timeout=600, isolation_level=None)
        while not self.done:
            if self.on.wait(0.05):
                start = time.perf_counter()
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("ROLLBACK")
                self.longest = max(self.longest, time.perf_counter() - start)
                time.sleep(0.05)
        conn.close()


def measure(data_path: Path, root: Path, scale: int, merges: int) -> dict[str, Any]:
    from everos_reflect.clustering.service import ClusterService
    from everos_reflect.engine.engine import Engine
    from everos_reflect.index import db as dbmod
    from everos_reflect.index.sync import Indexer
    from everos_reflect.markdown import parsed

    count = one_owner_root(data_path, root, scale, merges)
    rt = cost._runtime(root, "hash")
    Indexer(rt).scan()
    t0 = time.perf_counter()
    ClusterService(rt).recluster()
    recluster_s = time.perf_counter() - t0
    spent: list[float] = []
    original = ClusterService.place_after_merges

    writer = _Writer(dbmod.db_path(root))
    writer.start()

    def timed(self: ClusterService, refs: Any) -> None:
        start = time.perf_counter()
        writer.on.set()
        try:
            original(self, refs)
        finally:
            writer.on.clear()
            spent.append(time.perf_counter() - start)

    ClusterService.place_after_merges = timed  # type: ignore[method-assign]
    before = dict(parsed.counts)
    try:
        t0 = time.perf_counter()
        out = Engine(rt).trigger("reflect_episodes", force=True, timeout=None)
        run_s = time.perf_counter() - t0
    finally:
        ClusterService.place_after_merges = original  # type: ignore[method-assign]
        writer.done = True
        writer.join()
    return {"scale": scale, "episodes": count, "status": out.status,
            "merged": out.counts.get("merged"), "recluster_s": round(recluster_s, 2),
            "run_s": round(run_s, 2), "place_s": round(sum(spent), 2),
            "longest_write_wait_s": round(writer.longest, 2),
            "logs_parsed": parsed.counts["parsed"] - before["parsed"],
            "parses_reused": parsed.counts["reused"] - before["reused"],
            "load": round(os.getloadavg()[0], 1)}


def call_in_tree(tree: Path, module: str, call: str) -> dict[str, Any]:
    """``module.call`` (a bench module of this folder; ``call`` its function's call as source
    text, ``Path`` at hand) in a process importing ``tree``'s package, not an editable
    install's; the JSON it returns, with the tree."""
    code = ("import sys, json\n"
            "from pathlib import Path\n"
            "sys.meta_path = [f for f in sys.meta_path if '__editable__' not in "
            "getattr(f, '__module__', '')]\n"
            f"sys.path[:0] = [{str(tree)!r}, {str(Path(__file__).resolve().parent)!r}]\n"
            f"import everos_reflect, {module} as bench\n"
            f"assert everos_reflect.__file__.startswith({str(tree)!r}), everos_reflect.__file__\n"
            f"print(json.dumps(bench.{call}))\n")
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: child failed:\n{done.stderr[-2000:]}")
    return {"tree": str(tree), **json.loads(done.stdout.strip().splitlines()[-1])}


def in_child(tree: Path, data_path: Path, root: Path, scale: int,
             merges: int) -> dict[str, Any]:
    """:func:`measure` in a process importing ``tree``'s package."""
    return call_in_tree(tree, "place_after_merges_cost",
                        f"measure(Path({str(data_path)!r}), Path({str(root)!r}), {scale}, "
                        f"{merges})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_path", type=Path)
    parser.add_argument("--scales", type=cost._ints, default=[1, 10, 40])
    parser.add_argument("--merges", type=int, default=20,
                        help="max_clusters_per_run of the timed run")
    parser.add_argument("--tree", type=Path, action="append",
                        help="a source tree to time (default: this checkout)")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args(argv)
    trees = [t.resolve() for t in args.tree or [Path(__file__).resolve().parents[1]]]
    with tempfile.TemporaryDirectory(prefix="everos-place-") as tmp:
        for scale in args.scales:
            for r in range(args.rounds):
                for n, tree in enumerate(trees):
                    got = in_child(tree, args.data_path.resolve(),
                                   Path(tmp) / f"x{scale}-r{r}-t{n}", scale, args.merges)
                    print(json.dumps(got), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
