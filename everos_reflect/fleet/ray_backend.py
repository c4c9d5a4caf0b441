"""The fleet on Ray: connect, send one task per root that has work, gather the results.

Ray is an optional extra (``pip install 'everos-reflect[ray]'``) and is imported only here,
lazily, so nothing else in the package needs it. A root's task is :func:`~.work.run_root`,
called on a worker: a Ray actor (one worker process per ``task_cpus`` of the cluster) that
runs up to ``roots_per_worker`` roots at once on threads, so that one root's waits for its
LLM are filled by another root's local work. Ray restarts a worker whose process died and
re-runs the tasks it held (``max_retries`` each), and each root's own journal makes the
re-run finish or cleanly abandon the merge that was interrupted. Exceptions raised *by* a
task are never retried: ``run_root`` turns every failure of a root into a ``failed`` result
instead, so a bad root costs one attempt.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from everos_reflect.engine.registry import get_strategy
from everos_reflect.errors import EverosError, describe
from everos_reflect.fleet.config import FleetConfig, distinct_roots
from everos_reflect.fleet.work import (
    DISABLED,
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


def check_ray() -> None:
    """:class:`RayMissing`, with the one line that installs it, unless Ray is installed. Does
    not import Ray: importing it reads Ray's configuration from the environment, which
    :func:`ray_session` completes first (:func:`ray_auth_mode`)."""
    if importlib.util.find_spec("ray") is None:
        raise RayMissing(RAY_HINT)


def require_ray() -> ModuleType:
    """The ``ray`` module, or :class:`RayMissing` with the one line that installs it."""
    try:
        import ray
    except ImportError:
        raise RayMissing(RAY_HINT) from None
    return ray


#: Ray's switch for token authentication, read from the environment when Ray is imported
#: (docs.ray.io: ray-security/token-auth).
RAY_AUTH_MODE = "RAY_AUTH_MODE"


def ray_auth_mode(address: str, env: Mapping[str, str], home: Path) -> str | None:
    """The ``RAY_AUTH_MODE`` to say for a Ray at ``address`` (``None``: leave it unsaid): the
    mode Ray 2.59+ would choose itself, which it announces in a WARNING on every start when
    the variable is unset ("Token authentication is enabled for this Ray cluster"): every
    ``fleet run`` and ``fleet serve`` printed it. ``token`` for a local Ray it starts (``""``),
    and for ``auto`` when a token is at hand (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or
    ``~/.ray/auth_token``, docs.ray.io: ray-security/token-auth), as Ray then turns it on.
    Never over a mode the user set, nor for ``ray://`` (Ray's client decides nothing)."""
    if RAY_AUTH_MODE in env:
        return None
    if address == "":
        return "token"
    at_hand = (env.get("RAY_AUTH_TOKEN") or env.get("RAY_AUTH_TOKEN_PATH")
               or (home / ".ray" / "auth_token").is_file())
    return "token" if address == "auto" and at_hand else None


def _quiet_auth(address: str) -> None:
    """Say :func:`ray_auth_mode` before Ray is imported: it reads the variable then (set
    later, this process would not send the token its cluster requires)."""
    if "ray" in sys.modules:
        return
    mode = ray_auth_mode(address, os.environ, Path.home())
    if mode is not None:
        os.environ[RAY_AUTH_MODE] = mode


@contextmanager
def ray_session(config: FleetConfig) -> Iterator[ModuleType]:
    """Connect to the fleet's Ray (or start a local one); shut down only what we started.

    An already-initialised Ray in this process (a test, a notebook) is used as it is.
    """
    _quiet_auth(config.ray_address)
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
    def all_disabled(self) -> bool:
        """The strategy is disabled in every root: nothing ran. Each root's ``disabled`` is a
        choice, but a cron job running a fleet where none is enabled does nothing at all, and
        must not read that as done."""
        return bool(self.results) and all(r.status == DISABLED for r in self.results)

    @property
    def ok(self) -> bool:
        """False when any root failed, was busy or ended partial (its work was not all done),
        or when every root has the strategy disabled (nothing ran)."""
        return not self.all_disabled and not any(r.status in NOT_DONE for r in self.results)

    @property
    def error(self) -> str | None:
        """Why the whole run did nothing, when it did nothing (a root's own problem is in its
        result)."""
        if not self.all_disabled:
            return None
        return (f"{self.strategy} is disabled in every root of the fleet: nothing ran (set "
                f"enabled = true under [strategies.{self.strategy}] in the fleet file or the "
                "roots' ome.toml, or use --force)")

    def as_dict(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "ok": self.ok, "error": self.error,
                "seconds": round(self.seconds, 3),
                "roots": len(self.results), "tasks": self.submitted,
                "merges": sum(r.merges for r in self.results), "counts": self.counts,
                "results": [r.as_dict() for r in self.results]}


#: A root waiting for or running on a worker: (key, root, name, force, trigger, alone,
#: last_good), see :meth:`RayFleet.submit`.
_Task = tuple[Any, str, str, bool, str, bool, Any]


class RootWorker:
    """A fleet worker: one Ray actor (one worker process holding ``task_cpus``) that runs the
    roots handed to it, up to ``roots_per_worker`` at once on Ray's threads. Stateless: a
    restarted worker (its process died) simply takes the re-run tasks."""

    def run(self, root: str, name: str, force: bool, defaults: Any, opener: Opener,
            trigger: str, last_good: Any = None) -> RootResult:
        return run_root(root, name, force=force, defaults=defaults, opener=opener,
                        trigger=trigger, last_good=last_good)


class RayFleet:
    """Hands roots to fleet workers on a connected Ray and gives back finished results as they
    come.

    The workers (:class:`RootWorker` actors) are started when the first root is submitted,
    one per ``task_cpus`` of the cluster, and stopped by :meth:`close` or as soon as nothing
    is left to run (``fleet serve`` holds no CPUs between its runs). Roots wait here, in the
    order submitted, until a worker has room for one more; an idle worker gets one before any
    worker gets a second, so ``k`` roots on ``k`` workers run one per worker.

    A root whose worker died under it while sharing it gets one more run on a worker of its
    own: Ray re-runs the tasks a dead worker held on that same worker, restarted, so a root
    that kills its worker every time would take its companions' retries with its own.
    """

    def __init__(self, ray: ModuleType, config: FleetConfig, *, opener: Opener = open_root) -> None:
        self.ray = ray
        self.config = config
        self.opener = opener
        self._check_worker_fits()
        self.per_worker = max(1, int(config.roots_per_worker))
        self._worker_class = ray.remote(RootWorker).options(
            num_cpus=config.task_cpus, max_concurrency=self.per_worker,
            # a worker process that died comes back, with the tasks it held: each of them
            # re-run at most max_retries times (a root that kills its worker every time
            # ends failed; the others go on)
            max_restarts=-1, max_task_retries=config.max_retries)
        self._workers: list[Any] = []
        self._load: list[int] = []  # roots running on each worker
        self._alone: list[bool] = []  # whether each worker runs one root on its own
        # (key, root, name, force, trigger, alone, last_good): alone = a worker of its own,
        # last_good = the root's configuration to keep should its ome.toml be invalid
        self._queue: deque[_Task] = deque()
        # object ref -> the queued tuple and the worker running it
        self._pending: dict[Any, tuple[_Task, int]] = {}

    def _check_worker_fits(self) -> None:
        """:class:`RayUnavailable` when no live node of the cluster has ``task_cpus`` CPUs: a
        worker needs them on one node, so none could ever start, and Ray holds the tasks
        without a word (``fleet run`` waited for ever, ``fleet serve`` ran nothing)."""
        need = self.config.task_cpus
        largest = max((float((node.get("Resources") or {}).get("CPU", 0))
                       for node in self.ray.nodes() if node.get("Alive")), default=0.0)
        if largest + 1e-9 < need:
            where = self.config.ray_address or "the local Ray"
            raise RayUnavailable(
                f"task_cpus = {need:g} but the largest node of {where} has {largest:g} "
                f"{'CPU' if largest == 1 else 'CPUs'}: "
                "no fleet worker could start (lower task_cpus in the fleet file)")

    def submit(self, key: Any, root: str, name: str, *, force: bool = False,
               trigger: str = "fleet", last_good: Any = None) -> None:
        self._queue.append((key, root, name, force, trigger, self.per_worker == 1, last_good))
        self._dispatch()

    @property
    def in_flight(self) -> int:
        """Roots submitted and not finished yet (running, or waiting for room on a worker)."""
        return len(self._pending) + len(self._queue)

    def workers(self) -> int:
        """Worker processes the cluster can hold at once (its CPUs ÷ ``task_cpus``; at
        least 1)."""
        cpus = float(self.ray.cluster_resources().get("CPU", 0))
        return max(1, int(cpus / self.config.task_cpus + 1e-9))

    def slots(self) -> int:
        """Roots the cluster runs at once: workers × ``roots_per_worker``."""
        return self.workers() * self.per_worker

    def _room(self, alone: bool = False) -> int | None:
        """The worker to give the next root: an idle one, else a new one while the cluster
        holds more, else (unless the root must run ``alone``) the least loaded one with room
        that runs no root on its own; ``None`` when all are full."""
        idle = [i for i, n in enumerate(self._load) if n == 0]
        if idle:
            return idle[0]
        if len(self._workers) < self.workers():
            self._workers.append(self._worker_class.remote())
            self._load.append(0)
            self._alone.append(False)
            return len(self._workers) - 1
        if alone:
            return None
        shared = [i for i in range(len(self._load)) if not self._alone[i]]
        fewest = min(shared, key=self._load.__getitem__, default=None)
        if fewest is None or self._load[fewest] >= self.per_worker:
            return None
        return fewest

    def _dispatch(self) -> None:
        while self._queue:
            worker = self._room(self._queue[0][5])
            if worker is None:
                return
            task = self._queue.popleft()
            _, root, name, force, trigger, alone, last_good = task
            ref = self._workers[worker].run.remote(root, name, force, self.config.strategies,
                                                   self.opener, trigger, last_good)
            self._load[worker] += 1
            self._alone[worker] = alone
            self._pending[ref] = (task, worker)

    def finished(self, timeout: float | None = None) -> list[tuple[Any, RootResult]]:
        """Results of the roots that finished within ``timeout`` seconds (``None``: wait for
        at least one). A root Ray gave up on (its worker died more often than
        ``max_retries`` while running it, and once more on a worker of its own) comes back
        as a ``failed`` result naming Ray's error; one that was re-queued to run alone is
        not among them."""
        if not self._pending:
            return []
        done, _ = self.ray.wait(list(self._pending), num_returns=1, timeout=timeout)
        rest = [r for r in self._pending if r not in done]
        if done and rest:  # collect everything else that is ready too, without waiting
            more, _ = self.ray.wait(rest, num_returns=len(rest), timeout=0)
            done = list(done) + list(more)
        out = []
        for ref in done:
            task, worker = self._pending.pop(ref)
            key, root, alone = task[0], task[1], task[5]
            self._load[worker] -= 1
            try:
                result = self.ray.get(ref)
            except self.ray.exceptions.RayError as exc:
                if isinstance(exc, self.ray.exceptions.RayActorError) and not alone:
                    # its worker died under it, maybe killed by a companion: once more, on a
                    # worker of its own
                    log.info("%s: its worker died; running it once more on its own", root)
                    self._queue.appendleft((*task[:5], True, task[6]))
                    continue
                result = RootResult(root, FAILED, error=f"Ray: {describe(exc)}")
            out.append((key, result))
        self._dispatch()
        if not self.in_flight:
            self.close()
        return out

    def close(self) -> None:
        """Stop the workers (their CPUs go back to the cluster) and forget every root not
        finished. A root still running is cut off, as by a lost node: its journal makes its
        next run finish or abandon the interrupted merge."""
        for worker in self._workers:
            try:
                self.ray.kill(worker)
            except Exception:  # already gone
                log.debug("fleet worker already gone", exc_info=True)
        self._workers, self._load, self._alone = [], [], []
        self._pending.clear()
        self._queue.clear()


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

    ``on_result(result, done, total)`` is called as each root is settled (progress). A root
    listed twice (under any spelling) is run and reported once. Raises
    :class:`UnknownStrategy` before anything runs, :class:`RayMissing`/:class:`RayUnavailable`
    when there is no Ray to run on.
    """
    get_strategy(name)
    started = time.perf_counter()
    paths = distinct_roots(roots)
    results: dict[str, RootResult] = {}
    total = len(paths)

    def settle(result: RootResult) -> None:
        results[result.root] = result
        if on_result is not None:
            on_result(result, len(results), total)

    with ray_session(config) as ray:
        fleet = RayFleet(ray, config, opener=opener)
        try:
            submitted = _run_all(fleet, paths, name, force=force, opener=opener,
                                 settle=settle)
        finally:
            fleet.close()
    return FleetReport(name, [results[p] for p in paths], time.perf_counter() - started,
                       submitted, status_counts(results.values()))


def _run_all(fleet: RayFleet, paths: Sequence[str], name: str, *, force: bool, opener: Opener,
             settle: Callable[[RootResult], None]) -> int:
    """Judge every root, submit those with work, settle every result; the tasks sent."""
    config = fleet.config
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
    return submitted


def status_counts(results: Iterable[RootResult]) -> dict[str, int]:
    """How many roots ended in each status."""
    counts: dict[str, int] = {}
    for result in results:
        counts[result.status] = counts.get(result.status, 0) + 1
    return counts
