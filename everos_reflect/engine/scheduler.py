"""Scheduling: cron jobs per enabled strategy, ``ome.toml`` hot reload, start-up catch-up.

APScheduler 3.x runs the clock; every fire time comes from our :class:`CronTrigger` (crontab
semantics, see ``triggers.py``). A job only calls :meth:`Engine.trigger`, which re-checks
``enabled`` against the current configuration, so disabling a strategy stops its next run
while a run in progress finishes.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler
from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from everos_reflect.engine.engine import Engine, strategies_status
from everos_reflect.engine.registry import get_strategy, known_strategies
from everos_reflect.engine.triggers import CronTrigger, time_zone
from everos_reflect.errors import ConfigError
from everos_reflect.index import runs
from everos_reflect.index.db import utcnow_iso
from everos_reflect.model import json_got, quoted_value
from everos_reflect.settings import OME_FILE_NAME

log = logging.getLogger(__name__)


#: watchdog event types that can mean new content (Linux also reports opens and reads).
_WRITE_EVENTS = frozenset({"created", "modified", "moved", "deleted", "closed"})


class _OmeChanged(FileSystemEventHandler):
    def __init__(self, poke: Any) -> None:
        self._poke = poke

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type not in _WRITE_EVENTS:  # opened, closed_no_write: a mere read
            return
        paths = (event.src_path, getattr(event, "dest_path", "") or "")
        if any(Path(str(p)).name == OME_FILE_NAME for p in paths if p):
            self._poke()


#: The least lateness a fire time is still run with: a busy process or a loaded host fires a
#: job a little late, and ``misfire_grace_hours = 0`` must not drop those runs.
MIN_MISFIRE_GRACE_SECONDS = 300


def misfire_grace_seconds(settings: dict[str, Any]) -> int:
    """How late a fire time may be run while the daemon is up: the strategy's
    ``misfire_grace_hours``, as for a run missed while it was down. A host asleep (or a clock
    set forward) over the fire time is down for the schedule's purposes; with APScheduler's
    fixed five minutes, a laptop asleep over Monday 02:00 skipped the week's Reflection
    while a stopped daemon caught it up at start-up."""
    hours = float(settings.get("misfire_grace_hours", 0.0))
    return max(MIN_MISFIRE_GRACE_SECONDS, int(hours * 3600))


class _Every:
    """Calls ``work`` every ``seconds`` on a thread of its own until :meth:`stop`.

    Timed by ``Event.wait``, a monotonic clock. APScheduler 3's interval jobs follow the wall
    clock: set back an hour (an NTP step, a VM resumed), it planned the next poll an hour
    ahead, and the data-triggered strategies and the ``ome.toml`` safety net stopped for that
    hour. Cron jobs stay on APScheduler: they are wall-clock times by nature."""

    def __init__(self, seconds: float, work: Any, name: str) -> None:
        self.seconds = seconds
        self.work = work
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.seconds):
            try:
                self.work()
            except Exception:  # a poll must never end the polling
                log.exception("%s failed", self._thread.name)


def _instant(stamp: object) -> datetime | None:
    """``stamp``, a time the index recorded, as a datetime (one without an offset read as UTC,
    as the index writes them); ``None`` when it is no ISO 8601 time."""
    if not isinstance(stamp, str):
        return None
    try:
        when = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


class Scheduler:
    """Keeps one APScheduler job per enabled strategy in step with ``ome.toml``."""

    def __init__(
        self,
        engine: Engine,
        *,
        debounce_seconds: float = 0.3,
        poll_seconds: float = 5.0,
        data_poll_seconds: float = 30.0,
    ) -> None:
        self.engine = engine
        self.runtime = engine.runtime
        self.tz = self.runtime.settings.scheduler.timezone
        self.debounce_seconds = debounce_seconds
        self.poll_seconds = poll_seconds
        self.data_poll_seconds = data_poll_seconds
        self._aps = BackgroundScheduler(
            timezone=time_zone(self.tz),
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 300},
        )
        self._scheduled: dict[str, str] = {}  # strategy -> cron expression of its job
        self._graces: dict[str, int] = {}  # strategy -> its job's misfire grace, seconds
        self._unreadable_starts: set[tuple[str, str]] = set()  # warned of: (strategy, run id)
        self._apply_lock = threading.Lock()
        # Held across "read the config, re-plan the jobs" so status() never pairs a new cron
        # with the previous job's next run.
        self._reload_lock = threading.RLock()
        self._timer: threading.Timer | None = None
        self._observer: Any = None
        self._ome_stat: tuple[int, int] | None = None
        self._pollers: list[_Every] = []

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self, *, now: datetime | None = None, watch: bool = True) -> None:
        """Load ``ome.toml``, schedule jobs, catch up a run missed while down, start watching."""
        self._ome_stat = self._stat()
        if not self.engine.reload_config():
            self._no_config_yet()
        self._aps.start()
        self._apply(initial=True)
        self._catch_up(now or datetime.now(UTC))
        self._pollers = [_Every(self.poll_seconds, self._poll_ome, "ome-poll"),
                         _Every(self.data_poll_seconds, self._poll_data, "data-poll")]
        for poller in self._pollers:
            poller.start()
        if watch:
            self.runtime.root.mkdir(parents=True, exist_ok=True)
            observer = Observer()
            observer.schedule(_OmeChanged(self._poke), str(self.runtime.root), recursive=False)
            observer.daemon = True
            observer.start()
            self._observer = observer

    def shutdown(self) -> None:
        """Stop firing new runs (runs in progress belong to the engine)."""
        for poller in self._pollers:
            poller.stop()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(5)
            self._observer = None
        if self._timer is not None:
            self._timer.cancel()
        if self._aps.running:
            self._aps.shutdown(wait=False)

    # --- configuration ------------------------------------------------------------------------

    def reload(self) -> bool:
        """Re-read ``ome.toml`` and re-plan the jobs; False when the file was invalid (the last
        good configuration then stays in force and ``status()`` says why)."""
        with self._reload_lock:
            self._ome_stat = self._stat()
            ok = self.engine.reload_config()
            if not ok:
                self._no_config_yet()
            self._apply()
        return ok

    def _no_config_yet(self) -> None:
        """Log an invalid ``ome.toml`` while no good one was ever loaded (the engine logs it
        only when it keeps a last good configuration)."""
        if not self.engine.has_config:
            log.error("%s (no strategy is scheduled until it is fixed)", self.engine.config_error)

    def _poke(self) -> None:
        """Debounce: editors write a file in several events; reload once they settle."""
        with self._apply_lock:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(self.debounce_seconds, self._reload_logged)
            self._timer.daemon = True
            self._timer.start()

    def _reload_logged(self) -> None:
        try:
            if not self.engine.ome_changed():  # touched or read, same bytes: nothing to do
                self._ome_stat = self._stat()
                return
            if self.reload():
                log.info("ome.toml reloaded: %s", self._describe())
        except Exception:  # a reload must never kill the watcher thread
            log.exception("ome.toml reload failed")

    def _stat(self) -> tuple[int, int] | None:
        """``ome.toml``'s (mtime, size); ``None`` with no file, ``(-1, errno)`` when it cannot
        be looked at. A symlink loop raised ELOOP here: ``serve`` would not start, and a
        daemon already up logged a traceback at every poll and never said what was wrong."""
        try:
            st = (self.runtime.root / OME_FILE_NAME).stat()
        except FileNotFoundError:
            return None
        except OSError as exc:  # the reload that follows reports it (engine.reload_config)
            return -1, exc.errno or 0
        return st.st_mtime_ns, st.st_size

    def _poll_ome(self) -> None:
        """Safety net for file systems where watchdog misses events (network mounts)."""
        if self._stat() != self._ome_stat:
            self._reload_logged()

    def _describe(self) -> str:
        return ", ".join(f"{n} @ {c!r}" for n, c in sorted(self._scheduled.items())) or \
            "no strategy scheduled"

    def _apply(self, *, initial: bool = False) -> None:
        """Make the jobs match the current configuration."""
        try:
            config = self.engine.config()
        except ConfigError:
            config = {}  # never had a good file: nothing is scheduled
        with self._apply_lock:
            for name in known_strategies():
                settings = config.get(name) or {}
                expr = settings.get("cron") if settings.get("enabled") else None
                grace = misfire_grace_seconds(settings)
                current = self._scheduled.get(name)
                if expr == current and (expr is None or grace == self._graces.get(name)):
                    continue
                if expr is None:
                    if self._aps.get_job(name):
                        self._aps.remove_job(name)
                    del self._scheduled[name]
                    self._graces.pop(name, None)
                    log.info("%s: unscheduled (disabled or no cron)", name)
                    continue
                self._aps.add_job(
                    self._fire, trigger=CronTrigger(expr, self.tz).to_apscheduler(),
                    args=(name,), id=name, name=name, replace_existing=True,
                    misfire_grace_time=grace,
                )
                self._scheduled[name], self._graces[name] = expr, grace
                if current is None:
                    self._arm(name, reset=not initial)
                log.info("%s: scheduled %r (%s), next run %s", name, expr, self.tz,
                         self._aps.get_job(name).next_run_time)

    # --- firing -------------------------------------------------------------------------------

    def _fire(self, name: str, trigger: str = "cron") -> None:
        try:
            outcome = self.engine.trigger(name, trigger=trigger, timeout=None)
        except Exception:
            log.exception("%s: %s run could not start", name, trigger)
            return
        log.info("%s: %s run %s: %s%s", name, trigger, outcome.run_id, outcome.status,
                 f" ({outcome.error})" if outcome.error else "")

    def _catch_up(self, now: datetime) -> None:
        """At most one run per strategy for a fire time missed while the daemon was down."""
        for name, expr in list(self._scheduled.items()):
            grace = timedelta(hours=float(self.engine.settings_for(name)["misfire_grace_hours"]))
            missed = CronTrigger(expr, self.tz).missed_run(self._reference(name), now, grace)
            if missed is not None:
                log.info("%s: run due at %s was missed while down; catching up once",
                         name, missed.isoformat())
                self._aps.add_job(self._fire, args=(name, "startup-catchup"),
                                  id=f"_catchup_{name}", replace_existing=True)

    def _reference(self, name: str) -> datetime | None:
        """Since when a fire time counts as missed: the last run, else when it was armed."""
        last = self.engine.last_run(name)
        if last is None:
            return _instant(self._state(name).get("armed_at"))
        when = _instant(last.get("started_at"))
        if when is None:
            # a run record edited by hand or cut short: `serve` ended at start ("Invalid
            # isoformat string: 'garbage'"), naming no record
            self._warn_unreadable_start(name, last)
        return when

    def _warn_unreadable_start(self, name: str, last: dict[str, Any]) -> None:
        """Warn, once per run record, that ``name``'s last run records a start that cannot be
        read: while it reads as the last run, no fire time missed while down is caught up and
        no data trigger fires (its cron still does)."""
        key = (name, str(last.get("id")))
        if key in self._unreadable_starts:
            return
        self._unreadable_starts.add(key)
        log.warning("%s: its last run %s records a start that cannot be read (%s, edited or "
                    "damaged); while it reads as the last run, no missed fire time is caught "
                    "up and no data trigger fires", name, last.get("id"),
                    quoted_value(last.get("started_at")))

    def _poll_data(self) -> None:
        """Run strategies whose data trigger is due (measured by the strategy's ``observe``)."""
        try:
            config = self.engine.config()
        except ConfigError:
            return
        now = datetime.now(UTC)
        for name in known_strategies():
            strategy = get_strategy(name)
            if strategy.data_trigger is None or not config.get(name, {}).get("enabled"):
                continue
            last = self.engine.last_run(name)
            since = _instant(last.get("started_at")) if last else None
            if last is not None and since is None:
                # a last run whose start cannot be read (edited, damaged): no data trigger can
                # be judged since it, and taken as "never run" it would fire at every poll
                self._warn_unreadable_start(name, last)
                continue
            try:
                # the last good settings: a fresh read of an invalid ome.toml raised here at
                # every poll, and no data-triggered run fired until the file was fixed
                value = strategy.observe(self.runtime, since, config[name])
            except Exception:
                log.exception("%s: observing its data trigger failed", name)
                continue
            if strategy.data_trigger.is_due(value, since, now):
                self._fire(name, "data")

    # --- persisted per-strategy state ---------------------------------------------------------

    def _state(self, name: str) -> dict[str, Any]:
        """The scheduler's saved state of ``name`` (``{}`` when none). A record the index holds
        that cannot be read (edited by hand, cut short: no JSON object, or an ``armed_at``
        that is no time) is named in a warning and read without it, so :meth:`_arm` arms it
        afresh and writes it readable: it ended ``serve`` at start ("Expecting property name
        enclosed in double quotes", an internal error), naming no record."""
        try:
            state: Any = runs.load_state(self.runtime.db(), name)
        except ValueError:
            state, why = {}, "it is not JSON"
        else:
            why = "" if isinstance(state, dict) else f"it is {json_got(state)}, not an object"
            state = state if isinstance(state, dict) else {}
        stamp = state.get("armed_at")
        if stamp is not None and _instant(stamp) is None:
            why = f"its armed_at is {json_got(stamp)}, not an ISO 8601 time"
            state = {key: value for key, value in state.items() if key != "armed_at"}
        if why:
            log.warning("%s: the scheduler's record of it (strategy_state) cannot be read "
                        "(edited or damaged: %s); armed afresh from now", name, why)
        return state

    def _arm(self, name: str, *, reset: bool) -> None:
        """Remember when the schedule became active, the reference for catch-up before any run.

        At start-up an existing mark is kept (a fire time missed while down still counts);
        enabling a strategy later starts afresh.
        """
        state = self._state(name)
        if state.get("armed_at") and not reset:
            return
        state["armed_at"] = utcnow_iso()
        runs.save_state(self.runtime.db(), name, state)

    # --- status -------------------------------------------------------------------------------

    def next_runs(self) -> dict[str, datetime | None]:
        out: dict[str, datetime | None] = {}
        for name in self._scheduled:
            job = self._aps.get_job(name)
            out[name] = job.next_run_time if job else None
        return out

    def status(self) -> list[dict[str, Any]]:
        """Per strategy: name, enabled, cron, next_run, last_run, running, config_error."""
        with self._reload_lock:
            return strategies_status(self.runtime, self.engine, next_runs=self.next_runs())
