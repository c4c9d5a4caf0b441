"""``everos-reflect fleet run|serve|status``: many memory roots, one Ray cluster."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from everos_reflect.cli.common import (
    configure_logging,
    counted,
    emit_json,
    fail,
    handle_errors,
    json_option,
    ome_invalid,
    one_line,
    problem_cell,
    say,
)
from everos_reflect.cli.engine_cmds import TRIGGER_EXIT_CODES

if TYPE_CHECKING:
    from everos_reflect.fleet.work import RootResult

fleet_option = click.option(
    "--fleet", "fleet_file", default=None, type=click.Path(dir_okay=False, path_type=str),
    help="The fleet.toml listing the roots and the Ray address.")
#: ``--root``, as every command takes it (SPEC §8): here a fleet's roots, given repeatedly.
roots_option = click.option(
    "--root", "roots", multiple=True, type=click.Path(file_okay=False, path_type=str),
    help="A memory root of the fleet; repeat for several. With --fleet: only these of its "
         "roots. Without: these roots alone, on a local Ray with no [strategies] defaults. "
         "Neither: the one root of $EVEROS_ROOT, else ~/.everos.")


@click.group("fleet")
def fleet_group() -> None:
    """Many memory roots run on a Ray cluster (needs: pip install 'everos-reflect[ray]').

    The roots are those of --fleet FILE, or the --root paths (repeat --root for each)."""


def _status_line(result: RootResult, done: int, total: int) -> str:
    tail = f" merged={result.merges}" if result.merges else ""
    tail += f" ({result.seconds:.1f} s)" if result.seconds else ""
    tail += f": {result.error}" if result.error and result.status != "idle" else ""
    return f"[{done}/{total}] {result.root}: {result.status}{tail}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    """Plain aligned columns; the last one is left unpadded (errors can be long). Paths stay
    whole on one line, so the table reads the same in a terminal, a pipe or a log."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    return ["  ".join([c.ljust(w) for c, w in zip(r, widths, strict=False)] + [r[-1]]).rstrip()
            for r in [header, *rows]]


def _render_report(doc: dict[str, Any]) -> None:
    rows = [[r["root"], r["status"], str(r["merges"]),
             f"{r['seconds']:.1f}" if r["seconds"] else "-", r["error"] or ""]
            for r in doc["results"]]
    for line in _table(["root", "status", "merges", "duration s", "error"], rows):
        click.echo(one_line(line))
    counts = ", ".join(f"{n} {s}" for s, n in sorted(doc["counts"].items()))
    click.echo(f"{doc['strategy']}: {doc['roots']} roots, {doc['tasks']} Ray tasks, "
               f"{doc['merges']} merges in {doc['seconds']:.1f} s ({counts})")


@fleet_group.command("run")
@click.argument("strategy")
@fleet_option
@roots_option
@click.option("--force", is_flag=True, help="Run even where the strategy is disabled.")
@json_option
@handle_errors
def fleet_run_cmd(strategy: str, fleet_file: str | None, roots: tuple[str, ...], force: bool,
                  as_json: bool) -> None:
    """Run STRATEGY once on every root of the fleet that has work, one Ray task per root.

    Exit status 1 when any root failed, ended partial (some of its work failed) or was
    already running elsewhere; 4 when STRATEGY is disabled in every root (nothing ran), as
    trigger exits 4 for a disabled strategy.
    """
    from everos_reflect.fleet.config import fleet_for
    from everos_reflect.fleet.ray_backend import check_ray, run_fleet

    check_ray()
    config, paths = fleet_for(fleet_file, roots)
    tty = sys.stderr.isatty()

    def progress(result: RootResult, done: int, total: int) -> None:
        if tty:  # progress on a terminal only; the table says it all otherwise
            click.echo(one_line(_status_line(result, done, total)), err=True)

    report = run_fleet(config, paths, strategy, force=force, on_result=progress)
    doc = report.as_dict()
    if as_json:
        emit_json(doc)
    else:
        _render_report(doc)
    if report.all_disabled:
        if not as_json:  # the JSON document says it (ok false, error): stdout holds one
            click.echo(f"error: {report.error}", err=True)
        sys.exit(TRIGGER_EXIT_CODES["disabled"])
    if not report.ok:
        sys.exit(1)


@fleet_group.command("serve")
@fleet_option
@roots_option
@handle_errors
def fleet_serve_cmd(fleet_file: str | None, roots: tuple[str, ...]) -> None:
    """One scheduler for the whole fleet: submit each root's due runs to Ray, until
    SIGTERM/Ctrl-C. Each root's schedule is its ome.toml over the fleet's [strategies]."""
    from everos_reflect.fleet.config import fleet_for
    from everos_reflect.fleet.ray_backend import check_ray
    from everos_reflect.fleet.schedule import serve_fleet

    check_ray()
    configure_logging()
    config, paths = fleet_for(fleet_file, roots)
    serve_fleet(config, paths)


@fleet_group.command("status")
@fleet_option
@roots_option
@json_option
@handle_errors
def fleet_status_cmd(fleet_file: str | None, roots: tuple[str, ...], as_json: bool) -> None:
    """Every root: each strategy's last and next run, and how far its index lags.

    Exit status 1 when some root could not be read (its error says why) or its ome.toml is
    invalid (no strategy runs there), also with --json: a script checks the exit status, as
    with lint."""
    from everos_reflect.fleet.config import fleet_for
    from everos_reflect.fleet.work import root_status

    config, paths = fleet_for(fleet_file, roots)
    docs = [root_status(str(r), config.strategies) for r in paths]
    problems = []
    if any("error" in d for d in docs):
        problems.append("some roots could not be read (see above)")
    invalid = sum(_nothing_runs(d) for d in docs)
    if invalid:
        problems.append(f"the ome.toml of {counted(invalid, 'root')} is invalid (see above): "
                        "no strategy runs there until it is fixed")
    if as_json:
        emit_json({"fleet": config.file if fleet_file is not None else None, "roots": docs})
        if problems:
            sys.exit(1)
        return
    _render_status(docs)
    for line in problems[:-1]:
        say(f"error: {line}", err=True)
    if problems:
        fail(problems[-1])


def _lag_text(index: dict[str, Any] | None) -> str:
    if index is None:
        return "not indexed"
    if "error" in index:
        return f"error: {index['error']}"
    behind = index["files_changed"] + index["files_deleted"]
    if not behind:
        return "up to date"
    if index["lag_seconds"] is None:  # deleted logs only: no change time to count from
        return counted(behind, "log")
    return f"{counted(behind, 'log')}, {index['lag_seconds']:.0f} s"


def _nothing_runs(doc: dict[str, Any]) -> bool:
    """Whether a root's ``ome.toml`` is invalid and no good one is in force: every strategy
    there reads "disabled", yet none was turned off."""
    config = doc.get("config") or {}
    return bool(config.get("strategies_error")) and config.get("in_force") == "none"


def _config_line(doc: dict[str, Any]) -> str | None:
    """What the table says under a root of its ``ome.toml`` that is invalid, else ``None``."""
    said = (doc.get("config") or {}).get("strategies_error")
    if not said:
        return None
    if _nothing_runs(doc):
        return (f"{ome_invalid(said)}; no strategy runs on this root until it is "
                "fixed (a `fleet serve` started now would run none)")
    return ome_invalid(said)


def _render_status(docs: list[dict[str, Any]]) -> None:
    rows = []
    notes: dict[str, int] = {}  # a long problem's text → its number, printed once below
    for doc in docs:
        if "error" in doc and not doc["strategies"]:
            rows.append([doc["root"], "-", "-", "-", "-", f"error: {doc['error']}"])
            continue
        for i, row in enumerate(doc["strategies"]):
            last = row.get("last_run") or {}
            last_text = (f"{last.get('status')} {(last.get('started_at') or '')[:19]}"
                         if last else "never")
            # an invalid ome.toml: nothing runs, not because each strategy was turned off
            state = ("ome.toml invalid" if _nothing_runs(doc)
                     else "enabled" if row["enabled"] else "disabled")
            if row.get("unavailable") and not _nothing_runs(doc):
                # as `status` says it: "enabled" alone read as "runs here", where a tier
                # that needs an LLM writes nothing on a root with the offline provider
                state += f" ({problem_cell(str(row['unavailable']), notes)})"
            rows.append([doc["root"] if i == 0 else "", row["name"], state, last_text,
                         str(row["next_run"] or "-")[:19],
                         _lag_text(doc["index"]) if i == 0 else ""])
            line = _config_line(doc) if i == 0 else None
            if line:
                rows.append(["", "", "", "", "", line])
    for line in _table(["root", "strategy", "state", "last run", "next run", "index lag"],
                       rows):
        click.echo(one_line(line))
    for text, number in notes.items():
        click.echo(one_line(f"[{number}] {text}"))


COMMANDS: list[click.Command] = [fleet_group]
