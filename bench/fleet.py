"""Fleet speed-up: 40 LoCoMo-conversation roots, Reflection run one after another by plain
``trigger`` vs ``fleet run`` on a local Ray with 1 and with 2 workers.

Roots: replica ``r`` (0..3) of each of the 10 LoCoMo conversations, as ``bench/cost.py``
builds them (new users, dates shifted, sentences rotated), one conversation per root, with its
observations as atomic facts. Every root is indexed and clustered once into a template; each
side then works on fresh copies, so all three do exactly the same merges.

The LLM is the fake OpenAI-compatible server of ``tests/fake_openai.py`` answering every call
after a fixed latency (``--llm-latency``, default 0.3 s) with ``bench/cost.py``'s fake reply (a
merge gets a short narrative built from its sources, short enough for the narrative length
guard, so merges really commit). The server runs in its own process, so it takes the GIL from
no side. Each root's ``everos.toml`` points at it, so the fleet opens roots with the production
opener (``fleet.work.open_root``: the root's own settings, one embedder per worker process).
Sides:

- **sequential**: in this process, per root ``Engine(runtime).trigger("reflect_episodes",
  force=True)`` — what ``everos-reflect trigger`` does in-process — one root after another;
- **ray-1** / **ray-2**: ``run_fleet`` on a fresh local Ray with ``num_cpus`` 1 / 2: one
  worker process per CPU, each running up to ``roots_per_worker`` roots at once (the fleet's
  default, 2: one root's LLM waits filled by the other's work; the worker's model calls take
  turns, on the one thread of its CPU). Ray's start-up (``ray.init``) is reported apart;
  worker processes starting and importing the package count in the run's wall time.

More sides explain the figures (optional, not part of the issue's comparison):

- **ray-1-serial** / **ray-2-serial**: the same with ``roots_per_worker = 1``, one root at a
  time per worker (the fleet before roots shared a worker);
- **procs-2**: the control without Ray — the same ``run_root`` per root on a pool of 2 plain
  processes (``multiprocessing``), one root at a time each, its embedder on one thread and
  ``OMP_NUM_THREADS=1`` as in a one-CPU Ray task;
- **ray-2-4roots**: ``run_fleet`` on the same 2-CPU Ray with ``task_cpus = 0.5`` and
  ``roots_per_worker = 1``: 4 worker processes of one root each on 2 cores (4 models loaded).

During each side's timed part, ``fleet_cpu.CpuSampler`` records the CPU time of every process
the bench started (driver, fake LLM, Ray's daemons, workers) and the cores' idle time, and
every side opens its roots through ``fleet_cpu.phase_opener`` (the production opener under
per-phase clocks, in whichever process runs the root): where a root's time goes, per side.

After each side, every root's Markdown is read back: narratives written (live Episodes with
``parent_type: cluster``) and sources archived, per root, against the merges the run reported.
A side whose Markdown disagrees with its report, or that committed no merge, is flagged.

Speed-up = sequential ÷ ray-2 (and ÷ each extra side); overhead at one worker = ray-1 ÷
sequential − 1, and per task = (ray-1 − sequential) ÷ tasks. On a shared machine, label the
figures as measured under load.

Sides can run in separate invocations (``--sides``, same ``--work``): each writes its figures
to ``WORK/side-<name>.json`` with a fingerprint of the code and of the template roots, and the
report is assembled only from sides with the same fingerprints.

    python bench/fleet.py /path/to/locomo10.json [--roots 40] [--llm-latency 0.3] [--work DIR]
                          [--sides sequential,ray-1,ray-2,ray-1-serial,ray-2-serial,...]
                          [--load-note TEXT] [--low-memory true|false]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.fake_openai
import cost
import locomo_episodes as lm
import locomo_root
from fleet_cpu import CpuSampler, phase_opener, phase_summary

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


def fresh_copies(templates: list[Path], dest: Path, llm_url: str,
                 embedding_threads: int | None = None,
                 low_memory: bool | None = None) -> list[Path]:
    """Copies of the templates whose ``everos.toml`` points at the fake LLM; ``[embedding]``
    ``threads`` / ``low_memory`` only when given (otherwise the defaults)."""
    if dest.exists():
        shutil.rmtree(dest)
    embedding = ([f"threads = {embedding_threads}"] if embedding_threads else []) + (
        [f"low_memory = {str(low_memory).lower()}"] if low_memory is not None else [])
    threads = "[embedding]\n" + "".join(f"{line}\n" for line in embedding) if embedding else ""
    out = []
    for template in templates:
        root = dest / template.name
        shutil.copytree(template, root)
        (root / "everos.toml").write_text(
            f'[llm]\nprovider = "openai"\nbase_url = "{llm_url}"\napi_key = "x"\n'
            f'model = "fake"\n{threads}', "utf-8")
        out.append(root)
    return out


# --- the fake LLM, in a process of its own -------------------------------------------------------


def _serve_fake(latency: float, conn: Any) -> None:
    """Child process: the fake OpenAI server until told to stop; then how many chat calls."""
    from tests.fake_openai import FakeOpenAI

    fake = FakeOpenAI(latency=latency).start()
    fake.script(*[cost._fake_reply] * 1_000_000)
    conn.send(fake.base_url)
    conn.recv()
    conn.send({"calls": len(fake.chat_bodies()), "max_in_flight": fake.max_in_flight})
    fake.stop()


class FakeLLMProcess:
    """``tests.fake_openai.FakeOpenAI`` with ``cost._fake_reply`` in a spawned process."""

    def __init__(self, latency: float) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve_fake, args=(latency, child), daemon=True)

    def __enter__(self) -> FakeLLMProcess:
        self._proc.start()
        self.base_url: str = self._conn.recv()
        self.pid: int | None = self._proc.pid
        return self

    def stats(self) -> dict[str, int]:
        self._conn.send("stop")
        return self._conn.recv()

    def __exit__(self, *exc: object) -> None:
        self._proc.join(timeout=10)
        if self._proc.is_alive():
            self._proc.kill()


# --- what the Markdown says --------------------------------------------------------------------


def markdown_merges(root: Path) -> dict[str, int]:
    """Read the root's Episode logs back: live narratives (``parent_type: cluster``) and
    archived Episodes — what a merge commits, whatever the run reported."""
    from everos_reflect.markdown.store import MarkdownStore

    store = MarkdownStore(root)
    narratives = archived = 0
    for path in sorted(root.glob("**/episodes/*.md")):
        for entry in store.read(path).entries:
            if entry.deprecated_by:
                archived += 1
            elif entry.meta.get("parent_type") == "cluster":
                narratives += 1
    return {"narratives": narratives, "archived": archived}


def verify(roots: list[Path], reported: dict[str, int]) -> dict[str, Any]:
    """Per root: merges reported vs narratives and archived Episodes found in its Markdown."""
    per_root = {}
    for root in roots:
        found = markdown_merges(root)
        per_root[root.name] = {"reported": reported.get(str(root), 0), **found}
    mismatched = sorted(name for name, r in per_root.items() if r["reported"] != r["narratives"])
    return {"per_root": per_root, "mismatched_roots": mismatched,
            "narratives": sum(r["narratives"] for r in per_root.values()),
            "archived": sum(r["archived"] for r in per_root.values()),
            "roots_with_merges": sum(1 for r in per_root.values() if r["narratives"])}


# --- the three sides ---------------------------------------------------------------------------


def run_sequential(roots: list[Path], sampler: CpuSampler, opener: Any) -> dict[str, Any]:
    from everos_reflect.engine.engine import Engine

    statuses: dict[str, int] = defaultdict(int)
    clusters: dict[str, int] = defaultdict(int)
    reported: dict[str, int] = {}
    sampler.start()
    started = time.perf_counter()
    root_seconds: dict[str, float] = {}
    for root in roots:
        t = time.perf_counter()
        runtime = opener(str(root))
        outcome = Engine(runtime).trigger(STRATEGY, force=True, timeout=None, trigger="manual")
        runtime.close()
        root_seconds[root.name] = round(time.perf_counter() - t, 2)
        statuses[outcome.status] += 1
        reported[str(root)] = outcome.counts.get("merged", 0)
        for key, n in outcome.counts.items():
            clusters[key] += n
    seconds = time.perf_counter() - started
    return {"seconds": round(seconds, 2), "cpu": sampler.stop(),
            "merges": sum(reported.values()), "reported": reported,
            "statuses": dict(statuses), "clusters": dict(clusters), "tasks": len(roots),
            "task_seconds": round(sum(root_seconds.values()), 2), "root_seconds": root_seconds}


def run_ray(roots: list[Path], cpus: int, sampler: CpuSampler, opener: Any,
            task_cpus: float = 1.0, roots_per_worker: int | None = None) -> dict[str, Any]:
    import ray

    from everos_reflect.fleet.config import FleetConfig
    from everos_reflect.fleet.ray_backend import run_fleet

    t = time.perf_counter()
    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False,
             logging_level="WARNING")
    init_seconds = time.perf_counter() - t
    try:
        config = FleetConfig(file="bench", roots=tuple(str(r) for r in roots), num_cpus=cpus,
                             task_cpus=task_cpus)
        if roots_per_worker is not None:  # else the fleet's default
            config = replace(config, roots_per_worker=roots_per_worker)
        sampler.start()
        # timed around the call, not by run_fleet's own clock: the driver's first
        # get_strategy (importing the strategies, ~1 s) counts, as it does in sequential
        started = time.perf_counter()
        report = run_fleet(config, roots, STRATEGY, force=True, opener=opener)
        seconds = time.perf_counter() - started
        cpu = sampler.stop()
    finally:
        ray.shutdown()
    return {"seconds": round(seconds, 2), "ray_init_seconds": round(init_seconds, 2),
            "cpu": cpu, "task_cpus": task_cpus, "roots_per_worker": config.roots_per_worker,
            "merges": sum(r.merges for r in report.results),
            "reported": {r.root: r.merges for r in report.results},
            "statuses": report.counts,
            "clusters": _sum_counts(r.counts for r in report.results),
            "tasks": report.submitted,
            "task_seconds": round(sum(r.seconds for r in report.results), 2),
            "root_seconds": {Path(r.root).name: round(r.seconds, 2) for r in report.results},
            "worker_pids": len({r.pid for r in report.results if r.pid}),
            "errors": [r.error for r in report.results if r.error][:3]}


def run_procs(roots: list[Path], processes: int, sampler: CpuSampler,
              opener: Any) -> dict[str, Any]:
    """The control without Ray: ``run_root`` per root on a pool of plain processes, handed out
    one root at a time as a process frees up (as Ray does). The processes are started before
    the clock (as Ray's are at ``ray.init``); importing the package counts, as in a worker.
    Like a one-CPU Ray task they run with ``OMP_NUM_THREADS=1`` (numpy's BLAS on one thread)
    and, through the roots' ``everos.toml``, embed on one thread."""
    import multiprocessing

    from everos_reflect.fleet.work import run_root

    ctx = multiprocessing.get_context("spawn")
    saved = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "1"  # what Ray sets in a one-CPU task; children inherit it
    try:
        pool = ctx.Pool(processes)
    finally:
        if saved is None:
            del os.environ["OMP_NUM_THREADS"]
        else:
            os.environ["OMP_NUM_THREADS"] = saved
    with pool:
        pool.map(abs, range(processes))  # every process up before the clock starts
        sampler.start()
        started = time.perf_counter()
        results = list(pool.imap_unordered(partial(run_root, name=STRATEGY, force=True,
                                                   opener=opener),
                                           [str(r) for r in roots]))
        seconds = time.perf_counter() - started
        cpu = sampler.stop()
    return {"seconds": round(seconds, 2), "cpu": cpu,
            "merges": sum(r.merges for r in results),
            "reported": {r.root: r.merges for r in results},
            "statuses": dict(_count(r.status for r in results)),
            "clusters": _sum_counts(r.counts for r in results),
            "tasks": len(results),
            "task_seconds": round(sum(r.seconds for r in results), 2),
            "root_seconds": {Path(r.root).name: round(r.seconds, 2) for r in results},
            "worker_pids": len({r.pid for r in results if r.pid}),
            "errors": [r.error for r in results if r.error][:3]}


def _count(items: Any) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for item in items:
        out[item] += 1
    return out


def _sum_counts(counts: Any) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for one in counts:
        for key, n in one.items():
            out[key] += n
    return dict(out)


# --- one code snapshot, one set of templates -----------------------------------------------------


def code_fingerprint() -> dict[str, str]:
    """The commit and a hash of every source file the sides run (package, bench, fake server):
    a side run from other code — a merge landing mid-run — cannot pass as the same snapshot."""
    repo = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    files = sorted([*(repo / "everos_reflect").rglob("*.py"), *(repo / "bench").glob("*.py"),
                    repo / "tests" / "fake_openai.py"])
    for path in files:
        digest.update(path.relative_to(repo).as_posix().encode())
        digest.update(path.read_bytes())
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    return {"commit": head or "unknown", "sources_sha256": digest.hexdigest()[:16]}


def templates_fingerprint(templates: list[Path]) -> str:
    digest = hashlib.sha256()
    for template in templates:
        for path in sorted(template.glob("**/*.md")):
            digest.update(path.relative_to(template.parent).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def run_side(side: str, templates: list[Path], work: Path, latency: float,
             low_memory: bool | None = None) -> dict[str, Any]:
    before = code_fingerprint()
    load_start = " ".join(f"{x:.1f}" for x in os.getloadavg())
    phases = work / f"phases-{side}"
    shutil.rmtree(phases, ignore_errors=True)
    phases.mkdir(parents=True)
    # every side opens its roots with the production opener under the same phase clocks
    # (bench/fleet_cpu.py), in whichever process runs the root
    opener = partial(phase_opener, str(phases))
    with FakeLLMProcess(latency) as fake:
        sampler = CpuSampler(fake_llm_pid=fake.pid)
        # procs-2: one embedding thread per root, as a one-CPU Ray task gets automatically
        roots = fresh_copies(templates, work / side, fake.base_url,
                             embedding_threads=1 if side == "procs-2" else None,
                             low_memory=low_memory)
        if side == "sequential":
            out = run_sequential(roots, sampler, opener)
        elif side == "procs-2":
            out = run_procs(roots, 2, sampler, opener)
        elif side == "ray-2-4roots":
            out = run_ray(roots, 2, sampler, opener, task_cpus=0.5, roots_per_worker=1)
        elif side.endswith("-serial"):
            out = run_ray(roots, int(side.split("-")[1]), sampler, opener, roots_per_worker=1)
        else:
            out = run_ray(roots, int(side.rsplit("-", 1)[1]), sampler, opener)
        out["llm"] = fake.stats()
    out["phases"] = phase_summary(phases)
    out["markdown"] = verify(roots, out.pop("reported"))
    after = code_fingerprint()
    out |= {"side": side, "code": before, "code_changed_during_run": before != after,
            "templates": templates_fingerprint(templates), "roots": len(roots),
            "embedding_low_memory": low_memory,
            "llm_latency": latency, "loadavg_start": load_start,
            "loadavg_end": " ".join(f"{x:.1f}" for x in os.getloadavg()),
            "when": datetime.now(UTC).isoformat(timespec="seconds")}
    return out


# --- report --------------------------------------------------------------------------------------


#: The issue's comparison; every report needs these three.
SIDES = ("sequential", "ray-1", "ray-2")
#: Sides that explain the 2-worker figure, reported when they were run on the same code.
EXTRA_SIDES = ("ray-1-serial", "ray-2-serial", "procs-2", "ray-2-4roots")
NAMES = {"sequential": "sequential `trigger`", "ray-1": "Ray, 1 worker",
         "ray-2": "Ray, 2 workers",
         "ray-1-serial": "Ray, 1 worker, one root at a time (`roots_per_worker = 1`)",
         "ray-2-serial": "Ray, 2 workers, one root at a time each (`roots_per_worker = 1`)",
         "procs-2": "2 plain processes, no Ray (control)",
         "ray-2-4roots": "Ray, 2 CPUs, 4 worker processes of one root "
                         "(`task_cpus = 0.5`, `roots_per_worker = 1`)"}


def present(result: dict[str, Any]) -> list[str]:
    return [s for s in (*SIDES, *EXTRA_SIDES) if s in result]


def problems(result: dict[str, Any]) -> list[str]:
    """Why these figures must not be quoted as the measurement, if they must not."""
    sides = [result[s] for s in present(result)]
    out = []
    if len({(s["code"]["sources_sha256"], s["templates"]) for s in sides}) != 1:
        out.append("the sides ran different code or different template roots")
    if len({s.get("embedding_low_memory") for s in sides}) != 1:
        out.append("the sides ran with different [embedding] low_memory settings")
    if any(s["code_changed_during_run"] for s in sides):
        out.append("the code changed while a side ran")
    if len({s["markdown"]["narratives"] for s in sides}) != 1:
        out.append("the sides committed different numbers of merges")
    for s in sides:
        if s["markdown"]["narratives"] == 0:
            out.append(f"{s['side']} committed no merge")
        if s["markdown"]["mismatched_roots"]:
            out.append(f"{s['side']}: Markdown disagrees with the reported merges in "
                       f"{', '.join(s['markdown']['mismatched_roots'])}")
        if set(s["statuses"]) != {"ok"}:
            out.append(f"{s['side']}: root statuses {s['statuses']}")
    return out


def summarise(result: dict[str, Any]) -> None:
    seq, r1, r2 = (result[m]["seconds"] for m in SIDES)
    result["speedup_2"] = seq / r2
    result["speedups"] = {s: round(seq / result[s]["seconds"], 3) for s in present(result)}
    result["overhead_1_pct"] = (r1 / seq - 1) * 100
    result["overhead_per_task_s"] = (r1 - seq) / max(1, result["ray-1"]["tasks"])
    result["per_root_s"] = seq / result["roots"]
    # Ray's own share at one worker: its wall time beyond the tasks' own time (scheduling,
    # worker start-up and imports before the first task, result transfer). Only where the
    # worker ran one root at a time: roots running at once overlap their own times.
    serial = next((s for s in ("ray-1", "ray-1-serial") if s in result
                   and result[s].get("roots_per_worker", 1) == 1), None)
    result["dispatch_1_side"] = serial
    result["dispatch_1_per_task_s"] = None if serial is None else (
        result[serial]["seconds"] - result[serial]["task_seconds"]) / max(
        1, result[serial]["tasks"])
    result["problems"] = problems(result)


def cpu_table(result: dict[str, Any]) -> list[str]:
    """CPU-seconds by process role per side, and what was left idle of the cores."""
    sides = [s for s in present(result) if "cpu" in result[s]]
    if not sides:
        return []
    roles: list[str] = []
    for s in sides:
        roles += [r for r in result[s]["cpu"]["cpu_seconds"] if r not in roles]
    lines = ["## Where the cores went (CPU-seconds during each side's timed part)", "",
             "| process | " + " | ".join(NAMES[s] for s in sides) + " |",
             "|---|" + "---:|" * len(sides)]
    for name in roles:
        cells = []
        for s in sides:
            cpu = result[s]["cpu"]
            value = cpu["cpu_seconds"].get(name)
            count = cpu["processes"].get(name, 0)
            cells.append("-" if value is None else
                         f"{value:.2f}" + (f" ({count} procs)" if count > 1 else ""))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    for label, key in (("**all processes**", "cpu_total"),
                       ("core-seconds left unused (idle)", "idle_core_seconds"),
                       ("cores busy on average", "cores_busy")):
        lines.append(f"| {label} | " + " | ".join(
            str(result[s]["cpu"][key]) for s in sides) + " |")
    lines.append("| cores × wall | " + " | ".join(
        f"{result[s]['cpu']['cores']} × {result[s]['cpu']['wall_seconds']}" for s in sides)
        + " |")
    lines.append("| peak memory of the processes, MB (each one's largest RSS, summed) | "
                 + " | ".join(str(sum(result[s]["cpu"]["peak_rss_mb"].values()))
                              for s in sides) + " |")
    lines += ["", "The sampler polls every 0.25 s from a thread of the bench driver; its own "
              "CPU time (" + ", ".join(f"{result[s]['cpu']['sampler_cpu_seconds']} s"
                                       for s in sides) + ") is inside the driver's row.", ""]
    return lines


def phase_table(result: dict[str, Any]) -> list[str]:
    """Where the roots' time goes, per side: each phase's wall and thread-CPU seconds summed
    over every root of the side (a worker runs several at once, so calls are summed per
    process, not per root)."""
    sides = [s for s in present(result) if result[s].get("phases", {}).get("all")]
    if not sides:
        return []
    order: list[str] = []
    for s in sides:
        ph = result[s]["phases"]
        order += [p for p in ph["order"] if p not in order and p in ph["all"]]
    lines = ["## Where the roots' time goes (phase clocks, `bench/fleet_cpu.py`)", "",
             "Wall / CPU seconds of the calling thread, summed over every root of the side, "
             "first roots of each process included (they load the model and import LanceDB). "
             "Phases nest (the run thread's whole run holds its scan, selection, waits and "
             "commits; the guard's measuring holds the embedder's calls), the LLM threads' "
             "drafting overlaps everything, and the embedder's intra-op threads are not the "
             "calling thread: the CPU column does not add up to the process's CPU. Roots "
             "running at once in one worker overlap in wall time.", "",
             "| phase | " + " | ".join(NAMES[s] for s in sides) + " |",
             "|---|" + "---:|" * len(sides)]
    for phase in order:
        cells = []
        for s in sides:
            one = result[s]["phases"]["all"].get(phase)
            cells.append("-" if one is None else f"{one[0]:.2f} / {one[1]:.2f}")
        lines.append(f"| {phase} | " + " | ".join(cells) + " |")
    rows = (
        ("roots timed, in processes", lambda ph: f"{ph['roots']}, {ph['processes']}"),
        ("their wall, open to close, summed, s", lambda ph: f"{ph['wall']:.2f}"),
        ("first root of each process: count, wall s",
         lambda ph: f"{ph['first_roots']}, {ph['first_wall']:.2f}"),
        ("process CPU before its first root (start-up, imports; the sequential side's is "
         "the bench driver's whole past)",
         lambda ph: ", ".join(f"{x:.2f}" for x in ph["process_cpu_before_first_root"])),
    )
    for label, cell in rows:
        lines.append(f"| {label} | " + " | ".join(cell(result[s]["phases"]) for s in sides)
                     + " |")
    missing = sorted({m for s in sides for m in result[s]["phases"]["missing"]})
    if missing:
        lines += ["", "Not timed (renamed since the clocks were written): "
                  + ", ".join(missing)]
    return [*lines, ""]


def low_memory_flag(side: dict[str, Any]) -> str:
    value = side.get("embedding_low_memory")
    return "" if value is None else f" --low-memory {str(value).lower()}"


def markdown(result: dict[str, Any]) -> str:
    seq, r1, r2 = (result[m] for m in SIDES)
    sides = present(result)
    lines = [
        "# Fleet: many roots on Ray vs one after another",
        "",
        f"Generated by `python bench/fleet.py locomo10.json --roots {result['roots']} "
        f"--llm-latency {result['llm_latency']}{low_memory_flag(seq)}` on {result['cpus']} "
        f"CPU(s), bundled local embedder, code {seq['code']['commit']} "
        f"(sources {seq['code']['sources_sha256']}), "
        f"**{result['load_note']}**.",
        "",
        f"{result['roots']} roots, one LoCoMo conversation each (replicas of the 10), indexed "
        "and clustered beforehand; each side runs Reflection (`force`) on fresh copies of the "
        f"same templates ({seq['templates']}). LLM: fake OpenAI-compatible server in its own "
        f"process, {result['llm_latency'] * 1000:.0f} ms per call, replying with a short "
        "narrative built from the sources (`bench/cost.py`).",
        "",
        "| side | wall s | speed-up vs sequential | tasks' own time s | merges reported | "
        "narratives in Markdown | Episodes archived | roots with merges | LLM calls | "
        "root statuses | Ray start-up s (apart) | load average start → end | when |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|---|",
    ]
    for side in sides:
        r = result[side]
        md = r["markdown"]
        lines.append(
            f"| {NAMES[side]} | {r['seconds']} | {result['speedups'][side]:.2f}× | "
            f"{r['task_seconds']} | {r['merges']} | {md['narratives']} | "
            f"{md['archived']} | {md['roots_with_merges']}/{r['roots']} | {r['llm']['calls']} | "
            f"{r['statuses']} | {r.get('ray_init_seconds', '-')} | "
            f"{r['loadavg_start']} → {r['loadavg_end']} | {r['when']} |")
    lines += [
        "",
        f"- speed-up with 2 workers (sequential ÷ Ray-2): **{result['speedup_2']:.2f}×** "
        f"(target ≥ 1.8×: {'met' if result['speedup_2'] >= 1.8 else 'missed'})",
        f"- Ray overhead at 1 worker (Ray-1 ÷ sequential − 1): "
        f"**{result['overhead_1_pct']:+.1f} %** (target ≤ 5 %: "
        f"{'met' if result['overhead_1_pct'] <= 5 else 'missed'}), "
        f"{result['overhead_per_task_s']:+.3f} s per task" + (
            "" if result["dispatch_1_per_task_s"] is None else
            f"; {NAMES[result['dispatch_1_side']]}: wall time beyond its tasks' own time "
            f"{result['dispatch_1_per_task_s']:.3f} s per task"),
        f"- per root: {result['per_root_s']:.2f} s of Reflection (sequential wall ÷ roots); "
        f"Ray tasks' own time summed: {r1['task_seconds']} s (1 worker), "
        f"{r2['task_seconds']} s (2 workers), roots running at once in a worker counted "
        f"each (roots per worker: {r1.get('roots_per_worker', 1)} / "
        f"{r2.get('roots_per_worker', 1)})",
        f"- cluster outcomes (all sides): {seq['clusters']}",
        "",
    ]
    if result["problems"]:
        lines += ["**Not a valid measurement:** " + "; ".join(result["problems"]) + ".", ""]
    lines += cpu_table(result)
    lines += phase_table(result)
    lines += ["## Merges per root (narratives found in Markdown; reported by the run in "
              "brackets when different)", "",
              "| root | " + " | ".join(NAMES[s] for s in sides) + " |",
              "|---|" + "---:|" * len(sides)]
    for name in seq["markdown"]["per_root"]:
        cells = []
        for side in sides:
            one = result[side]["markdown"]["per_root"][name]
            cells.append(str(one["narratives"]) + (
                f" ({one['reported']})" if one["reported"] != one["narratives"] else ""))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_path", type=Path)
    parser.add_argument("--roots", type=int, default=40)
    parser.add_argument("--llm-latency", type=float, default=0.3)
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--work", type=Path,
                        help="keep templates and per-side figures here (reused across runs)")
    every = (*SIDES, *EXTRA_SIDES)
    parser.add_argument("--sides", default=",".join(SIDES),
                        help=f"comma-separated subset of {','.join(every)} to run now")
    parser.add_argument("--templates-only", action="store_true",
                        help="build the template roots into --work and stop")
    parser.add_argument("--load-note", default="measured under load (shared 2-core machine)")
    parser.add_argument("--low-memory", choices=("true", "false"),
                        help="write [embedding] low_memory into every root of every side "
                             "(default: the roots' default, true)")
    args = parser.parse_args(argv)
    if not args.data_path.is_file():
        parser.error(f"no such file: {args.data_path}")
    sides = [x.strip() for x in args.sides.split(",") if x.strip()]
    if not sides or set(sides) - set(every):
        parser.error(f"--sides must be a subset of {','.join(every)}")
    if args.roots < 1 or args.llm_latency < 0:
        parser.error("--roots must be at least 1 and --llm-latency not negative")
    if (args.templates_only or set(sides) != set(SIDES)) and args.work is None:
        parser.error("--templates-only and a subset of --sides need --work")

    with tempfile.TemporaryDirectory(prefix="everos-fleet-") as tmp:
        work = args.work or Path(tmp)
        t = time.perf_counter()
        templates = build_templates(args.data_path, work, args.roots)
        print(f"templates ready in {time.perf_counter() - t:.0f} s", flush=True)
        if args.templates_only:
            return 0
        figures: dict[str, Any] = {}
        for side in sides:
            low_memory = None if args.low_memory is None else args.low_memory == "true"
            figures[side] = run_side(side, templates, work, args.llm_latency, low_memory)
            shutil.rmtree(work / side, ignore_errors=True)
            brief = {k: v for k, v in figures[side].items() if k not in ("markdown", "phases")}
            print(f"  {side}: {json.dumps(brief)}", flush=True)
            print(f"    Markdown: {figures[side]['markdown']['narratives']} narratives, "
                  f"{figures[side]['markdown']['archived']} Episodes archived, mismatched roots: "
                  f"{figures[side]['markdown']['mismatched_roots'] or 'none'}", flush=True)
            if args.work is not None:
                (work / f"side-{side}.json").write_text(json.dumps(figures[side], indent=2))
        for side in every:
            saved = work / f"side-{side}.json"
            if side not in figures and saved.is_file():
                figures[side] = json.loads(saved.read_text())
    missing = [s for s in SIDES if s not in figures]
    if missing:
        print(f"sides still to run: {', '.join(missing)} (nothing written to {args.out})")
        return 0
    result: dict[str, Any] = {"roots": args.roots, "llm_latency": args.llm_latency,
                              "cpus": os.cpu_count(), "load_note": args.load_note, **figures}
    if {figures[s]["roots"] for s in figures} != {args.roots} or {
            figures[s]["llm_latency"] for s in figures} != {args.llm_latency}:
        print("the saved sides were run with other --roots or --llm-latency; rerun them")
        return 1
    summarise(result)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "fleet.json").write_text(json.dumps(result, indent=2) + "\n", "utf-8")
    (args.out / "fleet.md").write_text(markdown(result), "utf-8")
    print(markdown(result))
    return 1 if result["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
