"""Fleet speed-up: 40 LoCoMo-conversation roots, Reflection run one after another by plain
``trigger`` vs ``fleet run`` on a local Ray with 1 and with 2 workers.

Roots: replica ``r`` (0..3) of each of the 10 LoCoMo conversations, as ``bench/cost.py``
builds them (new users, dates shifted, sentences rotated), one conversation per root, with its
observations as atomic facts. Every root is indexed and clustered once into a template; each
mode then works on fresh copies, so all three do exactly the same merges.

The LLM is the fake OpenAI-compatible server of ``tests/fake_openai.py`` answering every call
after a fixed latency (``--llm-latency``, default 0.3 s); each root's ``everos.toml`` points at
it, so the fleet opens roots with the production opener (``fleet.work.open_root``: the root's
own settings, one embedder per worker process). Modes:

- **sequential**: in this process, per root ``Engine(runtime).trigger("reflect_episodes",
  force=True)`` — what ``everos-reflect trigger`` does in-process — one root after another;
- **ray-1** / **ray-2**: ``run_fleet`` on a fresh local Ray with ``num_cpus`` 1 / 2 (one root
  task per CPU). Ray's start-up (``ray.init``) is reported apart; worker processes starting
  and importing the package count in the run's wall time.

Speed-up = sequential ÷ ray-2; overhead at one worker = ray-1 ÷ sequential − 1, and per task =
(ray-1 − sequential) ÷ tasks. On a shared machine, label the figures as measured under load.

    python bench/fleet.py /path/to/locomo10.json [--roots 40] [--llm-latency 0.3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.fake_openai
import cost
import locomo_episodes as lm
import locomo_root

STRATEGY = "reflect_episodes"


def _replica_order(sample_id: str) -> tuple[int, str]:
    base, _, replica = sample_id.partition("x")
    return int(replica or 0), base


def build_templates(data_path: Path, work: Path, n_roots: int) -> list[Path]:
    """``n_roots`` indexed and clustered roots (one LoCoMo conversation replica each), with the
    bundled local embedder (loaded once for all of them)."""
    from everos_reflect.embedding import CachingEmbedder
    from everos_reflect.embedding.local import LocalEmbedder
    from everos_reflect.index.sync import Indexer
    from everos_reflect.runtime import Runtime

    model = LocalEmbedder()

    data = lm.load(data_path)
    replicas = -(-n_roots // len(data))
    episodes, facts = cost.scaled_episodes(data, replicas)
    by_sample: dict[str, list[Any]] = defaultdict(list)
    for ep in episodes:
        by_sample[ep.sample_id].append(ep)
    samples = sorted(by_sample, key=_replica_order)
    roots = []
    for i, sample in enumerate(samples[:n_roots]):
        root = work / "template" / f"shard-{i:02d}"
        roots.append(root)
        if (root / ".index").exists():
            continue
        root.mkdir(parents=True, exist_ok=True)
        (root / "ome.toml").write_text(cost.OME, "utf-8")
        locomo_root.write_root(root, by_sample[sample], facts, bulk=True)
        runtime = Runtime(root, embedder=CachingEmbedder(model))
        Indexer(runtime).scan()
        runtime.close()
        print(f"  template {root.name}: {sample}", flush=True)
    return roots


def fresh_copies(templates: list[Path], dest: Path, llm_url: str) -> list[Path]:
    if dest.exists():
        shutil.rmtree(dest)
    out = []
    for template in templates:
        root = dest / template.name
        shutil.copytree(template, root)
        (root / "everos.toml").write_text(
            f'[llm]\nprovider = "openai"\nbase_url = "{llm_url}"\napi_key = "x"\n'
            'model = "fake"\n', "utf-8")
        out.append(root)
    return out


def run_sequential(roots: list[Path]) -> dict[str, Any]:
    from everos_reflect.engine.engine import Engine
    from everos_reflect.fleet.work import open_root

    merges, statuses, clusters = 0, defaultdict(int), defaultdict(int)
    started = time.perf_counter()
    for root in roots:
        runtime = open_root(str(root))
        outcome = Engine(runtime).trigger(STRATEGY, force=True, timeout=None, trigger="manual")
        runtime.close()
        statuses[outcome.status] += 1
        merges += outcome.counts.get("merged", 0)
        for key, n in outcome.counts.items():
            clusters[key] += n
    return {"seconds": round(time.perf_counter() - started, 2), "merges": merges,
            "statuses": dict(statuses), "clusters": dict(clusters)}


def run_ray(roots: list[Path], workers: int) -> dict[str, Any]:
    import ray

    from everos_reflect.fleet.config import FleetConfig
    from everos_reflect.fleet.ray_backend import run_fleet

    t = time.perf_counter()
    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False,
             logging_level="WARNING")
    init_seconds = time.perf_counter() - t
    try:
        config = FleetConfig(file="bench", roots=tuple(str(r) for r in roots), num_cpus=workers)
        report = run_fleet(config, roots, STRATEGY, force=True)
    finally:
        ray.shutdown()
    return {"seconds": round(report.seconds, 2), "ray_init_seconds": round(init_seconds, 2),
            "merges": sum(r.merges for r in report.results), "statuses": report.counts,
            "clusters": _sum_counts(r.counts for r in report.results),
            "tasks": report.submitted,
            "task_seconds": round(sum(r.seconds for r in report.results), 2),
            "errors": [r.error for r in report.results if r.error][:3]}


def _sum_counts(counts: Any) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for one in counts:
        for key, n in one.items():
            out[key] += n
    return dict(out)


def markdown(result: dict[str, Any]) -> str:
    seq, r1, r2 = result["sequential"], result["ray-1"], result["ray-2"]
    lines = [
        "# Fleet: many roots on Ray vs one after another",
        "",
        f"Generated by `python bench/fleet.py locomo10.json --roots {result['roots']} "
        f"--llm-latency {result['llm_latency']}` on {result['cpus']} CPU(s), "
        f"bundled local embedder. **{result['load_note']}** "
        f"(load average at start {result['loadavg_start']}, at end {result['loadavg_end']}).",
        "",
        f"{result['roots']} roots, one LoCoMo conversation each (replicas of the 10), indexed "
        "and clustered beforehand; each mode runs Reflection (`force`) on fresh copies. LLM: "
        f"fake OpenAI-compatible server, {result['llm_latency'] * 1000:.0f} ms per call.",
        "",
        "| mode | wall s | merges | cluster outcomes | root statuses | Ray start-up s (apart) |",
        "|---|---:|---:|---|---|---:|",
        f"| sequential `trigger` | {seq['seconds']} | {seq['merges']} | {seq['clusters']} | "
        f"{seq['statuses']} | - |",
        f"| Ray, 1 worker | {r1['seconds']} | {r1['merges']} | {r1['clusters']} | "
        f"{r1['statuses']} | {r1['ray_init_seconds']} |",
        f"| Ray, 2 workers | {r2['seconds']} | {r2['merges']} | {r2['clusters']} | "
        f"{r2['statuses']} | {r2['ray_init_seconds']} |",
        "",
        f"- speed-up with 2 workers (sequential ÷ Ray-2): **{result['speedup_2']:.2f}×** "
        "(target ≥ 1.8×)",
        f"- Ray overhead at 1 worker (Ray-1 ÷ sequential − 1): "
        f"**{result['overhead_1_pct']:+.1f} %** (target ≤ 5 %), "
        f"{result['overhead_per_task_s']:+.3f} s per task",
        f"- per root: {result['per_root_s']:.2f} s of Reflection (sequential wall ÷ roots)",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_path", type=Path)
    parser.add_argument("--roots", type=int, default=40)
    parser.add_argument("--llm-latency", type=float, default=0.3)
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--work", type=Path, help="keep roots here (templates are reused)")
    parser.add_argument("--load-note", default="measured under load (shared 2-core machine)")
    args = parser.parse_args(argv)
    if not args.data_path.is_file():
        parser.error(f"no such file: {args.data_path}")
    from tests.fake_openai import FakeOpenAI

    fake = FakeOpenAI(latency=args.llm_latency).start()
    fake.script(*[cost._fake_reply] * 1_000_000)
    result: dict[str, Any] = {"roots": args.roots, "llm_latency": args.llm_latency,
                              "cpus": os.cpu_count(),
                              "load_note": args.load_note,
                              "loadavg_start": " ".join(f"{x:.1f}" for x in os.getloadavg())}
    with tempfile.TemporaryDirectory(prefix="everos-fleet-") as tmp:
        work = args.work or Path(tmp)
        t = time.perf_counter()
        templates = build_templates(args.data_path, work, args.roots)
        print(f"templates ready in {time.perf_counter() - t:.0f} s", flush=True)
        for mode in ("sequential", "ray-1", "ray-2"):
            roots = fresh_copies(templates, work / mode, fake.base_url)
            if mode == "sequential":
                result[mode] = run_sequential(roots)
            else:
                result[mode] = run_ray(roots, int(mode[-1]))
            print(f"  {mode}: {result[mode]}", flush=True)
    fake.stop()
    seq, r1, r2 = (result[m]["seconds"] for m in ("sequential", "ray-1", "ray-2"))
    result["speedup_2"] = seq / r2
    result["overhead_1_pct"] = (r1 / seq - 1) * 100
    result["overhead_per_task_s"] = (r1 - seq) / max(1, result["ray-1"]["tasks"])
    result["per_root_s"] = seq / args.roots
    result["loadavg_end"] = " ".join(f"{x:.1f}" for x in os.getloadavg())
    if len({result[m]["merges"] for m in ("sequential", "ray-1", "ray-2")}) != 1:
        print("WARNING: the modes did not make the same number of merges", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "fleet.json").write_text(json.dumps(result, indent=2) + "\n", "utf-8")
    (args.out / "fleet.md").write_text(markdown(result), "utf-8")
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
