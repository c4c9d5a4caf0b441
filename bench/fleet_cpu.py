"""CPU time of every process of a bench side, by role: where a fleet run's cores go.

A side's wall time on N cores is N × wall core-seconds. They are spent by the processes this
one started (the bench driver, the fake LLM server, Ray's daemons, Ray's worker processes or
a plain process pool) or left idle. :class:`CpuSampler` polls ``psutil`` for the user + system
CPU time of this process and all its descendants while the side runs, keeps the last value
seen for each process (a process that exits between two polls loses at most one interval) and
subtracts what each had used before the run began (Ray's daemons and prestarted workers exist
before a run; their start-up is not the run's).

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
