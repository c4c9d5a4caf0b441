"""Strategies: what one is, where they are registered, and how their ``ome.toml`` table is checked.

A strategy is one module with one class deriving from :class:`Strategy`; adding it to the
engine is one line in :data:`STRATEGIES`. Modules are imported lazily, on first lookup, so a
strategy with heavy imports costs nothing to commands that never touch it.
"""

from __future__ import annotations

import importlib
import logging
import math
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from everos_reflect.engine.limits import DEFAULT_LIMITS, Budget, MeteredLLM
from everos_reflect.errors import ConfigError, UnknownStrategy
from everos_reflect.model import must_not_be_empty, quoted_value
from everos_reflect.problem_words import unknown, unknown_strategy
from everos_reflect.settings import (
    as_written,
    between,
    expected_type,
    shown_value,
    toml_got,
    toml_value,
    typed_float,
)

if TYPE_CHECKING:
    from everos_reflect.engine.triggers import DataTrigger
    from everos_reflect.runtime import Runtime

#: ``"module:Class"`` of every shipped strategy. One line per strategy.
STRATEGIES: tuple[str, ...] = (
    "everos_reflect.strategies.reflect:ReflectEpisodes",
    "everos_reflect.strategies.insights:ReflectInsights",
    "everos_reflect.strategies.revalidate:RevalidateInsights",
    "everos_reflect.strategies.worldview:UpdateWorldview",
    "everos_reflect.strategies.contradictions:DetectContradictions",
    "everos_reflect.strategies.reconcile:Reconcile",
    "everos_reflect.strategies.lessons:LearnLessons",
)


@dataclass(frozen=True)
class SettingSpec:
    """One key a strategy accepts in its ``[strategies.<name>]`` table.

    ``check(value)`` returns a reason when the (already type-checked) value is unacceptable,
    else ``None``; it may also raise ``ValueError`` with the reason.
    """

    name: str
    type: type
    default: Any
    help: str = ""
    check: Callable[[Any], str | None] | None = None


# Checks for SettingSpec, shared by every strategy's keys.

#: The largest whole number any strategy setting takes (a trillion: far past any count of
#: clusters, calls, records or tokens one run sees, so "no limit" is still writable). TOML
#: parsers accept integers of any size: ``max_clusters_per_run = 99999999999999999999`` was
#: valid, then a fleet's work estimate failed on SQLite's "Python int too large to convert
#: to SQLite INTEGER", naming no setting; a float key given 10**400 raised OverflowError out
#: of the validation itself.
MAX_SETTING_INT = 10**12


def duration_up_to(limit: int, words: str) -> Callable[[float], str | None]:
    """A wait or window from 0 to ``limit``. Larger values (``1e300``, ``inf``) are finite
    TOML or pass a ``>= 0`` check, then overflow ``timedelta``/datetime arithmetic or a
    thread wait where they are used: ``serve`` died at start-up on ``misfire_grace_hours``."""
    return between(0, limit, shown=f"between 0 and {limit:,} ({words})")


def positive_up_to(limit: int, words: str | None = None) -> Callable[[float], str | None]:
    """A number greater than 0, at most ``limit`` (``words`` says what the limit is). ``inf``
    or ``1e300`` was accepted: ``max_wall_seconds`` as "no limit", a value no clock reaches, a
    summed score as a threshold the strategy then never reached, nothing saying why."""
    return between(0, limit, words or "", above_low=True)


def count_between(low: int, high: int, why: str = "") -> Callable[[int], str | None]:
    """A whole number from ``low`` to ``high`` (``why``: what the upper bound stands for)."""
    return between(low, high, why)


#: A run limit (``max_llm_calls``, ``max_tokens``, ``max_records``): at least 1, and up to
#: :data:`MAX_SETTING_INT`, so "no limit" is still writable. "must be >= 1" named neither the
#: value refused nor how high the key goes.
run_limit = count_between(1, MAX_SETTING_INT)


#: The most ``max_retries`` a strategy takes, as ``[llm] max_retries`` and a fleet's take: a
#: failing run holds the strategy's lock through every wait between attempts (doubling up to
#: a day each), so 1,100, or 10**9, accepted before, kept the strategy from running for years.
MAX_RUN_RETRIES = 100


def _run_retries(value: int) -> str | None:
    return (None if 0 <= value <= MAX_RUN_RETRIES
            else f"must be 0 to {MAX_RUN_RETRIES}, got {shown_value(value)}")


def _cron_expr(value: str) -> str | None:
    from everos_reflect.engine.triggers import CronTrigger

    if not value.strip():  # "expected 5 fields ..., got 0" named a format where none was given
        return (f"invalid cron {quoted_value(value)}: "
                f"{must_not_be_empty('leave the key out for the default schedule')}")
    try:
        CronTrigger(value)
    except ValueError as exc:
        return str(exc)
    return None


#: Keys every strategy understands, in addition to its own. A strategy may redeclare one of
#: these (e.g. a different ``max_retries`` default); its own declaration then wins.
COMMON_SETTINGS: tuple[SettingSpec, ...] = (
    SettingSpec("enabled", bool, False, "Run this strategy on its schedule."),
    SettingSpec("cron", str, None, "Standard 5-field crontab expression.", _cron_expr),
    SettingSpec("max_retries", int, 0, "Extra attempts after a failed run.", _run_retries),
    SettingSpec(
        "retry_backoff_seconds", float, 60.0,
        "Wait before the first retry; doubles for each further one, up to a day.",
        duration_up_to(86_400, "a day"),
    ),
    SettingSpec("max_llm_calls", int, int(DEFAULT_LIMITS["max_llm_calls"]),
                "LLM calls per run; the run stops between units before passing it.",
                run_limit),
    SettingSpec("max_tokens", int, int(DEFAULT_LIMITS["max_tokens"]),
                "Prompt + completion tokens per run; the run stops between units once past it.",
                run_limit),
    SettingSpec("max_wall_seconds", float, DEFAULT_LIMITS["max_wall_seconds"],
                "Wall time per run; the run stops between units once past it.",
                positive_up_to(31_536_000, "a year")),
    SettingSpec("max_records", int, int(DEFAULT_LIMITS["max_records"]),
                "Input records a run consumes; it stops between units once past it.",
                run_limit),
    SettingSpec(
        "misfire_grace_hours", float, 6.0,
        "A scheduled run missed while the daemon was down (or its host asleep) runs once, "
        "at start-up (or on waking), if it is at most this old.",
        duration_up_to(8_760, "a year"),
    ),
)


@dataclass
class RunContext:
    """Everything a strategy's ``run`` may use. ``should_stop()`` turns True on shutdown:
    a strategy checks it between units of work (e.g. clusters) and returns early.

    ``budget`` holds the run limits (:mod:`engine.limits`); a strategy makes every LLM call
    through :attr:`llm`, which charges it, and checks :meth:`limit_reached` between units."""

    runtime: Runtime
    settings: dict[str, Any]
    run_id: str
    trigger: str
    force: bool = False
    should_stop: Callable[[], bool] = field(default=lambda: False)
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("everos_reflect"))
    budget: Budget = field(default=None)  # type: ignore[assignment]  # set in __post_init__
    #: The units that failed, each named with why (``"<owner>: <error>"``), in the order they
    #: failed: the engine names them in the run record's ``error``, which the counts alone
    #: cannot do (``failed=1`` does not say whose).
    failures: list[str] = field(default_factory=list)
    #: Logs the run's catch-up sync indexed before its work (new, changed or deleted since
    #: the last sync): work done even when nothing else was to do, which ``trigger`` says.
    logs_indexed: int = 0

    def __post_init__(self) -> None:
        if self.budget is None:
            self.budget = Budget.of(self.settings)

    @property
    def llm(self) -> MeteredLLM:
        """The runtime's LLM, charging this run's budget."""
        return MeteredLLM(self.runtime.llm, self.budget)

    def reserve_unit(self, calls: int) -> MeteredLLM | None:
        """For units run side by side (a pool): the LLM for one more unit that will make at
        most ``calls`` calls, promised up front so the units in flight together never pass
        ``max_llm_calls``; ``None`` when a limit forbids starting it. ``close()`` it when the
        unit is done."""
        if self.budget.reserve(calls) is not None:
            return None
        return MeteredLLM(self.runtime.llm, self.budget, reserved=calls)

    def limit_reached(self, *, calls_ahead: int = 0) -> str | None:
        """The run limit that forbids starting another unit of work (``None``: go on)."""
        return self.budget.exceeded(calls_ahead=calls_ahead)

    def note_failure(self, unit: str, error: str) -> None:
        """Name a failed unit (an owner, say) and why, for the run record."""
        self.failures.append(f"{unit}: {error}")


class Strategy:
    """Base of every strategy. Subclasses set the class attributes and implement :meth:`run`.

    ``settings`` lists only the strategy's own keys; ``enabled``, ``cron`` and the retry keys of
    :data:`COMMON_SETTINGS` come for free. ``data_trigger`` (optional) makes the scheduler run
    the strategy when :meth:`observe` reports enough new data.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    default_cron: ClassVar[str | None] = None
    settings: ClassVar[tuple[SettingSpec, ...] | list[SettingSpec]] = ()
    data_trigger: ClassVar[DataTrigger | None] = None
    #: Counts (keys of what :meth:`run` returns) of units that failed, and of every unit the
    #: run attempted. The engine records a run whose every unit failed as ``failed`` and one
    #: where some failed as ``partial`` (see :func:`judge_counts`). No ``unit_counts``: any
    #: failure makes the run ``partial`` (the engine cannot tell that every unit failed).
    failure_counts: ClassVar[tuple[str, ...]] = ("failed",)
    unit_counts: ClassVar[tuple[str, ...]] = ()
    #: Counts of units whose output a guard refused (a merge that lost facts, say). One such
    #: unit is handled as designed and retried later; a run where *no* unit succeeded because
    #: every answer was refused is ``failed``: the LLM is lying or broken, and the user must see
    #: it in the run record and the exit code, not a green run that did nothing.
    rejection_counts: ClassVar[tuple[str, ...]] = ()
    #: Counts a run reports without having done anything (a tier that needs an LLM): a run
    #: whose counts are these alone, or none, had nothing to do, and :meth:`idle_reason` is
    #: asked why.
    idle_counts: ClassVar[tuple[str, ...]] = ("needs_llm",)
    #: Counts of units the recovery before a run settled (interrupted work finished or
    #: withdrawn). Units for "every unit failed": a run that only recovered a merge, and could
    #: not settle one copy of it, read "failed: every unit failed". Not for the rejection
    #: rule: a run whose every answer was refused failed, whatever its recovery settled.
    recovery_counts: ClassVar[tuple[str, ...]] = ()

    def run(self, ctx: RunContext) -> dict[str, int]:
        """Do one run; return counts for the run record (e.g. ``{"merged": 3}``)."""
        raise NotImplementedError

    def recover(self, runtime: Runtime) -> dict[str, int]:
        """Finish or withdraw whatever of this strategy a crash interrupted; returns counts for
        the run record (e.g. ``{"recovered": 1}``). The engine calls it with the strategy's
        lock held: before every run, at ``serve`` start-up, and before a CLI command writes
        when :meth:`has_interrupted` says so. Must be idempotent and safe to interrupt: a
        crash during recovery is recovered the same way. Default: nothing to recover."""
        return {}

    def recover_for_run(self, ctx: RunContext) -> dict[str, int]:
        """:meth:`recover` as the engine calls it right before a run, with that run's
        context: what recovery could not settle can be named in the run record
        (:meth:`RunContext.note_failure`), not only counted. Default: :meth:`recover`."""
        return self.recover(ctx.runtime)

    def has_interrupted(self, root: Path) -> bool:
        """Cheap, read-only: whether :meth:`recover` has work a writing command must not run
        ahead of (asked before every CLI command that writes, without opening a runtime)."""
        return False

    def unavailable(self, runtime: Runtime) -> str | None:
        """Why this strategy cannot do its work in this installation (e.g. it needs an LLM and
        none is configured), shown by ``status``; ``None`` when it can."""
        return None

    def idle_reason(self, runtime: Runtime, settings: Mapping[str, Any],
                    counts: Mapping[str, int]) -> str | None:
        """Why a run that went fine had nothing to do (it returned ``counts``, all
        :attr:`idle_counts` or none): "no new Episodes since the last run", "below the
        threshold: …", "needs an LLM: …". ``trigger`` (CLI and API) says it after "nothing to
        do", which alone did not say whether to wait, add data or configure a provider.
        ``None``: not known (the default)."""
        return None

    def observe(self, runtime: Runtime, since: datetime | None,
                settings: Mapping[str, Any] | None = None) -> float:
        """The quantity ``data_trigger`` measures since ``since`` (only with a data trigger).

        ``settings``: the strategy's settings as the caller's engine holds them (a daemon keeps
        its last good ``ome.toml`` while the file is invalid); ``None``: read from the root's
        ``ome.toml`` now."""
        raise NotImplementedError(f"{self.name} declares no data trigger")

    def settings_problems(self, values: Mapping[str, Any], written: Collection[str],
                          inherited: Mapping[str, str] | None = None,
                          ) -> list[tuple[str, str]]:
        """``(key, reason)`` for settings that each pass their own check but cannot work
        together (a threshold no window reaches), checked once every key is valid.
        ``written``: the keys the file sets, so a reason names one the user wrote;
        ``inherited``: keys set elsewhere (the fleet's defaults), each with where
        (:func:`set_where` words a reason's other key)."""
        return []

    def all_settings(self) -> dict[str, SettingSpec]:
        """Common keys overlaid by the strategy's own, with ``cron`` defaulting to its cron."""
        specs = {s.name: s for s in COMMON_SETTINGS}
        specs["cron"] = SettingSpec(
            "cron", str, self.default_cron, specs["cron"].help, specs["cron"].check
        )
        specs.update({s.name: s for s in self.settings})
        return specs


def set_where(key: str, written: Collection[str],
              inherited: Mapping[str, str] | None = None) -> str:
    """Where ``key``'s value comes from, for a reason that names it beside the key it is
    about: the file itself (nothing to add), ``inherited[key]`` (the fleet's defaults), or the
    strategy's default. A pair refused with only the file's name sent a person looking there
    for a key the fleet's defaults set."""
    if key in written:
        return ""
    if inherited and key in inherited:
        return f", set in {inherited[key]}"
    return ", its default"


def did_nothing(strategy: Strategy, counts: Mapping[str, int]) -> bool:
    """Whether a run that returned ``counts`` did nothing: no count but the strategy's
    :attr:`~Strategy.idle_counts` is above zero."""
    return not any(v for k, v in counts.items() if k not in strategy.idle_counts)


def judge_counts(strategy: Strategy, counts: dict[str, int]) -> tuple[str, str | None]:
    """``("ok" | "partial" | "failed", why)`` of a run that returned ``counts``.

    Failure must look like failure: a run whose every unit failed (every cluster's LLM call
    answered 500, say) is ``failed``, not ``ok`` with a count nobody reads."""
    failed = sum(int(counts.get(k, 0)) for k in strategy.failure_counts)
    refused = sum(int(counts.get(k, 0)) for k in strategy.rejection_counts)
    units = sum(int(counts.get(k, 0)) for k in strategy.unit_counts)
    settled = sum(int(counts.get(k, 0)) for k in strategy.recovery_counts)
    if refused > 0 and strategy.unit_counts and failed + refused >= units:
        detail = ", ".join(f"{k}={counts[k]}" for k in
                           (*strategy.failure_counts, *strategy.rejection_counts) if counts.get(k))
        return "failed", f"no unit succeeded: every one failed or was rejected ({detail})"
    if failed <= 0:
        return "ok", None
    detail = ", ".join(f"{k}={counts[k]}" for k in strategy.failure_counts if counts.get(k))
    if strategy.unit_counts and failed >= units + settled:
        return "failed", f"every unit failed ({detail})"
    of = f" of {units + settled}" if strategy.unit_counts else ""
    return "partial", f"{failed}{of} units failed ({detail})"


#: The most failed units a run record's ``error`` names (the audit rows name every one).
FAILURES_NAMED = 5
#: The most characters of one failure's reason the run record's ``error`` quotes.
FAILURE_CHARS = 200


def name_failures(failures: list[str]) -> str:
    """The failed units of a run, for its record's ``error``: at most
    :data:`FAILURES_NAMED`, each on one line (an exception's message may span several: a
    YAML error quotes the record) and cut to :data:`FAILURE_CHARS` characters."""
    flat = [" ".join(f.split()) for f in failures[:FAILURES_NAMED]]
    named = [f if len(f) <= FAILURE_CHARS else f[: FAILURE_CHARS - 1] + "…" for f in flat]
    more = len(failures) - len(named)
    return "failed: " + "; ".join(named) + (f"; and {more} more" if more else "")


_lock = threading.Lock()
_extra: dict[str, str | Strategy] = {}  # added at run time (tests, plugins): name or path
_by_path: dict[str, Strategy | None] = {}  # imported paths; None = module not installed


def register(target: Strategy | type[Strategy] | str) -> Strategy | None:
    """Add a strategy at run time: an instance, a class, or a ``"module:Class"`` path.

    Returns the instance (``None`` for a path, which stays lazy). Registering a name again
    replaces the earlier strategy.
    """
    with _lock:
        if isinstance(target, str):
            _extra[target] = target
            return None
        strategy = target() if isinstance(target, type) else target
        if not strategy.name:
            raise ValueError(f"{type(strategy).__name__} has no name")
        _extra[strategy.name] = strategy
        return strategy


def unregister(name: str) -> None:
    """Forget a strategy added with :func:`register` (tests clean up with this)."""
    with _lock:
        _extra.pop(name, None)


def _load(path: str) -> Strategy | None:
    if path in _by_path:
        return _by_path[path]
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        # A listed module that is not installed is simply absent; an import error *inside*
        # the module is a real bug and propagates.
        if not (exc.name and module_name.startswith(exc.name)):
            raise
        return None  # not cached: it may land later in a long-lived process
    obj = getattr(module, attr)
    _by_path[path] = obj() if isinstance(obj, type) else obj
    return _by_path[path]


def _all() -> dict[str, Strategy]:
    with _lock:
        found: dict[str, Strategy] = {}
        for path in STRATEGIES:
            strategy = _load(path)
            if strategy is not None:
                found[strategy.name] = strategy
        for value in _extra.values():
            strategy = _load(value) if isinstance(value, str) else value
            if strategy is not None:
                found[strategy.name] = strategy
        return found


def known_strategies() -> list[str]:
    """Names of every strategy available in this installation, sorted."""
    return sorted(_all())


def get_strategy(name: str) -> Strategy:
    """The strategy registered as ``name``; :class:`UnknownStrategy` names the known ones."""
    strategies = _all()
    try:
        return strategies[name]
    except KeyError:
        raise UnknownStrategy(unknown_strategy(name, strategies)) from None


def _coerce(spec: SettingSpec, value: Any) -> tuple[Any, str | None]:
    """Type-check one value as TOML gives it; ints are accepted where floats are expected."""
    if value is None:
        return None, "must not be empty"
    if spec.type is not bool and isinstance(value, bool):
        return value, f"must be {expected_type(spec.type)}, got {toml_got(value)}"
    if spec.type in (int, float) and isinstance(value, int) and abs(value) > MAX_SETTING_INT:
        bound = f"at most {MAX_SETTING_INT:,}" if value > 0 else f"at least {-MAX_SETTING_INT:,}"
        return value, f"must be {bound}, got {shown_value(value)}"
    if spec.type is float and isinstance(value, int):
        value = typed_float(str(value))  # shown as typed when refused: 100001, not 100001.0
    if not isinstance(value, spec.type):
        return value, f"must be {expected_type(spec.type)}, got {toml_got(value)}"
    if spec.check is not None:
        try:
            reason = spec.check(value)
        except ValueError as exc:
            reason = str(exc)
        if reason:
            return value, as_written(reason, value)  # not "got inf" of a 1e400
    if spec.type is float and not math.isfinite(value):
        # TOML spells inf and nan, and a check comparing only one side passes them
        return value, f"must be a finite number, got {toml_value(value)}"
    if spec.type is float and abs(value) > MAX_SETTING_INT:
        # a key with no tighter bound of its own (a float written 1e300, not an integer)
        bound = f"at most {MAX_SETTING_INT:,}" if value > 0 else f"at least {-MAX_SETTING_INT:,}"
        return value, f"must be {bound}, got {shown_value(value)}"
    return value, None


def validate_strategy_settings(name: str, raw: Mapping[str, Any], file: str, *,
                               inherited: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Every key of ``name`` with defaults filled in; :class:`ConfigError` lists every problem.

    A problem names the file, the key as written in ``ome.toml`` and the reason.
    ``inherited``: the keys of ``raw`` that ``file`` does not set, each with where they come
    from (a fleet's defaults under a root's ``ome.toml``): a pair of keys that cannot work
    together is then named where each is set.
    """
    strategy = get_strategy(name)
    specs = strategy.all_settings()
    problems: list[tuple[str, str, str]] = []
    values = {key: spec.default for key, spec in specs.items()}
    for key, value in raw.items():
        where = f"strategies.{name}.{key}"
        spec = specs.get(key)
        if spec is None:
            # the one meant when it is close, else where every one is listed
            problems.append((file, where, unknown(
                "setting", str(key), specs, list_few=True,
                listed_by=f"{name} takes {len(specs)}: `everos-reflect settings {name}` lists "
                          "them")))
            continue
        value, reason = _coerce(spec, value)
        if reason:
            problems.append((file, where, reason))
        else:
            values[key] = value
    if not problems:
        written = [key for key in raw if key not in (inherited or {})]
        problems = [(file, f"strategies.{name}.{key}", reason) for key, reason
                    in strategy.settings_problems(values, written, inherited or {})]
    if problems:
        raise ConfigError(problems)
    return values


def validate_ome(tables: Mapping[str, Mapping[str, Any]], file: str, *,
                 inherited: Mapping[str, Mapping[str, str]] | None = None,
                 ) -> dict[str, dict[str, Any]]:
    """Validate a whole ``ome.toml`` (``{strategy: raw table}``); every strategy gets an entry.

    Problems across all strategies are reported together in one :class:`ConfigError`.
    ``inherited``: per strategy, the keys ``file`` does not set
    (:func:`validate_strategy_settings`).
    """
    known = set(known_strategies())
    problems: list[tuple[str, str, str]] = []
    for name in tables:
        if name not in known:
            problems.append((file, f"strategies.{name}", unknown("strategy", str(name), known,
                                                                     list_few=True)))
    config: dict[str, dict[str, Any]] = {}
    for name in sorted(known):
        raw = tables.get(name, {})
        if not isinstance(raw, Mapping):
            problems.append((file, f"strategies.{name}", f"must be a table, got {toml_got(raw)}"))
            continue
        try:
            config[name] = validate_strategy_settings(
                name, raw, file, inherited=(inherited or {}).get(name))
        except ConfigError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ConfigError(problems)
    return config
