"""``fleet serve``: one scheduler for every root of a fleet, submitting due runs to Ray.

Per root it keeps the same semantics as the single-root daemon's scheduler: each enabled
strategy fires on its cron in the root's ``[scheduler] timezone``; a fire time missed while
the scheduler was down (at most ``misfire_grace_hours`` old, after the last run) runs once at
start-up; a changed ``ome.toml`` is picked up within ``poll_seconds``, an invalid one keeps
the root's last good configuration (its schedule, runs and data polls); ``enabled = false``
stops the next run while one in progress finishes; data-triggered strategies run when their
``observe`` says so. A root's configuration is the fleet's ``[strategies]`` overlaid by the
root's own ``ome.toml`` (the root wins). Runs of one strategy on one root never overlap: a
fire time that comes while the previous run is still in flight is skipped (as the daemon's
``max_instances = 1``), and the root's own lock guards against any other process.

The planning is pure (:func:`plan_due`, :func:`due_slots`); :class:`FleetScheduler` is the thin
loop around it, talking to a *submitter* (``submit``/``finished``/``in_flight``) — Ray's
:class:`~.ray_backend.RayFleet` in production, an in-process fake in tests.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from everos_reflect.engine.registry import get_strategy, known_strategies
from everos_reflect.engine.triggers import CronTrigger
from everos_reflect.errors import ConfigError, EverosError
from everos_reflect.fleet.config import FleetConfig, distinct_roots, resolve_roots
from everos_reflect.fleet.work import NOT_DONE, Opener, RootResult, fleet_engine, open_root
from everos_reflect.problem_words import counted
from everos_reflect.settings import OME_FILE_NAME, USER_FILE_NAME

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (root, strategy)

#: The signals that stop ``fleet serve`` cleanly (as they stop ``serve``).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Submitter(Protocol):
    def submit(self, key: Any, root: str, name: str, *, force: bool = False,
               trigger: str = "fleet", last_good: Any = None) -> None: ...

    def finished(self, timeout: float | None = None) -> list[tuple[Any, RootResult]]: ...

    @property
    def in_flight(self) -> int: ...


@dataclass
class Slot:
    """One strategy of one root, as scheduled."""

    root: str
    name: str
    cron: str | None
    tz: str
    due: datetime | None
    trigger: str = "cron"
    data: bool = False  # the strategy has a data trigger (observed every data poll)


def plan_due(cron: str | None, tz: str, *, now: datetime, last_started: datetime | None,
             grace: timedelta, catch_up: bool) -> tuple[datetime | None, str]:
    """When a strategy is next due and as what trigger: ``(now, "startup-catchup")`` for a
    fire time missed while down, else the next cron fire time; ``(None, "")`` unscheduled."""
    if not cron:
        return None, ""
    trigger = CronTrigger(cron, tz)
    if catch_up and trigger.missed_run(last_started, now, grace) is not None:
        return now, "startup-catchup"
    return trigger.next_fire(now), "cron"


def due_slots(slots: Iterable[Slot], now: datetime, in_flight: set[Key]) -> tuple[list[Slot],
                                                                                  list[Slot]]:
    """``(to run, to skip)``: slots due at ``now``; a due slot whose previous run is still in
    flight is skipped, not queued (runs never pile up)."""
    run, skip = [], []
    for slot in slots:
        if slot.due is None or slot.due > now:
            continue
        (skip if (slot.root, slot.name) in in_flight else run).append(slot)
    return run, skip


def _elapsed(since: datetime, now: datetime, seconds: float) -> bool:
    """Whether ``seconds`` have passed from ``since`` to ``now``, or the wall clock went back
    past ``since`` (an NTP step, a VM resumed): waiting for it to catch up stopped the data
    poll and the rescan for as long as the clock had jumped."""
    elapsed = (now - since).total_seconds()
    return elapsed < 0 or elapsed >= seconds


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


class FleetScheduler:
    """The fleet's schedule and the loop that feeds due runs to a submitter."""

    def __init__(self, config: FleetConfig, roots: Sequence[Path | str], submitter: Submitter,
                 *, opener: Opener = open_root, data_poll_seconds: float = 30.0,
                 rescan_seconds: float = 60.0) -> None:
        self.config = config
        self.roots = distinct_roots(roots)
        self.submitter = submitter
        self.opener = opener
        self.data_poll_seconds = data_poll_seconds
        self.rescan_seconds = rescan_seconds
        self.slots: dict[Key, Slot] = {}
        #: Each root's strategy configuration as last loaded valid: its runs and data polls
        #: keep it while the root's ome.toml is invalid, as ``serve`` keeps its last good one.
        self.last_good: dict[str, dict[str, dict[str, Any]]] = {}
        self.in_flight: set[Key] = set()
        self.results: list[RootResult] = []  # the latest ones, bounded
        self._stats: dict[str, tuple[Any, Any]] = {}
        self._last_data_poll: datetime | None = None
        self._last_rescan: datetime | None = None
        #: The folders the last rescan left out (not memory roots), each warned of once.
        self._skipped: set[str] = set()

    # --- the schedule ---------------------------------------------------------------------

    def start(self, now: datetime | None = None) -> None:
        now = now or datetime.now(UTC)
        for root in self.roots:
            self.load_root(root, now=now, catch_up=True)
        self._last_rescan = self._last_data_poll = now

    def _root_stat(self, root: str) -> tuple[Any, Any]:
        return _stat(Path(root) / OME_FILE_NAME), _stat(Path(root) / USER_FILE_NAME)

    def load_root(self, root: str, *, now: datetime, catch_up: bool) -> bool:
        """(Re)plan every strategy of one root from its configuration; False (and the last good
        plan kept) when the root cannot be opened or its ``ome.toml`` is invalid."""
        self._stats[root] = self._root_stat(root)
        try:
            runtime = self.opener(root)
        except EverosError as exc:
            log.error("%s: cannot open (%s); its schedule is unchanged", root, exc)
            return False
        try:
            engine = fleet_engine(runtime, self.config.strategies, recover=False)
            if not engine.reload_config():
                log.error("%s: %s; its schedule is unchanged", root, engine.config_error)
                return False
            config = engine.config()
            self.last_good[root] = config
            tz = runtime.settings.scheduler.timezone
            for name in known_strategies():
                settings = config.get(name) or {}
                enabled = bool(settings.get("enabled"))
                cron = settings.get("cron") if enabled else None
                key = (root, name)
                old = self.slots.get(key)
                data = enabled and get_strategy(name).data_trigger is not None
                if old is not None and old.cron == cron and old.tz == tz:
                    old.data = data
                    continue
                last = engine.last_run(name) if catch_up and cron else None
                started = datetime.fromisoformat(last["started_at"]) if last else None
                grace = timedelta(hours=float(settings.get("misfire_grace_hours", 0.0)))
                due, trigger = plan_due(cron, tz, now=now, last_started=started, grace=grace,
                                        catch_up=catch_up)
                self.slots[key] = Slot(root, name, cron, tz, due, trigger or "cron", data)
                if cron:
                    log.info("%s: %s scheduled %r (%s), next run %s%s", root, name, cron, tz,
                             due.isoformat() if due else "-",
                             " (catching up a missed run)" if trigger == "startup-catchup"
                             else "")
            return True
        except (EverosError, ValueError) as exc:
            log.error("%s: cannot plan its schedule (%s)", root, exc)
            return False
        finally:
            runtime.close()

    def _rescan(self, now: datetime) -> None:
        """New shards matching the fleet's globs join; vanished ones leave. A folder a glob
        matches that is not a memory root (yet: made before ``init`` ran in it) is named in
        a warning, once, and left out; the other roots join as ever."""
        skipped: list[tuple[str, str, str]] = []
        try:
            roots = [str(r) for r in resolve_roots(self.config, skipped=skipped)]
        except ConfigError as exc:
            log.error("fleet roots: %s; keeping the %d known roots", exc, len(self.roots))
            return
        for file, where, why in skipped:
            if why not in self._skipped:
                log.warning("fleet roots: %s: %s: %s; left out until it is one", file, where,
                            why)
        self._skipped = {why for _, _, why in skipped}
        gone = set(self.roots) - set(roots)
        for key in [k for k in self.slots if k[0] in gone]:
            del self.slots[key]
        for root in gone:
            self.last_good.pop(root, None)
        for root in roots:
            if root not in self.roots:
                log.info("%s: joined the fleet", root)
                self.load_root(root, now=now, catch_up=False)
        self.roots = roots

    # --- the loop ---------------------------------------------------------------------------

    def tick(self, now: datetime | None = None) -> list[Key]:
        """Reload changed configurations, submit what is due, collect what finished. Returns
        the (root, strategy) pairs submitted."""
        now = now or datetime.now(UTC)
        self.collect(timeout=0)
        if self._last_rescan and _elapsed(self._last_rescan, now, self.rescan_seconds):
            self._last_rescan = now
            self._rescan(now)
        for root in self.roots:
            changed = self._root_stat(root) != self._stats.get(root)
            if changed and self.load_root(root, now=now, catch_up=False):
                log.info("%s: configuration reloaded", root)
        run, skip = due_slots(list(self.slots.values()), now, self.in_flight)
        submitted = []
        for slot in skip:
            log.warning("%s: %s due at %s while its previous run is still going; skipped",
                        slot.root, slot.name, slot.due)
            self._advance(slot, now)
        for slot in run:
            self._submit(slot.root, slot.name, slot.trigger)
            submitted.append((slot.root, slot.name))
            self._advance(slot, now)
        if self._last_data_poll is None or _elapsed(self._last_data_poll, now,
                                                    self.data_poll_seconds):
            self._last_data_poll = now
            submitted += self._poll_data(now)
        return submitted

    def _advance(self, slot: Slot, now: datetime) -> None:
        slot.trigger = "cron"
        slot.due = CronTrigger(slot.cron, slot.tz).next_fire(now) if slot.cron else None

    def _submit(self, root: str, name: str, trigger: str) -> None:
        log.info("%s: %s %s run submitted", root, name, trigger)
        self.submitter.submit((root, name), root, name, trigger=trigger,
                              last_good=self.last_good.get(root))
        self.in_flight.add((root, name))

    def _poll_data(self, now: datetime) -> list[Key]:
        """Strategies with a data trigger: observed here, run through Ray when due."""
        out = []
        for slot in list(self.slots.values()):
            key = (slot.root, slot.name)
            if not slot.data or key in self.in_flight:
                continue
            strategy = get_strategy(slot.name)
            trigger = strategy.data_trigger
            if trigger is None:
                continue
            try:
                runtime = self.opener(slot.root)
                try:
                    last = fleet_engine(runtime, self.config.strategies,
                                       recover=False).last_run(slot.name)
                    since = datetime.fromisoformat(last["started_at"]) if last else None
                    # the settings the slot was planned with: read afresh, an invalid
                    # ome.toml raised here at every poll and the strategy never ran
                    value = strategy.observe(runtime, since,
                                             self.last_good.get(slot.root, {}).get(slot.name))
                finally:
                    runtime.close()
            except Exception:  # one root's observation must not stop the fleet's loop
                log.exception("%s: observing %s's data trigger failed", slot.root, slot.name)
                continue
            if trigger.is_due(value, since, now):
                self._submit(slot.root, slot.name, "data")
                out.append(key)
        return out

    def collect(self, timeout: float | None = 0) -> list[RootResult]:
        """Results of runs that finished, logged; their slots may run again."""
        out = []
        for key, result in self.submitter.finished(timeout):
            self.in_flight.discard(key)
            out.append(result)
            level = logging.WARNING if result.status in NOT_DONE else logging.INFO
            log.log(level, "%s: %s %s%s (%.1f s)%s", result.root, key[1], result.status,
                    f" merged={result.merges}" if result.merges else "", result.seconds,
                    f": {result.error}" if result.error else "")
        self.results = (self.results + out)[-1000:]
        return out

    def run(self, stop: threading.Event, *, grace: float = 30.0) -> None:
        """Tick every ``poll_seconds`` until ``stop`` is set, then give runs in flight
        ``grace`` seconds to finish (a run cut off later is recovered by its journal)."""
        self.start()
        while not stop.is_set():
            try:
                self.tick()
            except Exception:  # the loop outlives any one bad tick
                log.exception("fleet scheduler tick failed")
            stop.wait(self.config.poll_seconds)
        # the monotonic clock: the wall clock set back (an NTP step) stretched the grace by as
        # much, and set forward cut it short
        deadline = time.monotonic() + grace
        while self.in_flight and time.monotonic() < deadline:
            self.collect(timeout=max(0.0, deadline - time.monotonic()))
        if self.in_flight:
            log.warning("%s still going at shutdown; their journals make that safe",
                        counted(len(self.in_flight), "run"))


def serve_fleet(config: FleetConfig, roots: Sequence[Path | str], *,
                opener: Opener = open_root) -> None:
    """``fleet serve`` in the foreground until SIGTERM, SIGINT or SIGHUP (the terminal closed,
    an SSH session dropped: it killed the scheduler on the spot, runs in flight given no
    grace), as ``serve``. A signal ignored from the start stays ignored: ``nohup everos-reflect
    fleet serve`` outlives the terminal, as nohup promises."""
    from everos_reflect.fleet.ray_backend import RayFleet, ray_session

    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    stop = threading.Event()

    def on_signal(sig: int, frame: object) -> None:
        log.info("received %s: stopping", signal.Signals(sig).name)
        stop.set()

    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS
                if signal.getsignal(sig) != signal.SIG_IGN}
    signals = tuple(previous)
    for sig in signals:  # one while Ray starts (seconds) stops the scheduler before it runs
        signal.signal(sig, on_signal)
    # SIGHUP blocked while a local Ray starts: its processes keep it blocked, so a terminal
    # hanging up its whole process group stops this scheduler, which then stops them. They
    # died of it at once, and this process (its parent shell gone) with them, no clean-up
    # done. One that comes meanwhile is delivered here once unblocked.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP})
    try:
        with ray_session(config) as ray:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            # again after ray.init, which sets a SIGTERM handler of its own (sys.exit): set
            # only before it, a SIGTERM cut every run in flight off at once, without its
            # grace, and the process exited 15
            for sig in signals:
                signal.signal(sig, on_signal)
            fleet = RayFleet(ray, config, opener=opener)
            scheduler = FleetScheduler(config, roots, fleet, opener=opener)
            log.info("fleet scheduler for %s on %s", counted(len(roots), "root"),
                     config.ray_address or "a local Ray")
            try:
                scheduler.run(stop)
            finally:
                fleet.close()  # a cluster's CPUs go back to it
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # ray.init failed: unblocked too
        for sig, handler in previous.items():
            if handler is not None:  # None: set outside Python, cannot be put back
                signal.signal(sig, handler)
        log.info("stopped")
