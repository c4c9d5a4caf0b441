"""CPU time of every process of a bench side, by role: where a fleet run's cores go.

A side's wall time on N cores is N × wall core-seconds. They are spent by the processes this
one started (the bench driver, the fake LLM server, Ray's daemons, Ray's worker processes or
a plain process pool) or left idle. :class:`CpuSampler` polls ``psutil`` for the user + system
CPU time of this process and all its descendants while the side runs, keeps the last value
seen for each process (a process that exits between two polls loses at most one interval) and
subtracts what each had used before the run began (Ray's daemons and prestarted workers exist
before a run; their start-up is not the run's).

:func:`phase_opener` answers the other question, where one root's time goes inside whichever
process runs it: it opens the root with the production opener under per-phase clocks (opening,
recovery, scan, selection, the run thread's waits for drafts, commits, the LLM calls, the
guard's model load, LanceDB open and embedding calls, closing) and writes each root's figures
to a file when the root is closed; :func:`phase_summary` sums one side's files.

Needs ``psutil`` (``pip install 'everos-reflect[bench]'``).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

#: Command-line fragments naming what a process is, checked in order (Ray 2.60's layout).
ROLES = (
    ("gcs_server", "ray: gcs_server"),
    ("raylet/raylet", "ray: raylet"),
    ("ray::DashboardAgent", "ray: dashboard agent"),
    ("ray::RuntimeEnvAgent", "ray: runtime-env agent"),
    ("log_monitor.py", "ray: log monitor"),
    ("autoscaler/_private/monitor.py", "ray: autoscaler monitor"),
    ("dashboard/dashboard.py", "ray: dashboard head"),
    ("default_worker.py", "ray: worker processes"),
    ("ray::", "ray: worker processes"),
    ("multiprocessing.resource_tracker", "multiprocessing resource tracker"),
)


def role(cmdline: str, *, pid: int, me: int, fake_llm: int | None) -> str:
    """What a process is, from its command line (the driver and the fake LLM by pid)."""
    if pid == me:
        return "bench driver (sequential: the runs themselves)"
    if pid == fake_llm:
        return "fake LLM server"
    for fragment, name in ROLES:
        if fragment in cmdline:
            return name
    if "multiprocessing" in cmdline:
        return "plain worker processes"
    return "other: " + cmdline[:60]


class CpuSampler:
    """Polls the CPU time of this process and its descendants until :meth:`stop`."""

    def __init__(self, *, fake_llm_pid: int | None = None, every: float = 0.25) -> None:
        import psutil

        self._psutil = psutil
        self._me = psutil.Process()
        self._fake = fake_llm_pid
        self._every = every
        self._roles: dict[int, str] = {}
        self._last: dict[int, float] = {}
        self._rss: dict[int, int] = {}  # largest resident set seen per process
        self._base: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="cpu-sampler", daemon=True)
        self._started = 0.0
        self._own_cpu = 0.0  # the polling thread's own CPU time (inside the driver's figure)

    def _snapshot(self) -> dict[int, float]:
        out = {}
        for proc in [self._me, *self._me.children(recursive=True)]:
            try:
                times = proc.cpu_times()
                rss = proc.memory_info().rss
                if proc.pid not in self._roles:
                    self._roles[proc.pid] = role(" ".join(proc.cmdline()), pid=proc.pid,
                                                 me=self._me.pid, fake_llm=self._fake)
            except self._psutil.Error:  # gone meanwhile
                continue
            out[proc.pid] = times.user + times.system
            self._rss[proc.pid] = max(rss, self._rss.get(proc.pid, 0))
        return out

    def _poll(self) -> None:
        while not self._stop.wait(self._every):
            self._last.update(self._snapshot())
        self._own_cpu = time.thread_time()

    def start(self) -> CpuSampler:
        """The run begins now: what every process has used so far is not the run's."""
        self._base = self._snapshot()
        self._last = dict(self._base)
        self._started = time.perf_counter()
        self._thread.start()
        return self

    def stop(self) -> dict[str, Any]:
        """The run ended: CPU-seconds and peak memory per role, the core-seconds this run left
        unused (idle on a quiet machine), the sampler's own cost."""
        self._stop.set()
        self._thread.join()
        self._last.update(self._snapshot())
        wall = time.perf_counter() - self._started
        by_role: dict[str, float] = {}
        processes: dict[str, int] = {}
        rss: dict[str, int] = {}
        for pid, cpu in self._last.items():
            name = self._roles.get(pid, "?")
            by_role[name] = by_role.get(name, 0.0) + cpu - self._base.get(pid, 0.0)
            processes[name] = processes.get(name, 0) + 1
            rss[name] = rss.get(name, 0) + self._rss.get(pid, 0)
        cores = len(os.sched_getaffinity(0))
        used = sum(by_role.values())
        return {"wall_seconds": round(wall, 2), "cores": cores,
                "cpu_seconds": {k: round(v, 2) for k, v in
                                sorted(by_role.items(), key=lambda kv: -kv[1])},
                "processes": processes, "cpu_total": round(used, 2),
                # each process's largest RSS, summed per role: an upper bound at any moment
                "peak_rss_mb": {k: round(v / 2**20) for k, v in rss.items()},
                "idle_core_seconds": round(max(0.0, cores * wall - used), 2),
                "cores_busy": round(used / wall, 2) if wall else 0.0,
                "sampler_cpu_seconds": round(self._own_cpu, 2)}


# --- where one root's time goes: per-phase clocks, in whichever process runs the root ---------

#: ``(module, attribute path, phase)``: the calls timed, in the order a run meets them. Wall
#: time and the calling thread's CPU time are summed per phase and root; phases nest (``run``
#: holds the rest of the run thread's phases), so columns do not add up. A name another change
#: renamed is skipped and listed in ``missing``, never an error.
PHASES = (
    ("everos_reflect.fleet.work", "open_root", "open the root (settings, runtime)"),
    ("everos_reflect.engine.engine", "Engine.recover", "engine: journal recovery (task start)"),
    ("everos_reflect.engine.engine", "Engine._attempts", "run thread: the whole run"),
    ("everos_reflect.index.sync", "Indexer.scan", "run thread: index scan"),
    ("everos_reflect.clustering.service", "ClusterService.eligible_for_reflection",
     "run thread: eligible clusters"),
    ("everos_reflect.strategies.reflect", "select", "run thread: select sources"),
    ("everos_reflect.strategies.reflect", "wait", "run thread: waiting for drafts"),
    ("everos_reflect.strategies.reflect", "ReflectionRun._commit",
     "run thread: commits (Markdown, journal, index)"),
    ("everos_reflect.strategies.reflect", "draft", "LLM threads: drafting (calls in flight)"),
    ("everos_reflect.strategies.reflect_guard", "Guard._warm_up", "guard: model load"),
    ("everos_reflect.strategies.reflect_guard", "Guard._open_vectors",
     "guard: open LanceDB (first: import)"),
    ("everos_reflect.strategies.reflect_guard", "Guard._measure_many", "guard: measuring drafts"),
    ("everos_reflect.strategies.reflect_guard", "Guard.reuse_stored_vectors_many",
     "guard: stored fact vectors (LanceDB)"),
    ("everos_reflect.embedding.local", "LocalEmbedder.embed", "embedder: model calls"),
    ("everos_reflect.runtime", "Runtime.close", "close the root"),
)


class PhaseClock:
    """Wraps :data:`PHASES` in this process (once) and sums each one's wall and thread-CPU
    seconds over every call in the process since it was installed. A fleet worker runs
    several roots at once on its threads, so a call cannot be told apart by root: the
    figures are the process's, and each root closed writes a snapshot of them (the last
    snapshot of each process holds all of its roots)."""

    _installed: PhaseClock | None = None

    def __init__(self) -> None:
        import importlib

        self._lock = threading.Lock()
        self.totals: dict[str, list[float]] = {}
        self.baselines: dict[str, dict[str, list[float]]] = {}  # per output folder
        self.closed = 0  # roots closed in this process (orders the snapshots)
        self.missing: list[str] = []
        self.process_cpu_at_install = time.process_time()  # imports and start-up so far
        for module_name, path, phase in PHASES:
            try:
                owner: Any = importlib.import_module(module_name)
                *parents, attr = path.split(".")
                for part in parents:
                    owner = getattr(owner, part)
                original = getattr(owner, attr)
            except (ImportError, AttributeError):
                self.missing.append(f"{module_name}.{path}")
                continue
            setattr(owner, attr, self._timed(original, phase))

    @classmethod
    def installed(cls) -> PhaseClock:
        if cls._installed is None:
            cls._installed = cls()
        return cls._installed

    def _timed(self, original: Any, phase: str) -> Any:
        import functools

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            wall, cpu = time.perf_counter(), time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                spent_wall, spent_cpu = time.perf_counter() - wall, time.thread_time() - cpu
                with self._lock:
                    slot = self.totals.setdefault(phase, [0.0, 0.0, 0])
                    slot[0] += spent_wall
                    slot[1] += spent_cpu
                    slot[2] += 1
        return timed

    def begin(self, out_dir: str) -> None:
        """A root of the side writing to ``out_dir`` opens: that side's figures start from
        the totals at its first root in this process (a process may serve several sides)."""
        with self._lock:
            if out_dir not in self.baselines:
                self.baselines[out_dir] = {k: list(v) for k, v in self.totals.items()}

    def snapshot(self, out_dir: str) -> tuple[int, dict[str, list[float]]]:
        """This process's figures for the side writing to ``out_dir``, and their order."""
        with self._lock:
            self.closed += 1
            base = self.baselines.get(out_dir, {})
            out = {}
            for phase, (w, c, n) in self.totals.items():
                bw, bc, bn = base.get(phase, (0.0, 0.0, 0))
                if n - bn:
                    out[phase] = [round(w - bw, 4), round(c - bc, 4), int(n - bn)]
            return self.closed, out


def phase_opener(out_dir: str, root: str, inner: Any = None) -> Any:
    """An opener (``fleet.work.Opener``, bound to ``out_dir`` with ``functools.partial``) that
    times the phases of the process running the root and, when the root is closed, writes to
    ``out_dir/<root name>.json`` this process's pid, its phase figures so far (every root it
    ran for this side), its CPU time when the clock was installed (interpreter start, Ray's
    worker start-up, the imports so far) and the root's wall seconds from open to close.
    ``inner`` opens the root (default: the production ``fleet.work.open_root``, timed as a
    phase; tests pass their own)."""
    import json
    from pathlib import Path

    first = PhaseClock._installed is None
    clock = PhaseClock.installed()
    if inner is None:
        from everos_reflect.fleet.work import open_root as inner  # after installing: timed

    clock.begin(out_dir)
    wall = time.perf_counter()
    runtime = inner(root)
    close = runtime.close

    def close_and_record() -> None:
        close()
        seq, phases = clock.snapshot(out_dir)
        doc = {"root": Path(root).name, "pid": os.getpid(), "first_in_process": first,
               "process_cpu_before_first_root": round(clock.process_cpu_at_install, 3),
               "wall": round(time.perf_counter() - wall, 3), "seq": seq,
               "process_phases": phases, "missing": clock.missing}
        Path(out_dir, f"{Path(root).name}.json").write_text(json.dumps(doc), "utf-8")

    runtime.close = close_and_record  # type: ignore[method-assign]
    return runtime


def phase_summary(out_dir: Any) -> dict[str, Any]:
    """Sum the phase figures of one side: per phase wall / thread-CPU seconds / calls over
    every process that ran its roots (each process's last snapshot), the roots' wall seconds
    (open to close), the first root of each process apart (it loads the model and imports
    LanceDB), and the processes' CPU before their first root."""
    import json
    from pathlib import Path

    docs = [json.loads(p.read_text()) for p in sorted(Path(out_dir).glob("*.json"))]
    last: dict[int, dict[str, Any]] = {}
    for doc in docs:
        if doc["pid"] not in last or doc["seq"] > last[doc["pid"]]["seq"]:
            last[doc["pid"]] = doc
    total: dict[str, list[float]] = {}
    for doc in last.values():
        for phase, (w, c, n) in doc["process_phases"].items():
            slot = total.setdefault(phase, [0.0, 0.0, 0])
            slot[0] += w
            slot[1] += c
            slot[2] += n
    firsts = [d for d in docs if d["first_in_process"]]
    return {
        "roots": len(docs), "processes": len(last),
        "order": [p for _, _, p in PHASES],
        "all": {k: [round(w, 2), round(c, 2), n] for k, (w, c, n) in total.items()},
        "wall": round(sum(d["wall"] for d in docs), 2),
        "first_roots": len(firsts), "first_wall": round(sum(d["wall"] for d in firsts), 2),
        "process_cpu_before_first_root": [d["process_cpu_before_first_root"] for d in firsts],
        "missing": sorted({m for d in docs for m in d["missing"]}),
    }
