"""The fleet on Ray: connect, send one task per root that has work, gather the results.

Ray is an optional extra (``pip install 'everos-reflect[ray]'``) and is imported only here,
lazily, so nothing else in the package needs it. A task is :func:`~.work.run_root` in a Ray
worker process; Ray re-runs it when that process dies (``max_retries``), and the root's own
journal makes the re-run finish or cleanly abandon the merge that was interrupted. Exceptions
raised *by* the task are never retried: ``run_root`` turns every failure of a root into a
``failed`` result instead, so a bad root costs one attempt.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from everos_reflect.engine.registry import get_strategy
from everos_reflect.errors import EverosError
from everos_reflect.fleet.config import FleetConfig
from everos_reflect.fleet.work import (
    FAILED,
    NOT_DONE,
    Opener,
    RootResult,
    assess,
    largest_first,
    open_root,
    run_root,
)

log = logging.getLogger(__name__)

RAY_HINT = "fleet commands need Ray: pip install 'everos-reflect[ray]'"


class RayMissing(EverosError):
    """Ray is not installed; the message says how to get it."""


class RayUnavailable(EverosError):
    """Ray is installed but the cluster could not be reached or started."""


def require_ray() -> ModuleType:
    """The ``ray`` module, or :class:`RayMissing` with the one line that installs it."""
    try:
        import ray
    except ImportError:
        raise RayMissing(RAY_HINT) from None
    return ray


@contextmanager
def ray_session(config: FleetConfig) -> Iterator[ModuleType]:
    """Connect to the fleet's Ray (or start a local one); shut down only what we started.

    An already-initialised Ray in this process (a test, a notebook) is used as it is.
    """
    ray = require_ray()
    if ray.is_initialized():
        yield ray
        return
    kwargs: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.WARNING}
    if config.ray_address:
        kwargs["address"] = config.ray_address
    else:
        kwargs.update(include_dashboard=False, num_cpus=config.num_cpus)
    try:
        ray.init(**kwargs)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = config.ray_address or "a local Ray"
        raise RayUnavailable(f"cannot start or reach {where}: {exc}") from None
    try:
        yield ray
    finally:
        ray.shutdown()


@dataclass
class FleetReport:
    """Every root's result, in the fleet's root order, and the wall time of the whole run."""

    strategy: str
    results: list[RootResult]
    seconds: float
    submitted: int
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """False when any root failed, was busy or ended partial (its work was not all done)."""
        return not any(r.status in NOT_DONE for r in self.results)

    def as_dict(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "ok": self.ok, "seconds": round(self.seconds, 3),
                "roots": len(self.results), "tasks": self.submitted,
                "merges": sum(r.merges for r in self.results), "counts": self.counts,
                "results": [r.as_dict() for r in self.results]}


class RayFleet:
    """Submits root runs to a connected Ray and hands back finished results as they come."""

    def __init__(self, ray: ModuleType, config: FleetConfig, *, opener: Opener = open_root) -> None:
        self.ray = ray
        self.config = config
        self.opener = opener
        self._remote = ray.remote(run_root).options(
            num_cpus=config.task_cpus, max_retries=config.max_retries, retry_exceptions=False)
        self._pending: dict[Any, tuple[Any, str]] = {}  # object ref -> (key, root)

    def submit(self, key: Any, root: str, name: str, *, force: bool = False,
               trigger: str = "fleet") -> None:
        ref = self._remote.remote(root, name, force=force, defaults=self.config.strategies,
                                  opener=self.opener, trigger=trigger)
        self._pending[ref] = (key, root)

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def slots(self) -> int:
        """Root tasks the cluster can run at once (its CPUs ÷ ``task_cpus``; at least 1)."""
        cpus = float(self.ray.cluster_resources().get("CPU", 0))
        return max(1, int(cpus / self.config.task_cpus + 1e-9))

    def finished(self, timeout: float | None = None) -> list[tuple[Any, RootResult]]:
        """Results of the tasks that finished within ``timeout`` seconds (``None``: wait for at
        least one). A task Ray gave up on (its worker died more often than ``max_retries``)
        comes back as a ``failed`` result naming Ray's error."""
        if not self._pending:
            return []
        done, _ = self.ray.wait(list(self._pending), num_returns=1, timeout=timeout)
        rest = [r for r in self._pending if r not in done]
        if done and rest:  # collect everything else that is ready too, without waiting
            more, _ = self.ray.wait(rest, num_returns=len(rest), timeout=0)
            done = list(done) + list(more)
        out = []
        for ref in done:
            key, root = self._pending.pop(ref)
            try:
                result = self.ray.get(ref)
            except self.ray.exceptions.RayError as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                result = RootResult(root, FAILED, error=f"Ray: {type(exc).__name__}: {first}")
            out.append((key, result))
        return out


def run_fleet(
    config: FleetConfig,
    roots: Sequence[Path | str],
    name: str,
    *,
    force: bool = False,
    opener: Opener = open_root,
    on_result: Callable[[RootResult, int, int], None] | None = None,
) -> FleetReport:
    """Run strategy ``name`` on every root: one Ray task per root that has work. After the
    first one per slot, the largest roots go first (:func:`~.work.largest_first`, from the
    driver's estimates), so the run does not end with one long root and idle workers.

    ``on_result(result, done, total)`` is called as each root is settled (progress). Raises
    :class:`UnknownStrategy` before anything runs, :class:`RayMissing`/:class:`RayUnavailable`
    when there is no Ray to run on.
    """
    get_strategy(name)
    started = time.perf_counter()
    paths = [str(r) for r in roots]
    results: dict[str, RootResult] = {}
    total = len(paths)

    def settle(result: RootResult) -> None:
        results[result.root] = result
        if on_result is not None:
            on_result(result, len(results), total)

    with ray_session(config) as ray:
        fleet = RayFleet(ray, config, opener=opener)
        # The first roots with work go out as soon as they are judged, one per slot, so no
        # worker waits for the driver to judge every root; the rest go out largest first.
        slots = fleet.slots()
        waiting: list[tuple[str, int | None]] = []
        for root in paths:
            verdict = assess(root, name, force=force, defaults=config.strategies,
                             probe=config.probe_work, opener=opener)
            if verdict.result is not None:
                settle(verdict.result)
            elif fleet.in_flight < slots:
                fleet.submit(root, root, name, force=force)
            else:
                waiting.append((root, verdict.work))
        for root in largest_first(waiting):
            fleet.submit(root, root, name, force=force)
        submitted = fleet.in_flight
        while fleet.in_flight:
            for _, result in fleet.finished():
                settle(result)
    return FleetReport(name, [results[p] for p in paths], time.perf_counter() - started,
                       submitted, status_counts(results.values()))


def status_counts(results: Iterable[RootResult]) -> dict[str, int]:
    """How many roots ended in each status."""
    counts: dict[str, int] = {}
    for result in results:
        counts[result.status] = counts.get(result.status, 0) + 1
    return counts
