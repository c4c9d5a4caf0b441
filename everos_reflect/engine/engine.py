"""Running strategies: configuration, mutual exclusion, run records, retries and recovery.

One :class:`Engine` per process. A run holds ``<root>/.index/locks/strategy-<name>.lock`` for
its whole life, so two processes never run the same strategy at once; inside one process a
second trigger while a run is in flight *joins* that run (a cron firing and a manual trigger at
the same moment make one run, and both callers get its outcome). Every run is a row in
``runs``; a row left ``running`` by a process that died is marked ``abandoned`` at the next
start.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import sqlite3
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filelock import FileLock, Timeout

from everos_reflect import root_lock
from everos_reflect.engine.limits import Budget
from everos_reflect.engine.registry import (
    RunContext,
    Strategy,
    did_nothing,
    get_strategy,
    judge_counts,
    known_strategies,
    name_failures,
    validate_ome,
)
from everos_reflect.engine.triggers import CronTrigger
from everos_reflect.errors import ConfigError, IndexReadOnly, RootGone, describe
from everos_reflect.fileio import os_reason, read_config_bytes
from everos_reflect.index import rebuild, runs
from everos_reflect.index.db import db_built
from everos_reflect.problem_words import counted
from everos_reflect.settings import OME_FILE_NAME, config_file, config_text, parse_ome

if TYPE_CHECKING:
    from everos_reflect.runtime import Runtime

log = logging.getLogger(__name__)

#: Outcome statuses a trigger answers with.
OK, TIMEOUT, BUSY, DISABLED, FAILED, PARTIAL = (
    "ok", "timeout", "busy", "disabled", "failed", "partial")


@dataclass
class RunOutcome:
    """What a trigger answers. ``run_id`` is set whenever a run was started (or joined)."""

    status: str
    name: str
    run_id: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    #: True when this trigger found the strategy already running and waited for that run
    #: instead of starting another (the answer says so rather than pretending it started one).
    joined: bool = False
    #: Logs the run's catch-up sync indexed first (:attr:`RunContext.logs_indexed`).
    logs_indexed: int = 0
    #: Why a run that went fine had nothing to do (:meth:`Strategy.idle_reason`): no new
    #: records since the last run, below the threshold, needs an LLM. ``None`` otherwise.
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


#: The triggers whose answer a person or a client reads (``trigger``, the API): only their
#: runs are told why they had nothing to do; a scheduled run that found nothing (many an hour
#: across a fleet) is not made to look through every owner again to say why.
ASKED = frozenset({"manual", "api"})
#: The attribute set on the log record of a run's end (its status, counts and why): a caller
#: that prints the run's outcome itself (an in-process ``trigger``) leaves that record out,
#: which said the failure's reason a second time.
RUN_SUMMARY = "everos_run_summary"
#: How many finished runs' outcomes an engine keeps for :meth:`Engine.outcome_of`.
KEPT_OUTCOMES = 64

#: Why a run that returned at a stop request (``serve`` or ``fleet serve`` shutting down on
#: SIGTERM/SIGINT) is ``partial``, not ``ok``.
STOPPED_EARLY = ("the process running it was shutting down; what it had not done waits for "
                 "the next run")

#: The longest wait before a retry (the doubling stops there).
MAX_RETRY_WAIT_SECONDS = 86_400.0


def retry_wait(backoff: float, attempt: int) -> float:
    """Seconds before retrying after failed attempt ``attempt``: ``backoff`` doubled per
    attempt, at most :data:`MAX_RETRY_WAIT_SECONDS`. Computed as ``backoff * 2 ** (attempt -
    1)``, the 1,025th attempt overflowed a float (even times 0): the OverflowError escaped the
    retry loop and the run record stayed "running" for good."""
    return min(backoff * 2.0 ** min(attempt - 1, 32), MAX_RETRY_WAIT_SECONDS)


@dataclass
class _ActiveRun:
    run_id: str
    lock: FileLock
    #: The connection the run's record was started with, and is ended with: it follows a
    #: root moved mid-run, so the record still ends where it was started.
    conn: sqlite3.Connection
    done: threading.Event = field(default_factory=threading.Event)
    outcome: RunOutcome | None = None
    thread: threading.Thread | None = None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def overlay_ome(defaults: Mapping[str, Mapping[str, Any]],
                own: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Strategy tables ``defaults`` with a root's own ``ome.toml`` tables laid over them, key by
    key: the root's file always wins."""
    names = list(defaults) + [n for n in own if n not in defaults]
    return {n: {**defaults.get(n, {}), **own.get(n, {})} for n in names}


#: Where a key a root's ``ome.toml`` does not set comes from, when a fleet's defaults set it.
FLEET_DEFAULTS = "the fleet's [strategies] defaults"


def inherited_keys(defaults: Mapping[str, Mapping[str, Any]],
                   own: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """Per strategy, the keys :func:`overlay_ome` takes from ``defaults`` (``own`` does not
    set them), each with where: a problem of two keys names the file of each."""
    return {name: {key: FLEET_DEFAULTS for key in table if key not in own.get(name, {})}
            for name, table in defaults.items()}


def lock_path(root: Path, name: str) -> Path:
    return Path(root) / ".index" / "locks" / f"strategy-{name}.lock"


def run_lock_held(root: Path, name: str) -> bool:
    """Whether a run of strategy ``name`` holds its :func:`lock_path` now: every run holds it
    from before its record is started to after the record is ended. A ``running`` record
    whose pid is alive is no proof: a run killed with ``kill -9`` leaves its record, and once
    the OS gives its pid to another process, that pid is alive. A lock that cannot be tested
    is taken as held (the pid then decides, as before)."""
    try:
        fd = os.open(lock_path(root, name), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # shared, released at once
    except OSError:  # BlockingIOError: held; any other error: cannot tell
        return True
    finally:
        os.close(fd)
    return False


def _run_gone(root: Path, row: Mapping[str, Any]) -> bool:
    """Is the process of a ``running`` record gone: no pid, a dead one, or a live one that
    holds no run of the record's strategy (a reused pid, :func:`run_lock_held`)?"""
    pid = row.get("pid")
    return (pid is None or not _pid_alive(int(pid))
            or not run_lock_held(root, str(row.get("strategy"))))


class Engine:
    """Runs strategies for one memory root. Thread-safe; cheap to construct."""

    def __init__(self, runtime: Runtime, *, recover: bool = True,
                 ome_defaults: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self.runtime = runtime
        #: Strategy tables the root's own ``ome.toml`` is laid over (a fleet's defaults);
        #: ``None``: the runtime's (:attr:`Runtime.ome_defaults`).
        if ome_defaults is None:
            ome_defaults = getattr(runtime, "ome_defaults", None) or {}
        self.ome_defaults = {k: dict(v) for k, v in ome_defaults.items()}
        self._mutex = threading.Lock()
        # One reload at a time: a second caller must not see the new digest before the
        # first has stored what it parsed (a first config() then found neither).
        self._reload_lock = threading.RLock()
        self._active: dict[str, _ActiveRun] = {}
        #: The outcomes of this engine's latest finished runs by run id (:meth:`outcome_of`).
        self._outcomes: OrderedDict[str, RunOutcome] = OrderedDict()
        self._stop = threading.Event()
        self._config: dict[str, dict[str, Any]] | None = None
        self.config_error: str | None = None
        self._config_problems: ConfigError | None = None
        self._ome_digest: str | None = None  # sha256 of the ome.toml bytes last parsed
        if recover:
            self.recover()

    # --- configuration ------------------------------------------------------------------------

    @property
    def ome_path(self) -> Path:
        return self.runtime.root / OME_FILE_NAME

    def _ome_bytes(self) -> bytes | None:
        """The bytes of ``ome.toml`` (``None``: no file)."""
        return read_config_bytes(self.ome_path)

    def ome_changed(self) -> bool:
        """Whether ``ome.toml``'s bytes differ from those last loaded (or last found invalid).

        Content, not events or mtimes, decides: reading the file (an editor, ``cat``, our own
        reload) must never cause a reload, or a reload's own read would trigger the next one."""
        try:
            data = self._ome_bytes()
        except OSError:
            return True  # let reload_config report it
        return self._ome_digest is None or _digest(data) != self._ome_digest

    def reload_config(self, *, force: bool = False) -> bool:
        """Re-read ``ome.toml`` if its content changed (always with ``force``). On an invalid
        file keep the last good config, remember why and return False — logging the problem
        once per distinct content, not at every look; a missing file means every strategy at
        its defaults.

        With no good configuration to keep (the first load) nothing is logged: the caller
        reports it (:meth:`config` raises it; ``serve`` logs it, see
        :meth:`Scheduler.start <everos_reflect.engine.scheduler.Scheduler.start>`). A one-shot
        command printed it twice, the log line claiming a "last good" configuration the
        process never had."""
        with self._reload_lock:
            return self._reload_config(force=force)

    def _reload_config(self, *, force: bool) -> bool:
        shown = config_file(self.runtime.root, OME_FILE_NAME)  # named in the root
        try:
            try:
                data = self._ome_bytes()
            except OSError as exc:
                raise ConfigError([(shown, "(file)", os_reason(exc))]) from exc
            digest = _digest(data)
            if not force and digest == self._ome_digest:
                return self.config_error is None
            self._ome_digest = digest
            text = "" if data is None else config_text(data, shown)
            own = parse_ome(text, shown)
            tables = overlay_ome(self.ome_defaults, own)
            config = validate_ome(tables, shown, inherited=inherited_keys(self.ome_defaults,
                                                                               own))
        except ConfigError as exc:
            with self._mutex:
                self.config_error, self._config_problems = str(exc), exc
                kept = self._config is not None
            if kept:
                log.error("%s (keeping the last good strategy configuration)", exc)
            return False
        with self._mutex:
            self._config, self.config_error, self._config_problems = config, None, None
        return True

    def keep_config(self, config: Mapping[str, Mapping[str, Any]]) -> None:
        """Take ``config`` as the last good configuration (one validated earlier, maybe in
        another process: the fleet scheduler's) and re-read ``ome.toml`` over it: a valid
        file wins, an invalid one keeps ``config`` and is logged, as ``serve`` keeps the
        configuration it loaded."""
        with self._mutex:
            self._config = {name: dict(table) for name, table in config.items()}
        self.reload_config(force=True)

    def config_problem(self) -> str | None:
        """Why ``ome.toml`` as it reads now is invalid (``None``: it is valid), without the
        "invalid configuration: " every configuration error starts with."""
        if self.reload_config():
            return None
        return str(self.config_error).removeprefix("invalid configuration: ")

    @property
    def has_config(self) -> bool:
        """Whether a good ``ome.toml`` (or none, meaning the defaults) was ever loaded."""
        return self._config is not None

    def config(self) -> dict[str, dict[str, Any]]:
        """The validated settings of every strategy (the last good ``ome.toml``).

        Raises :class:`ConfigError` only when no good configuration was ever loaded.
        """
        if self._config is None:
            self.reload_config()
        if self._config is None:
            assert self._config_problems is not None
            raise self._config_problems
        return self._config

    def settings_for(self, name: str) -> dict[str, Any]:
        get_strategy(name)  # UnknownStrategy before anything else
        config = self.config()
        if name not in config:  # registered after the config was loaded
            self.reload_config(force=True)
            config = self.config()
        return config[name]

    def cron_for(self, name: str) -> CronTrigger | None:
        """The strategy's schedule in the configured timezone (``None``: not scheduled)."""
        expr = self.settings_for(name).get("cron")
        return CronTrigger(expr, self.runtime.settings.scheduler.timezone) if expr else None

    # --- running ------------------------------------------------------------------------------

    def trigger(
        self,
        name: str,
        *,
        force: bool = False,
        timeout: float | None = 120.0,
        trigger: str = "manual",
    ) -> RunOutcome:
        """Run ``name`` now and wait up to ``timeout`` seconds (``None``: until done) for it.

        A run that outlives the wait goes on; the answer is then ``timeout``. Raises
        :class:`UnknownStrategy` for an unknown name, :class:`IndexReadOnly` for a root this
        process cannot write (the strategy enabled or forced).
        """
        strategy = get_strategy(name)
        settings = self.settings_for(name)
        if not settings["enabled"] and not force:
            return RunOutcome(DISABLED, name, error=(
                f"{name} is disabled: set enabled = true in ome.toml, or trigger with force"
            ))
        if self._stop.is_set():
            return RunOutcome(BUSY, name, error="the engine is shutting down")
        try:  # no run record, lock or index at a path where the root is not
            self.runtime.check_root()
        except RootGone as exc:
            return RunOutcome(FAILED, name, error=str(exc))
        if self.runtime.read_only:  # one line, not an error about the strategy's lock file
            raise IndexReadOnly(self.runtime.index_dir)
        self.runtime.check_index()  # deleted by hand: no run over the index being rebuilt
        if self.runtime.index_rebuilding:
            return RunOutcome(BUSY, name, error=rebuild.REBUILDING)
        with self._mutex:
            active = self._active.get(name)
            joined = active is not None
            if active is None:
                try:
                    active = self._start(strategy, settings, trigger=trigger, force=force)
                except RootGone as exc:  # moved away as its lock was taken: no run began
                    return RunOutcome(FAILED, name, error=str(exc))
                if active is None:
                    return RunOutcome(BUSY, name, error=(
                        f"{name} is already running in another process"
                    ))
            else:
                log.info("%s: %s trigger joins run %s", name, trigger, active.run_id)
        if not active.done.wait(timeout):
            return RunOutcome(TIMEOUT, name, active.run_id, joined=joined)
        assert active.outcome is not None
        return replace(active.outcome, joined=joined)

    def _start(
        self, strategy: Strategy, settings: dict[str, Any], *, trigger: str, force: bool
    ) -> _ActiveRun | None:
        try:  # a root moved away meanwhile is not made again by the lock (RootGone)
            lock = root_lock.take(self.runtime, lock_path(self.runtime.root, strategy.name), 0)
        except Timeout:
            return None
        try:
            # UTC, as the record's started_at: the host's local time named a run started at
            # 01:00 UTC "15:00" on a host 14 h ahead
            run_id = f"run_{datetime.now(UTC):%Y%m%d%H%M%S}_{uuid.uuid4().hex[:6]}"
            conn = self.runtime.connect()  # the run thread's: opened while the root is here
            try:
                runs.start(conn, run_id, strategy.name, trigger)
            except BaseException:
                conn.close()
                raise
        except BaseException:
            lock.release()
            raise
        active = _ActiveRun(run_id, lock, conn)
        active.thread = threading.Thread(
            target=self._work, args=(active, strategy, settings, trigger, force),
            name=f"run-{strategy.name}", daemon=True,
        )
        self._active[strategy.name] = active
        log.info("%s: run %s started (%s%s)", strategy.name, run_id, trigger,
                 ", forced" if force else "")
        active.thread.start()
        return active

    def _work(self, active: _ActiveRun, strategy: Strategy, settings: dict[str, Any],
              trigger: str, force: bool) -> None:
        name = strategy.name
        outcome = RunOutcome(FAILED, name, active.run_id, error="run did not complete")
        guard: int | None = None
        try:
            # this thread's connection is the one that started the record: a root moved
            # before or during the run takes it along, so the record ends in the root's own
            # database (a connection opened here, after a move, could not be)
            self.runtime.adopt(active.conn)
            if self.runtime.root_gone():  # gone before the run began: nothing to lock
                guard = None
                outcome = self._root_gone(active.run_id, name, 1)
                return
            # shared with other runs, exclusive to reindex: no run over a half-built index
            guard = rebuild.try_shared(self.runtime.index_dir)
            if guard is None:
                log.warning("%s: run %s skipped: %s", name, active.run_id, rebuild.REBUILDING)
                self._finish(active.run_id, BUSY, rebuild.REBUILDING, {}, 1)
                outcome = RunOutcome(BUSY, name, active.run_id, error=rebuild.REBUILDING)
            else:
                outcome = self._attempts(active.run_id, strategy, settings, trigger, force)
        except BaseException as exc:  # bookkeeping itself failed: still release everything
            log.exception("%s: run %s bookkeeping failed", name, active.run_id)
            outcome = RunOutcome(FAILED, name, active.run_id, error=describe(exc))
            try:  # and say so in the run record, which otherwise stayed "running"
                runs.fail(active.conn, active.run_id, describe(exc))
            except Exception:
                log.exception("%s: run %s could not be recorded failed", name, active.run_id)
        finally:
            if guard is not None:
                rebuild.release(guard)
            with self._mutex:
                self._active.pop(name, None)
                active.outcome = outcome
                self._outcomes[active.run_id] = outcome
                while len(self._outcomes) > KEPT_OUTCOMES:
                    self._outcomes.popitem(last=False)
                active.lock.release()
            active.done.set()

    def _attempts(self, run_id: str, strategy: Strategy, settings: dict[str, Any],
                  trigger: str, force: bool) -> RunOutcome:
        name = strategy.name
        strategy_log = logging.getLogger(f"everos_reflect.strategy.{name}")
        max_attempts = 1 + int(settings.get("max_retries", 0))
        backoff = float(settings.get("retry_backoff_seconds", 0.0))
        attempt = 1
        stop_seen = threading.Event()

        def should_stop() -> bool:
            """The engine's stop request, noted once the strategy has seen it: it then returns
            early, its work not all done (a run cut short by SIGTERM was recorded ``ok``)."""
            if self._stop.is_set():
                stop_seen.set()
                return True
            return False

        while True:
            ctx = RunContext(self.runtime, dict(settings), run_id, trigger, force,
                             should_stop, strategy_log, Budget.of(settings))
            try:
                # what a crash interrupted first, under this run's lock (every strategy's hook)
                recovered = _clean_counts(strategy.recover_for_run(ctx))
                counts = _clean_counts(strategy.run(ctx))
                for key, value in recovered.items():
                    counts[key] = counts.get(key, 0) + value
            except Exception as exc:
                if self.runtime.root_gone():
                    return self._root_gone(run_id, name, attempt)
                error = describe(exc)
                log.exception("%s: run %s attempt %d failed", name, run_id, attempt)
                wait = retry_wait(backoff, attempt)
                if attempt >= max_attempts or self._stop.wait(wait):
                    self._finish(run_id, FAILED, error, {}, attempt)
                    return RunOutcome(FAILED, name, run_id, error=error)
                attempt += 1
                self._update_attempt(run_id, attempt, error)
                continue
            if self.runtime.root_gone():  # what it found missing was never done: no success
                return self._root_gone(run_id, name, attempt, counts)
            status, why = judge_counts(strategy, counts)
            if ctx.failures:  # which units failed, not only how many
                why = (f"{why}; " if why else "") + name_failures(ctx.failures)
            if ctx.budget.hit:  # stopped between units by a run limit: say which
                counts.setdefault("limit_reached", 1)
                status = PARTIAL if status == OK else status
                why = f"stopped early: {ctx.budget.hit}" + (f"; {why}" if why else "")
            if stop_seen.is_set():
                status = PARTIAL if status == OK else status
                why = (f"stopped early: {STOPPED_EARLY}" + (f"; {why}" if why else ""))
            # known before the record is finished, and stored with it: kept in memory only,
            # `runs` and the API showed a bare "ok" for it after a restart
            reason = (self._idle_reason(strategy, settings, counts)
                      if status == OK and trigger in ASKED else None)
            self._finish(run_id, status, why, counts, attempt, reason)
            (log.info if status == OK else log.warning)(
                "%s: run %s %s: %s%s", name, run_id, status, counts_words(counts),
                f" ({why})" if why else "", extra={RUN_SUMMARY: True})
            return RunOutcome(status, name, run_id, counts, error=why,
                              logs_indexed=ctx.logs_indexed, reason=reason)

    def _idle_reason(self, strategy: Strategy, settings: Mapping[str, Any],
                     counts: Mapping[str, int]) -> str | None:
        """:meth:`Strategy.idle_reason` of a run that did nothing (:func:`did_nothing`),
        else ``None``. Asking is a courtesy: a strategy that cannot tell leaves the run as
        it went (logged, ``None``)."""
        if not did_nothing(strategy, counts):
            return None
        try:
            return strategy.idle_reason(self.runtime, settings, counts)
        except Exception:
            log.warning("%s: cannot tell why the run had nothing to do", strategy.name,
                        exc_info=True)
            return None

    def _root_gone(self, run_id: str, name: str, attempt: int,
                   counts: dict[str, int] | None = None) -> RunOutcome:
        """A run whose root was moved or deleted under it: ``failed``, not retried (a retry
        would find nothing and pass for done), recorded in the run's own database, which
        moved with the root when its connection was open."""
        error = (f"the memory root {self.runtime.root} was moved or deleted during the run; "
                 "run it again where the root is now")
        log.warning("%s: run %s failed: %s", name, run_id, error)
        self._finish(run_id, FAILED, error, counts or {}, attempt)
        return RunOutcome(FAILED, name, run_id, dict(counts or {}), error=error)

    def _update_attempt(self, run_id: str, attempt: int, error: str) -> None:
        runs.set_attempt(self.runtime.db(), run_id, attempt, error)

    def _finish(self, run_id: str, status: str, error: str | None, counts: dict[str, int],
                attempt: int, reason: str | None = None) -> None:
        runs.finish(self.runtime.db(), run_id, status, error, counts, attempt, reason)

    # --- lifecycle ----------------------------------------------------------------------------

    def is_running(self, name: str) -> bool:
        with self._mutex:
            return name in self._active

    def outcome_of(self, run_id: str) -> RunOutcome | None:
        """The outcome of a run this engine finished, as its trigger would have answered had
        it waited (``reason`` and ``logs_indexed`` included), else ``None`` (not one of its
        latest :data:`KEPT_OUTCOMES`). ``trigger`` that stopped waiting (``timeout``) and then
        waits for the run in this process reads it here (``logs_indexed`` is not in the run
        record; ``reason`` is, since migration 0023)."""
        with self._mutex:
            return self._outcomes.get(run_id)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no run of this engine is in flight; False if ``timeout`` ran out."""
        with self._mutex:
            active = list(self._active.values())
        return all(run.done.wait(timeout) for run in active)

    def request_stop(self) -> None:
        """Ask running strategies to stop at their next safe point; refuse new runs."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def shutdown(self, timeout: float = 30.0) -> None:
        """Stop: running strategies get ``timeout`` seconds to reach a safe point; a run still
        going after that is recorded ``abandoned`` (its own journal makes that safe)."""
        self.request_stop()
        with self._mutex:
            active = list(self._active.values())
        # the monotonic clock: local wall time jumps an hour at a DST change (the wait grew
        # by an hour at a fall-back, and ran out at once at a spring-forward)
        deadline = time.monotonic() + timeout
        for run in active:
            remaining = max(0.0, deadline - time.monotonic())
            if not run.done.wait(remaining):
                log.warning("run %s still going at shutdown: recorded as abandoned", run.run_id)
                self._abandon(run.run_id, "the daemon stopped before the run finished")

    def recover(self) -> list[str]:
        """Mark ``abandoned`` every ``running`` row whose process is gone; returns their ids.

        A root with no ``system.db`` has recorded no run: nothing is opened (opening creates
        an empty index, and ``trigger`` of a disabled or unknown strategy on a never-indexed
        root left one behind, which ``status`` took for the root's counts: "0 / 0")."""
        if not db_built(self.runtime.root):
            return []
        rows = runs.running(self.runtime.db())
        with self._mutex:
            mine = {a.run_id for a in self._active.values()}
        stale = []
        for run_id, pid, strategy in rows:
            dead = pid is None or not _pid_alive(pid) or (pid == os.getpid() and run_id not in
                                                         mine)
            reused = False
            if not dead and run_id not in mine:  # a live pid may be another's (reused)
                dead = reused = not run_lock_held(self.runtime.root, strategy)
            if dead:
                self._abandon(run_id, f"process {pid} ended before the run finished" + (
                    " (its pid is now another process's)" if reused else ""))
                stale.append(run_id)
        if stale:
            log.warning("marked %s abandoned: %s", counted(len(stale), "interrupted run"),
                        ", ".join(stale))
        return stale

    def _abandon(self, run_id: str, reason: str) -> None:
        runs.abandon(self.runtime.db(), run_id, reason)

    # --- reading the record -------------------------------------------------------------------

    def runs(self, limit: int = 20, strategy: str | None = None) -> list[dict[str, Any]]:
        return list_runs(self.runtime, limit=limit, strategy=strategy)

    def last_run(self, name: str) -> dict[str, Any] | None:
        found = list_runs(self.runtime, limit=1, strategy=name)
        return found[0] if found else None


def _digest(data: bytes | None) -> str:
    return "missing" if data is None else hashlib.sha256(data).hexdigest()


def counts_words(counts: Mapping[str, int]) -> str:
    """A run's counts as a person reads them, in the order the strategy gave them: ``3
    merged, 0 deferred sources, 1 failed`` (``nothing counted`` for none). The log said
    ``{'merged': 3, 'deferred_sources': 0}``, a Python dict."""
    return ", ".join(f"{value:,} {key.replace('_', ' ')}" for key, value in counts.items()) \
        or "nothing counted"


def _clean_counts(counts: object) -> dict[str, int]:
    if not counts:
        return {}
    if not isinstance(counts, dict):
        raise TypeError(f"run() must return a dict of counts, got {type(counts).__name__}")
    return {str(k): int(v) for k, v in counts.items()}


def list_runs(
    runtime: Runtime, *, limit: int = 20, strategy: str | None = None
) -> list[dict[str, Any]]:
    """The newest runs first (every attempt's final state). A row still ``running`` whose
    process is gone (killed, crashed: nothing could end its record) says so with
    ``process_gone: true``; the next engine start records it ``abandoned``
    (:meth:`Engine.recover`), and until then it read as a run in progress.

    A root with no ``system.db`` has recorded no run: answered without opening it, which would
    create an empty index that ``status`` then took for the root's counts ("0 / 0")."""
    if not db_built(runtime.root):
        return []
    rows = runs.newest(runtime.db(), limit=limit, strategy=strategy)
    for row in rows:
        if row.get("status") == "running" and _run_gone(runtime.root, row):
            row["process_gone"] = True
    return rows


def strategies_status(
    runtime: Runtime,
    engine: Engine | None = None,
    *,
    next_runs: dict[str, datetime | None] | None = None,
    now: datetime | None = None,
) -> list[dict[str, Any]]:
    """One row per known strategy: enabled, cron, next run, last run, config problem.

    Without a scheduler's ``next_runs`` the next run is computed from the cron (when enabled).
    """
    engine = engine or Engine(runtime, recover=False)
    now = now or datetime.now(UTC)
    try:
        config: dict[str, dict[str, Any]] | None = engine.config()
    except ConfigError:
        config = None
    # what the rows show: ome.toml as it reads now, the last good one a daemon keeps while
    # the file is invalid, or none (invalid, and no good one was ever loaded: nothing runs)
    in_force = ("none" if config is None else "last_good" if engine.config_error
                else "ome.toml")
    rows = []
    for name in known_strategies():
        strategy = get_strategy(name)
        settings = (config or {}).get(name, {})
        enabled = bool(settings.get("enabled", False))
        cron = settings.get("cron", strategy.default_cron)
        if next_runs is not None:
            nxt = next_runs.get(name)
        elif enabled and cron:
            nxt = CronTrigger(cron, runtime.settings.scheduler.timezone).next_fire(now)
        else:
            nxt = None
        last = engine.last_run(name)
        rows.append({
            "name": name,
            "description": strategy.description,
            "enabled": enabled,
            "cron": cron,
            "timezone": runtime.settings.scheduler.timezone,
            "next_run": nxt.isoformat() if nxt else None,
            "running": engine.is_running(name),
            "last_run": None if last is None else {
                k: last[k] for k in ("id", "status", "trigger", "started_at", "finished_at",
                                     "error", "counts")
            },
            "config_error": engine.config_error,
            "config_in_force": in_force,
            "unavailable": strategy.unavailable(runtime),
        })
    return rows
