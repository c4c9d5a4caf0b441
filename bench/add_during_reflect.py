"""How long an ``add`` waits while Reflection runs: idle against during, measured in one run.

    python bench/add_during_reflect.py /path/to/locomo10.json [--adds 40] [--samples N]
        [--tree PATH --tree PATH [--rounds R]]

Builds a LoCoMo root (observation Episodes and their facts) in a temporary folder, indexes it
(``reindex``: entries and clusters), starts ``everos-reflect serve`` on it (the watcher, the
API), then times ``POST /api/v1/memory/episodes`` for a user of its own (the wall time the
client waits for the answer, which indexes the Episode before it answers):

- idle: ``--adds`` adds, one after the other, nothing else running;
- during: a forced ``reflect_episodes`` run over the whole backlog is triggered, and adds go
  on, one after the other, until the run ends.

Prints p50 / p95 / max of both, how many adds answered ``indexed: false``, and the run's
length. Asserts nothing. The embedder is the shipped one (the bundled MiniLM). ``--sample``
also prints where the threads answering the adds spent their time (stack samples every 10
ms in ``serve``: ``bench/add_sampler/sitecustomize.py``), and the threads in ``sync_paths``
(Reflection's commit syncs and the watcher's, which hold the indexer lock the adds wait for).

``--tree`` (twice or more): compare checkouts under the same load. The root is built and
indexed once; each run serves a fresh copy of it with one tree's code (``PYTHONPATH``), the
trees taking turns in each round (A B, then B A, ...), so machine load that drifts over the
minutes falls on both alike. Figures are printed per run and, at the end, per tree over all
its runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import locomo_episodes as lm
import locomo_root

#: the stack sampler put into serve by ``--sample``
SAMPLER = Path(__file__).resolve().parent / "add_sampler"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _call(port: int, method: str, path: str, body: dict[str, Any] | None = None,
          timeout: float = 900.0) -> dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1{path}", data=data,
                                 method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read() or b"{}")


def _wait_up(port: int, proc: subprocess.Popen[bytes], seconds: float = 300.0) -> None:
    give_up = time.monotonic() + seconds
    while time.monotonic() < give_up:
        if proc.poll() is not None:
            raise SystemExit(f"serve exited with {proc.returncode}")
        try:
            _call(port, "GET", "/health", timeout=2.0)
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("serve did not answer")


class Adder:
    """Adds Episodes for one user of its own, timing each answer."""

    def __init__(self, port: int) -> None:
        self.port, self.n = port, 0
        self.not_indexed = 0

    def add(self) -> float:
        self.n += 1
        body = {"user_id": "bench_adder", "subject": f"Note {self.n}",
                "content": f"The adder wrote note number {self.n} about the garden and tea."}
        started = time.perf_counter()
        answer = _call(self.port, "POST", "/memory/episodes", body)
        took = time.perf_counter() - started
        self.not_indexed += answer.get("indexed") is False
        return took


def _figures(label: str, times: list[float]) -> str:
    if not times:
        return f"{label}: no adds"
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return (f"{label}: n={len(times)} p50 {statistics.median(ordered) * 1000:7.0f} ms, "
            f"p95 {p95 * 1000:7.0f} ms, max {ordered[-1] * 1000:7.0f} ms")


def _serve_and_time(root: Path, log_path: Path, adds: int, code: Path | None,
                   label: str, samples: Path | None = None) -> tuple[list[float], list[float]]:
    """Serve ``root`` (with the code of the checkout ``code``, else this one's) and time the
    idle adds, then the adds during a forced Reflection run; (idle, during) in seconds.
    ``samples``: where the stack sampler in ``serve`` writes what the adds waited in."""
    env = {**os.environ, "EVEROS_ROOT": str(root)}
    if code is not None:
        env["PYTHONPATH"] = str(code)
    if samples is not None:  # the sampler in serve (bench/add_sampler/sitecustomize.py)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), str(SAMPLER)]))
        env["EVEROS_BENCH_SAMPLES"] = str(samples)
    exe = [sys.executable, "-m", "everos_reflect.cli.main"]
    port = _free_port()
    env["EVEROS_SERVER__PORT"] = str(port)
    log = log_path.open("wb")
    proc = subprocess.Popen([*exe, "serve", "--root", str(root)], env=env,
                            stdout=log, stderr=subprocess.STDOUT, cwd=code or None)
    try:
        _wait_up(port, proc)
        adder = Adder(port)
        adder.add()  # warm-up: the first add loads what the process loads once
        idle = [adder.add() for _ in range(adds)]
        idle_not = adder.not_indexed

        outcome: dict[str, Any] = {}

        def run() -> None:
            began = time.perf_counter()
            outcome.update(_call(port, "POST", "/ome/trigger",
                                 {"name": "reflect_episodes", "force": True, "timeout": 900}))
            outcome["seconds"] = time.perf_counter() - began

        runner = threading.Thread(target=run)
        runner.start()
        time.sleep(0.5)  # the run has started
        during: list[float] = []
        while runner.is_alive():
            during.append(adder.add())
        runner.join()
        print(f"[{label}]")
        print("  " + _figures("idle  ", idle) + f", not indexed {idle_not}")
        print("  " + _figures("during", during)
              + f", not indexed {adder.not_indexed - idle_not}")
        print(f"  reflection: {outcome.get('status')} in {outcome.get('seconds', 0):.1f} s, "
              f"counts {outcome.get('counts')}", flush=True)
        return idle, during
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        if samples is not None and samples.exists():
            every = json.loads(samples.read_text())
            tag = "[sync_paths] "
            for what, counts in (
                    ("the adds' threads", [c for c in every if not c[0].startswith(tag)]),
                    ("the threads in sync_paths (Reflection's commit syncs, the watcher)",
                     [(w[len(tag):], n) for w, n in every if w.startswith(tag)])):
                total = sum(n for _, n in counts) or 1
                print(f"  where {what} were ({total} samples of 10 ms, idle and during):")
                for where, n in counts[:12]:
                    print(f"    {n / total:6.1%}  {where}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("locomo", help="locomo10.json")
    parser.add_argument("--adds", type=int, default=40, help="idle adds")
    parser.add_argument("--samples", type=int, default=0,
                        help="LoCoMo conversations to use (0: all ten)")
    parser.add_argument("--tree", action="append", default=[], type=Path,
                        help="a checkout to serve with (repeat to compare, taking turns)")
    parser.add_argument("--rounds", type=int, default=1, help="runs per tree (with --tree)")
    parser.add_argument("--sample", action="store_true",
                        help="sample where the adds' threads wait in serve, and print it")
    parser.add_argument("--keep", action="store_true", help="keep the temporary root")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="everos-bench-add-"))
    built_root = tmp / "built"
    built_root.mkdir()
    trees: list[Path | None] = [t.resolve() for t in args.tree] or [None]
    exe = [sys.executable, "-m", "everos_reflect.cli.main"]
    try:
        rows = lm.load(args.locomo)
        if args.samples:
            rows = rows[: args.samples]
        built = locomo_root.write_root(built_root, lm.episodes(rows),
                                       locomo_root.observations(rows), bulk=True)
        (built_root / "ome.toml").write_text("[strategies.reflect_episodes]\nenabled = false\n"
                                             "max_clusters_per_run = 1000\n")
        print(f"root: {built.episodes} episodes, {built.facts} facts, {len(built.users)} users")
        env = {**os.environ, "EVEROS_ROOT": str(built_root)}
        if trees[0] is not None:
            env["PYTHONPATH"] = str(trees[0])
        started = time.perf_counter()
        subprocess.run([*exe, "reindex", "--root", str(built_root)], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        print(f"reindex: {time.perf_counter() - started:.1f} s", flush=True)

        runs = 0
        totals: dict[str, tuple[list[float], list[float]]] = {}
        for n in range(args.rounds if args.tree else 1):
            order = trees if n % 2 == 0 else trees[::-1]
            for tree in order:
                runs += 1
                name = str(tree) if tree is not None else "this checkout"
                root = tmp / f"run{runs}"
                shutil.copytree(built_root, root, symlinks=True)
                idle, during = _serve_and_time(
                    root, tmp / f"serve-{runs}.log", args.adds, tree, f"{name}, round {n + 1}",
                    tmp / f"samples-{runs}.json" if args.sample else None)
                shutil.rmtree(root, ignore_errors=True)
                sums = totals.setdefault(name, ([], []))
                sums[0].extend(idle)
                sums[1].extend(during)
        if len(totals) > 1 or args.rounds > 1:
            print("all runs, per tree:")
            for name, (idle, during) in totals.items():
                print(f"[{name}]")
                print("  " + _figures("idle  ", idle))
                print("  " + _figures("during", during))
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
