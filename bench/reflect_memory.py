"""Reflection's peak memory and wall time on LoCoMo: source trees side by side, in one run.

The figure this reproduces is ``bench/cost.py``'s reflect stage: a forced
``reflect_episodes`` run (extractive provider, bundled MiniLM) over every eligible cluster of
the LoCoMo root (544 Episodes, 2,541 facts), in a process of its own; its peak is the
process's ``ru_maxrss``, its time the run's. Here every source tree (``--tree``: this
checkout, an exported older commit) runs it on its own fresh copy of one prepared root, the
trees alternating round by round, so the two sides of a comparison share the machine's
state. Each run's Markdown tree and audit rows (``reflection_report`` without its per-run
columns) are compared with the first tree's: the output must not depend on the code measured.

    python bench/reflect_memory.py locomo10.json --prepare WORK      # build, index, cluster
    python bench/reflect_memory.py --root WORK/indexed --tree OLD --tree . --rounds 3

``--prepare`` (not timed) writes the root with ``bench/locomo_root.py``'s layout and
``bench/cost.py``'s settings (``max_clusters_per_run = 1000``), indexes it and reclusters it
with this checkout; the measured runs only copy it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
tree, root = Path(sys.argv[1]), Path(sys.argv[2])
# an editable install's finder would import the installed checkout instead of this tree
sys.meta_path = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
sys.path.insert(0, str(tree))
import everos_reflect
where = Path(everos_reflect.__file__).resolve()
assert where.is_relative_to(tree.resolve()), where
from everos_reflect.engine.engine import Engine
from everos_reflect.runtime import Runtime
from everos_reflect.settings import load_settings

rt = Runtime(root, load_settings(root))
started, cpu = time.perf_counter(), time.process_time()
outcome = Engine(rt).trigger("reflect_episodes", force=True, timeout=None)
seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
rt.close()
status = {}
for line in open("/proc/self/status"):
    key, _, value = line.partition(":")
    if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
        status[key] = round(int(value.split()[0]) / 1024, 1)
print(json.dumps({"seconds": round(seconds, 2), "cpu_seconds": round(cpu, 2),
                  "peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                  "rss_after_mb": status["VmRSS"], "anon_after_mb": status["RssAnon"],
                  "status": outcome.status, "counts": outcome.counts,
                  "sklearn": "sklearn" in sys.modules, "scipy": "scipy" in sys.modules}))
"""

OME = "[strategies.reflect_episodes]\nenabled = false\nmax_clusters_per_run = 1000\n"


def prepare(data: Path, work: Path) -> Path:
    """Build, index and recluster the LoCoMo root under ``work`` with this checkout."""
    sys.path.insert(0, str(HERE))
    import locomo_episodes as lm
    import locomo_root

    from everos_reflect.clustering.service import ClusterService
    from everos_reflect.index.sync import Indexer
    from everos_reflect.runtime import Runtime

    root = work / "indexed"
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    (root / "ome.toml").write_text(OME, encoding="utf-8")
    rows = lm.load(data)
    built = locomo_root.write_root(root, lm.episodes(rows), locomo_root.observations(rows),
                                   bulk=True)
    rt = Runtime(root)
    scanned = Indexer(rt).scan().as_dict()
    clusters = ClusterService(rt).recluster()
    rt.close()
    print(json.dumps({"root": str(root), "episodes": built.as_dict()["episodes"],
                      "facts": built.as_dict()["facts"],
                      "entries_embedded": scanned["entries_embedded"], "clusters": clusters}))
    return root


_JOURNAL = re.compile(rb"rj_[0-9a-f]{16}")
#: reflection_report columns that differ from run to run whatever the code
_PER_RUN = {"id", "run_id", "duration_ms", "created_at"}


def output_of(root: Path) -> tuple[dict[str, bytes], list[tuple[Any, ...]]]:
    """The root's Markdown files and its audit rows, in a form two runs can be compared in:
    each merge's random journal id (``reflection: rj_...``) renamed by its first appearance in
    path order (so which entries share one must still match), and ``reflection_report``
    without the columns a run sets by itself (its id, run id, duration, time)."""
    names: dict[bytes, bytes] = {}
    files = {}
    for path in sorted(root.rglob("*.md")):
        if ".index" in path.parts:
            continue
        files[path.relative_to(root).as_posix()] = _JOURNAL.sub(
            lambda m: names.setdefault(m.group(0), b"rj_%016d" % len(names)), path.read_bytes())
    conn = sqlite3.connect(root / ".index" / "sqlite" / "system.db")
    try:
        cols = [d[0] for d in conn.execute("SELECT * FROM reflection_report LIMIT 0").description]
        keep = [c for c in cols if c not in _PER_RUN]
        rows = sorted(conn.execute(f"SELECT {', '.join(keep)} FROM reflection_report"),
                      key=repr)
    finally:
        conn.close()
    return files, rows


def differences(a: Path, b: Path) -> str:
    """'' when the two roots' outputs are the same, else what differs."""
    files_a, rows_a = output_of(a)
    files_b, rows_b = output_of(b)
    changed = sorted(k for k in files_a.keys() | files_b.keys() if files_a.get(k) != files_b.get(k))
    out = []
    if changed:
        out.append(f"{len(changed)} Markdown file(s) differ, e.g. {changed[0]}")
    if rows_a != rows_b:
        out.append(f"audit rows differ ({len(rows_a)} vs {len(rows_b)})")
    return "; ".join(out)


def run_tree(tree: Path, indexed: Path, where: Path) -> dict[str, Any]:
    if where.exists():
        shutil.rmtree(where)
    shutil.copytree(indexed, where)
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    env.pop("PYTHONPATH", None)
    done = subprocess.run([sys.executable, "-c", CHILD, str(tree), str(where)], env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: child failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_path", type=Path, nargs="?", help="locomo10.json (--prepare)")
    parser.add_argument("--prepare", type=Path, metavar="WORK",
                        help="build, index and recluster the root in WORK/indexed, then stop")
    parser.add_argument("--root", type=Path, help="a root made by --prepare (WORK/indexed)")
    parser.add_argument("--tree", type=Path, action="append", default=[],
                        help="a source tree to run (two or more; the first is the baseline)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if args.prepare:
        if args.data_path is None or not args.data_path.is_file():
            parser.error("--prepare needs the path to locomo10.json")
        prepare(args.data_path.resolve(), args.prepare.resolve())
        return 0
    if args.root is None or not args.tree:
        parser.error("give --root and at least one --tree (or --prepare)")
    trees = [t.resolve() for t in args.tree]
    runs: dict[str, list[dict[str, Any]]] = {str(t): [] for t in trees}
    with tempfile.TemporaryDirectory(prefix="everos-reflect-memory-") as tmp:
        for r in range(args.rounds):
            for i, tree in enumerate(trees):
                where = Path(tmp) / f"t{i}-r{r}"
                got = run_tree(tree, args.root.resolve(), where)
                got["output_vs_first_tree"] = (
                    "—" if i == 0 else (differences(Path(tmp) / f"t0-r{r}", where)
                                        or "identical"))
                runs[str(tree)].append(got)
                print(f"round {r} {tree}: {json.dumps(got)}", flush=True)
                if i > 0:
                    shutil.rmtree(where)
            shutil.rmtree(Path(tmp) / f"t0-r{r}")
    print()
    print("| tree | runs | peak RSS MB (each) | peak mean | wall s (each) | wall mean | CPU s "
          "(each) | CPU mean | RSS after, MB | merged | loaded: scikit-learn / SciPy | output vs "
          "first tree |")
    print("|---|---:|---|---:|---|---:|---|---:|---:|---:|---|---|")

    def each(values: list[float]) -> str:
        return ", ".join(f"{v:.1f}" if v >= 100 else f"{v:.2f}" for v in values)

    for tree, got in runs.items():
        peaks = [g["peak_mb"] for g in got]
        walls = [g["seconds"] for g in got]
        cpus = [g["cpu_seconds"] for g in got]
        print(f"| {tree} | {len(got)} | {each(peaks)} | {statistics.mean(peaks):.1f} | "
              f"{each(walls)} | {statistics.mean(walls):.2f} | {each(cpus)} | "
              f"{statistics.mean(cpus):.2f} | "
              f"{statistics.mean(g['rss_after_mb'] for g in got):.1f} | "
              f"{'/'.join(sorted({str(g['counts'].get('merged')) for g in got}))} | "
              f"{'/'.join(sorted({str(g['sklearn']) for g in got}))} / "
              f"{'/'.join(sorted({str(g['scipy']) for g in got}))} | "
              f"{'; '.join(sorted({g['output_vs_first_tree'] for g in got}))} |")
    print(json.dumps(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
