"""``reindex`` and ``search``: rebuild the derived indexes, and query them."""

from __future__ import annotations

import time
from dataclasses import asdict, is_dataclass
from typing import Any

import click

from everos_reflect.cli.common import (
    OneOf,
    WholeRange,
    counted,
    emit_json,
    handle_errors,
    json_option,
    note_no_users,
    note_unknown_user,
    one_line,
    open_runtime,
    progress,
    root_option,
    say,
    settle_journal,
    shown,
    sync_for_read,
    writable_root,
)
from everos_reflect.errors import EverosError
from everos_reflect.index.search import MAX_PASSAGES_PER_ENTRY, MAX_TOP_K, PASSAGES_PER_ENTRY
from everos_reflect.index.sync import Indexer, ScanReport
from everos_reflect.lint import irregular_problems
from everos_reflect.model import UserRef, blank


def _print_problems(report: ScanReport) -> None:
    for path, problems in sorted(report.problems.items()):
        for problem in problems:
            say(f"  {one_line(problem)}", err=True)
        if not problems:
            say(f"  {one_line(path)}", err=True)


@click.command("reindex")
@root_option
@json_option
@handle_errors
def reindex_cmd(root: str | None, as_json: bool) -> None:
    """Rebuild every derived index (SQLite entries, vectors, clusters) from the Markdown."""
    writable_root(root)  # refused in one line, before anything is done
    rt = open_runtime(root)
    settle_journal(rt)
    indexer = Indexer(rt)
    irregular: list[str] = []
    total = sum(1 for _ in rt.store.iter_files(irregular=irregular))
    with progress("Reindexing", total) as advance:
        report = indexer.reindex(progress=advance, on_wait=lambda: say(
            "Waiting for the strategy runs in flight to finish before rebuilding ...",
            err=True))
    # a folder it may not open (or a FIFO where a log goes) holds logs no index has: said
    # here as `lint` says it, not left for `lint` to find
    for problem in irregular_problems(rt.root, irregular):
        if problem.severity != "warning":
            report.problems.setdefault(problem.file, []).append(
                f"{problem.file}: {problem.message}")  # the whole file: no line (was 0)
    if as_json:
        emit_json(report.as_dict())
        return
    say(
        f"Reindexed {counted(report.entries_upserted, 'entry')} from "
        f"{counted(report.files_synced, 'file')} "
        f"in {report.seconds:.1f} s ({report.entries_embedded} embedded"
        + (f" at {report.entries_embedded / report.seconds:.0f}/s" if report.seconds > 0 else "")
        + ")."
    )
    if report.problems:
        say(f"{counted(len(report.problems), 'file')} with problems:", err=True)
        _print_problems(report)


def _hit_dict(hit: Any) -> dict[str, Any]:
    if isinstance(hit, dict):
        return dict(hit)
    if hasattr(hit, "to_dict"):
        return dict(hit.to_dict())
    if is_dataclass(hit) and not isinstance(hit, type):
        return asdict(hit)
    raise TypeError(f"unexpected search hit {type(hit).__name__}")


def _folded(text: object) -> str:
    """``text`` on one line: how a snippet (line breaks folded) compares with its entry."""
    return " ".join(shown(text or "").split())


def _one_line(text: object, width: int) -> str:
    flat = _folded(text)
    return flat if len(flat) <= width else flat[: width - 1] + "…"


@click.command("search")
@click.argument("query")
@click.option("--user", "user_id", default=None, help="Only this user's memory.")
@click.option("--app", "app_id", default=None, help="Only this app (tenant).")
@click.option("--project", "project_id", default=None, help="Only this project (tenant).")
@click.option("--top-k", "top_k", type=WholeRange(1, MAX_TOP_K), default=5,
              show_default=True, help=f"Hits to return (1-{MAX_TOP_K}, as in the API).")
@click.option(
    "--mode",
    type=OneOf(["hybrid", "vector", "keyword"]),
    default=None,
    help="Ranking: vector + BM25 fused, vector only, or keyword only (default: config).",
)
@click.option("--include-deprecated", is_flag=True, help="Also return archived entries.")
@click.option("--kind", "kinds", multiple=True,
              type=OneOf(["episode", "atomic_fact", "insight", "conviction", "relation",
                                 "task", "lesson"]),
              help="Kinds to search (repeatable); default episode.")
@click.option("--include-stale", is_flag=True, help="Also return stale/retired derived records.")
@click.option("--passages-per-entry", "passages_per_entry",
              type=WholeRange(1, MAX_PASSAGES_PER_ENTRY), default=PASSAGES_PER_ENTRY,
              show_default=True,
              help="Items one entry may fill (further passages share its id); 1 = one hit "
                   "per entry. As in the API.")
@root_option
@json_option
@handle_errors
def search_cmd(
    query: str,
    user_id: str | None,
    app_id: str | None,
    project_id: str | None,
    top_k: int,
    mode: str | None,
    include_deprecated: bool,
    kinds: tuple[str, ...],
    include_stale: bool,
    passages_per_entry: int,
    root: str | None,
    as_json: bool,
) -> None:
    """Search Episodes (or other kinds with --kind); the index is first brought up to date
    with the Markdown."""
    from everos_reflect.index.search import search
    from everos_reflect.model import validate_name

    if blank(query):
        raise EverosError("query: must not be empty")  # as the API and `briefing` say it
    # before the sync: a refused search built or synced the index, then named the bad id
    for value, what in ((user_id, "user_id"), (app_id, "app_id"), (project_id, "project_id")):
        if value is not None:
            validate_name(value, what)
    rt = open_runtime(root)
    if user_id is not None:
        note_unknown_user(rt, UserRef.of(user_id, app_id, project_id))
    else:  # `--app acmee` said "No matching episodes." as if the app existed, as lessons did
        note_no_users(rt, app_id, project_id)
    started = time.perf_counter()
    behind = sync_for_read(rt)
    hits = [
        _hit_dict(h)
        for h in search(
            rt,
            query,
            top_k=top_k,
            user_id=user_id,
            app_id=app_id,
            project_id=project_id,
            mode=mode or rt.settings.index.search_mode,
            include_deprecated=include_deprecated,
            kinds=list(kinds) or None,
            include_stale=include_stale,
            passages_per_entry=passages_per_entry,
        )
    ]
    if as_json:
        emit_json({"episodes": hits, **behind})  # what POST /memory/search answers under data
        return
    if not hits:
        say("No matching episodes.")
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(show_lines=False, caption=f"{counted(len(hits), 'result')} in "
                  f"{(time.perf_counter() - started) * 1000:.0f} ms")
    table.add_column("score", justify="right")
    table.add_column("id")
    table.add_column("user")
    table.add_column("timestamp")
    table.add_column("subject / episode", overflow="fold")
    for hit in hits:
        subject = escape(_one_line(hit.get("subject"), 60))
        body = escape(_one_line(hit.get("episode"), 160))
        when = f"{hit.get('snippet_date')}: " if hit.get("snippet_date") else ""
        if hit.get("passage"):  # a further passage of an entry listed above: its text only
            body = (f"[italic]{escape(when + _one_line(hit.get('snippet'), 200))}[/italic]\n"
                    f"[dim](passage {int(hit['passage']) + 1} of this entry)[/dim]")
        elif hit.get("snippet") and _folded(hit.get("episode")) not in (
                _folded(hit.get("snippet")), _folded(when + str(hit.get("snippet")))):
            # a snippet that is the whole text (but for the day a dated line opens with,
            # which the snippet gives apart) is the text: shown once
            body = f"[italic]{escape(when + _one_line(hit.get('snippet'), 200))}[/italic]\n{body}"
        by = hit.get("deprecated_by")
        archived = f" [dim](archived → {escape(str(by))})[/dim]" if by else ""
        table.add_row(
            f"{float(hit.get('score') or 0):.3f}",
            str(hit.get("id")),
            str(hit.get("user_id") or ""),
            str(hit.get("timestamp") or "")[:19],
            f"[bold]{subject}[/bold]{archived}\n{body}",
        )
    Console().print(table)


COMMANDS: list[click.Command] = [reindex_cmd, search_cmd]
