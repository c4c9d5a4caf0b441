"""Engine commands: ``serve``, ``trigger``, ``runs``, ``strategies``, ``settings``."""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

import click

from everos_reflect.cli.common import (
    HostName,
    OneLineStderr,
    SecondsRange,
    WholeRange,
    configure_logging,
    counted,
    emit_json,
    existing_root,
    fail,
    fleet_defaults,
    fleet_defaults_option,
    handle_errors,
    json_option,
    ome_invalid,
    open_runtime,
    root_option,
    say,
)
from everos_reflect.model import MAX_LIST_LIMIT, MAX_TRIGGER_WAIT, empty_id, quoted
from everos_reflect.problem_words import lookalike

if TYPE_CHECKING:
    from everos_reflect.engine.engine import Engine, RunOutcome
    from everos_reflect.runtime import Runtime


@click.command("serve")
@root_option
@click.option("--host", type=HostName(), default=None,
              help="Bind address (default: [server] host, 127.0.0.1).")
# Not 0 ("any free port"), as [server] port may not be: daemon.json and the log then said
# port 0, and `trigger` could not reach the daemon and ran in-process beside it.
@click.option("--port", type=WholeRange(1, 65535), default=None,
              help="Port (default: [server] port, 8000).")
@handle_errors
def serve_cmd(root: str | None, host: str | None, port: int | None) -> None:
    """Run the daemon: index watcher, strategy scheduler and HTTP API, until SIGTERM/Ctrl-C."""
    from everos_reflect.serve import serve

    configure_logging()
    serve(open_runtime(root), host=host, port=port)


#: ``trigger``'s exit code per outcome (documented in the README).
TRIGGER_EXIT_CODES = {"ok": 0, "failed": 1, "busy": 1, "partial": 3, "disabled": 4, "timeout": 5}


@click.command("trigger")
@click.argument("name")
@root_option
@click.option("--force", is_flag=True, help="Run even if the strategy is disabled.")
@click.option("--timeout", type=SecondsRange(0, MAX_TRIGGER_WAIT), default=120.0, show_default=True,
              help="Seconds to wait for the run.")
@fleet_defaults_option
@json_option
@handle_errors
def trigger_cmd(root: str | None, name: str, force: bool, timeout: float,
                fleet_file: str | None, as_json: bool) -> None:
    """Run strategy NAME now: through the daemon serving the root, else in this process.

    With --fleet, always in this process with the fleet's settings, as a fleet's run of the
    root (a daemon serving the root reads its ome.toml alone).

    Exit codes: 0 ok; 1 failed (every unit failed, the run raised) or busy; 3 partial (some
    units failed, or a run limit stopped it between units); 4 disabled (use --force); 5 timed
    out waiting (the daemon's run goes on).
    """
    from everos_reflect.engine.daemon import trigger_via_daemon
    from everos_reflect.engine.engine import Engine
    from everos_reflect.engine.registry import get_strategy

    runtime = open_runtime(root)
    # an unknown name is refused before a daemon is looked for: with one that could not be
    # reached, it said "could not be reached; running in-process", then "unknown strategy"
    get_strategy(name)
    if fleet_file is not None:
        # A fleet's runs lay its defaults under the root's ome.toml and run where they are
        # sent, never through a root's daemon, which would run the root's ome.toml alone.
        runtime.ome_defaults = fleet_defaults(runtime.root, fleet_file)
        outcome = None
    else:
        outcome = trigger_via_daemon(runtime, name, force=force, timeout=timeout)
    via = "daemon"
    if outcome is None:
        via = "in-process"
        outcome = _in_process(runtime, Engine(runtime), name, force, timeout)
    if as_json:
        emit_json({**outcome.to_dict(), "via": via})
    else:
        say(outcome_line(outcome, via))
        if outcome.error:
            say(f"  {outcome.error}", err=True)
    if via == "daemon":
        # the daemon keeps its last good ome.toml while the file is invalid: the run (or the
        # refusal of a disabled one) followed that, not the file as it reads now
        problem = Engine(runtime, recover=False).config_problem()
        if problem is not None:
            say(f"note: {ome_invalid(problem)}; the daemon went by its last good "
                "configuration", err=True)
    code = TRIGGER_EXIT_CODES.get(outcome.status, 1)
    if code:
        sys.exit(code)


class RunLog(OneLineStderr):
    """The log of a run ``trigger`` makes in this process, as Python's last-resort handler
    printed it (WARNING and up, the message alone, on stderr), less what the outcome it prints
    says again. The run's closing record (its status, counts and why) is left out, and each
    warning of the strategy's own logger is held until the run ends, then printed only when
    the outcome's reason does not carry all it says (every value it quotes): one failed cluster
    printed its reason three times, as the strategy's warning, as the engine's closing record
    and as the outcome's reason. A warning the reason cuts short, or one past the failures it
    names, is still printed."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.held: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        from everos_reflect.engine.engine import RUN_SUMMARY

        if getattr(record, RUN_SUMMARY, False):
            return
        if record.name.startswith("everos_reflect.strategy."):
            self.held.append(record)
            return
        super().emit(record)

    def print_held(self, error: str | None) -> None:
        """Print the held warnings whose values ``error`` (the outcome's reason) does not
        all quote."""
        held, self.held = self.held, []
        for record in held:
            args = record.args if isinstance(record.args, tuple) else (record.args,)
            if not (error and args and all(str(arg) in error for arg in args)):
                super().emit(record)


def _in_process(runtime: Runtime, engine: Engine, name: str, force: bool,
                timeout: float) -> RunOutcome:
    """Run ``name`` in this process (:meth:`Engine.trigger`), its log printed through
    :class:`RunLog`; a run that outlives ``timeout`` is waited for (leaving now would kill it
    half-way), then reported."""
    handler = RunLog()
    logger = logging.getLogger("everos_reflect")
    logger.addHandler(handler)
    outcome = None
    try:
        outcome = engine.trigger(name, force=force, timeout=timeout, trigger="manual")
        if outcome.status == "timeout":
            say("the run goes on in this process; waiting for it to finish", err=True)
            try:
                engine.wait_idle()
            except KeyboardInterrupt:
                engine.shutdown(timeout=30)
                handler.print_held(None)
                fail("interrupted; the run was asked to stop", 130)
            outcome = engine.outcome_of(outcome.run_id or "") or _finished(runtime, outcome)
    finally:
        logger.removeHandler(handler)
        handler.print_held(outcome.error if outcome is not None else None)
    return outcome


def outcome_line(outcome: RunOutcome, via: str) -> str:
    """``trigger``'s one line: status, run, counts. A run that went fine and changed nothing
    says "nothing to do": a bare "ok" after a first ``trigger`` on a new root (no cluster had
    two members yet) read as if something had happened. One whose only work was its
    catch-up sync says so ("indexed 2 logs, nothing else to do"): "nothing to do" hid that
    it had indexed new or changed logs. Either says why when the strategy can tell
    (:attr:`RunOutcome.reason`: "nothing to do: no new Episodes since the last run")."""
    counts = ", ".join(f"{k}={v}" for k, v in outcome.counts.items())
    note = ""
    if outcome.status == "timeout" and outcome.run_id:  # exit 5 alone read as a failure
        note = " — still running; `everos-reflect runs` shows how it ends"
    elif outcome.status == "ok" and (outcome.reason or not any(outcome.counts.values())):
        why = f": {outcome.reason}" if outcome.reason else ""
        note = (f" — indexed {counted(outcome.logs_indexed, 'log')}, nothing else to do{why}"
                if outcome.logs_indexed else f" — nothing to do{why}")
    return (f"{outcome.name}: {outcome.status}"
            + (f" (run {outcome.run_id})" if outcome.run_id else "")
            + (" — it was already running; waited for that run" if outcome.joined else "")
            + (f" {counts}" if counts else "") + note + f" [{via}]")


def _finished(runtime: Runtime, outcome: RunOutcome) -> RunOutcome:
    """The outcome of a run that outlived the trigger's wait, from its run record."""
    from dataclasses import replace

    from everos_reflect.index import runs

    row = runs.get(runtime.db(), outcome.run_id) if outcome.run_id else None
    if row is None:
        return outcome
    return replace(outcome, status=row["status"], error=row["error"], counts=row["counts"],
                   reason=row.get("reason"))


@click.command("runs")
@root_option
@click.option("--limit", type=WholeRange(1, MAX_LIST_LIMIT), default=20, show_default=True,
              help="How many runs to show.")
@json_option
@handle_errors
def runs_cmd(root: str | None, limit: int, as_json: bool) -> None:
    """Recent strategy runs, newest first."""
    from everos_reflect.engine.engine import list_runs

    runtime = open_runtime(root)
    try:
        rows = list_runs(runtime, limit=limit)
    finally:
        runtime.close()  # closed last, its connection takes away system.db-wal and -shm
    if as_json:  # what GET /api/v1/ome/runs answers under "data" (a bare list before)
        emit_json({"runs": rows})
        return
    if not rows:
        say("no runs yet")
    for r in rows:
        counts = ", ".join(f"{k}={v}" for k, v in (r["counts"] or {}).items())
        line = (f"{r['started_at'][:19]}  {r['strategy']:<20} {r['trigger']:<15} "
                f"{r['status']:<9} {r['id']}")
        if r["attempt"] > 1:
            line += f" attempt {r['attempt']}"
        if r.get("process_gone"):
            line += (f"  (its process {r.get('pid')} is gone: recorded abandoned at the next "
                     "start)")
        say(line + (f"  {counts}" if counts else ""))
        if r["error"]:
            say(f"    {r['error']}")
        if r.get("reason"):  # why a run that went fine had nothing to do
            say(f"    nothing to do: {r['reason']}")


@click.command("strategies")
@root_option
@fleet_defaults_option
@json_option
@handle_errors
def strategies_cmd(root: str | None, fleet_file: str | None, as_json: bool) -> None:
    """Each strategy: enabled, schedule, next run, last run.

    With a daemon serving the root, what the daemon runs (it keeps its last good ome.toml
    while the file is invalid); else what ome.toml says. Exit 1 when ome.toml is invalid and
    no good configuration is in force (no strategy runs until it is fixed)."""
    runtime = open_runtime(root)
    try:
        runtime.ome_defaults = fleet_defaults(runtime.root, fleet_file)  # as the fleet's runs
        rows, notes, error = strategy_rows(runtime, asked=fleet_file is None)
    finally:
        runtime.close()
    if as_json:
        from everos_reflect.status import strategies_document

        emit_json(strategies_document(rows))
    else:
        _say_strategies(rows)
    for note in notes:
        say(note, err=True)
    if error:
        fail(error)


def strategy_rows(runtime: Runtime, *, asked: bool = True,
                  ) -> tuple[list[dict[str, Any]], list[str], str | None]:
    """The strategy rows ``strategies`` and ``status`` show, the notes to print of them, and
    the error (exit 1) their configuration is: ome.toml invalid and no good one in force.

    ``asked``: a daemon serving the root is asked what it runs (not with ``--fleet``: the
    daemon reads the root's ome.toml alone). It keeps running, data-triggered and on
    schedule, on its last good ``ome.toml`` while the file is invalid: read here, the file
    showed every strategy off, which was not what ran. Each row says where it comes from
    (``via``: ``daemon`` or ``in-process``, as ``trigger`` says)."""
    from everos_reflect.engine.daemon import strategies_via_daemon
    from everos_reflect.engine.engine import strategies_status

    daemon = strategies_via_daemon(runtime) if asked else None
    notes: list[str] = []
    if daemon is not None and daemon.rows is not None:
        rows = [{**row, "via": "daemon"} for row in daemon.rows]
    else:
        if daemon is not None:
            notes.append(f"note: the daemon (pid {daemon.pid}) serving this root could not be "
                         f"asked what it runs: {daemon.problem}; shown as ome.toml reads now")
        rows = [{**row, "via": "in-process"} for row in strategies_status(runtime)]
    error = next((str(r["config_error"]) for r in rows if r.get("config_error")), None)
    if error is None:
        return rows, notes, None
    kept = any(r.get("config_in_force", "last_good") == "last_good" for r in rows)
    if daemon is not None and daemon.rows is not None and kept:
        notes.append(f"note: {ome_invalid(error)}; the daemon (pid {daemon.pid}) runs "
                     "on its last good configuration, shown here, until it is fixed")
        return rows, notes, None
    running = (f"the daemon (pid {daemon.pid}) runs" if daemon is not None
               and daemon.rows is not None else "a daemon started now would run")
    return rows, notes, (f"{ome_invalid(error)}; no strategy runs until it is fixed "
                         f"({running} none; every strategy is shown off)")


def _say_strategies(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        state = "enabled" if r["enabled"] else "disabled"
        say(f"{r['name']}: {state}, cron {r['cron'] or '-'} ({r['timezone']}), "
                   f"next run {r['next_run'] or '-'}")
        if r.get("unavailable"):
            say(f"  {r['unavailable']}")
        last = r["last_run"]
        if last:
            say(f"  last run {last['id']}: {last['status']} ({last['trigger']}, "
                       f"{last['started_at'][:19]})")


def setting_rows(name: str, in_force: dict[str, Any]) -> list[dict[str, Any]]:
    """Each key strategy ``name`` takes in ``ome.toml``: what it takes, its default, its value
    in force (``in_force``, else the default) and what it is for."""
    from everos_reflect.engine.registry import get_strategy
    from everos_reflect.settings import expected_type

    return [{"key": key, "takes": expected_type(spec.type), "default": spec.default,
             "value": in_force.get(key, spec.default), "help": spec.help}
            for key, spec in get_strategy(name).all_settings().items()]


@click.command("settings")
@click.argument("name", required=False)
@root_option
@json_option
@handle_errors
def settings_cmd(root: str | None, name: str | None, as_json: bool) -> None:
    """The keys of everos.toml's sections and of each strategy in ome.toml (or of section or
    strategy NAME): the value in force for this root, where it comes from, the default, and
    what each is for."""
    from everos_reflect.engine.engine import Engine
    from everos_reflect.engine.registry import get_strategy, known_strategies
    from everos_reflect.errors import ConfigError, UnknownStrategy
    from everos_reflect.settings import SECTIONS
    from everos_reflect.settings import setting_rows as section_rows

    sections = list(SECTIONS) if name is None else [name] if name in SECTIONS else []
    if name is None:
        names = known_strategies()
    elif sections:
        names = []
    else:
        try:
            names = [get_strategy(name).name]
        except UnknownStrategy:
            listed = (f"everos.toml sections: {', '.join(SECTIONS)}; strategies: "
                      f"{', '.join(known_strategies())}")
            raise UnknownStrategy(  # "no section or strategy ''" read as a misspelt name
                empty_id("section or strategy name", listed) if name == ""
                else f"no section or strategy {quoted(name)} ({listed})"
                + (f"; {note}" if (note := lookalike(name)) else "")) from None
    from everos_reflect.runtime import Runtime
    from everos_reflect.settings import Settings

    invalid = None
    try:
        runtime = open_runtime(root)
    except ConfigError as exc:  # everos.toml is what the person runs `settings` to fix: each
        # key is shown, the refused ones marked, and the exit is non-zero (it refused to run)
        invalid = str(exc)
        runtime = Runtime(existing_root(root), settings=Settings())
    note = None
    try:
        try:
            config: dict[str, dict[str, Any]] = (Engine(runtime, recover=False).config()
                                                 if names else {})
        except ConfigError as exc:  # the file is what the user is fixing: show the defaults
            config, note = {}, f"note: {ome_invalid(str(exc))}; the defaults are shown"
        by_section = {s: section_rows(runtime.root, s) for s in sections}
    finally:
        runtime.close()
    rows = {n: setting_rows(n, config.get(n, {})) for n in names}
    if as_json:
        emit_json({"sections": by_section, "strategies": rows}
                  | ({"error": invalid} if invalid is not None else {}))
    else:
        for section, keys in by_section.items():
            _say_rows(f"[{section}]  (everos.toml)", keys)
        for strategy, keys in rows.items():
            _say_rows(f"[strategies.{strategy}]", keys)
    if note:
        say(note, err=True)
    if invalid is not None:
        fail(f"{invalid} (each key refused is marked above, its default shown; every other "
             "command refuses to run until it is fixed)" if not as_json else invalid)


def _say_rows(title: str, keys: list[dict[str, Any]]) -> None:
    """One table of settings as ``ome.toml`` or ``everos.toml`` would hold it: each key's
    value in force, what it takes, the default when the value differs, where a value not the
    default comes from, and what it is for."""
    from everos_reflect.settings import toml_value

    def shown(value: Any, secret: bool = False) -> str:
        return "(not set)" if value is None else str(value) if secret else toml_value(value)

    say(title)
    for row in keys:
        told = [row["takes"]]
        if row["value"] != row["default"]:
            told.append(f"default {shown(row['default'])}")
        if row.get("from", "default") != "default":
            told.append(f"from {row['from']}")
        say(f"  {row['key']} = {shown(row['value'], row.get('secret', False))}  "
            f"({'; '.join(told)})")
        if row.get("problem"):
            say(f"      INVALID: {row['problem']} (the default is shown)")
        if row["help"]:
            say(f"      {row['help']}")
    say("")


COMMANDS: list[click.Command] = [serve_cmd, trigger_cmd, runs_cmd, strategies_cmd,
                                 settings_cmd]
