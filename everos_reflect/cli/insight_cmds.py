"""Insights at the command line: ``insights`` (the list) and ``explain ID`` (the citation tree)."""

from __future__ import annotations

from typing import Any

import click

from everos_reflect.cli.common import (
    WholeRange,
    app_filter_option,
    counted,
    emit_json,
    filtered_refs,
    handle_errors,
    json_option,
    open_runtime,
    project_filter_option,
    root_option,
    say,
)
from everos_reflect.errors import clipped
from everos_reflect.model import LIST_LIMIT, MAX_LIST_LIMIT, UserRef
from everos_reflect.problem_words import shown_number


def _user_options(fn: Any) -> Any:
    """``--app``/``--project`` of ``explain``, whose ``--user`` is required."""
    fn = click.option("--project", default=None,
                      help="Project id (default: default_project).")(fn)
    return click.option("--app", default=None, help="App id (default: default_app).")(fn)


def _filter_options(fn: Any) -> Any:
    """``--app``/``--project`` of ``insights``: without ``--user`` they filter every user."""
    return app_filter_option(project_filter_option(fn))


@click.command("insights")
@root_option
@click.option("--user", "user_id", default=None, help="User id (default: every user).")
@_filter_options
@click.option("--include-stale", is_flag=True, help="Also list stale and retired insights.")
@click.option("--limit", type=WholeRange(1, MAX_LIST_LIMIT), default=LIST_LIMIT, show_default=True,
              help="The most insights listed, newest first (as the API's ?limit=).")
@json_option
@handle_errors
def insights_cmd(root: str | None, user_id: str | None, app: str | None, project: str | None,
                 include_stale: bool, limit: int, as_json: bool) -> None:
    """List insights (seed 000) with their question, evidence and status, newest first."""
    from everos_reflect.strategies.insight_views import list_insights

    rt = open_runtime(root)
    refs = filtered_refs(rt, user_id, app, project)
    rows = [{"user_id": r.user_id, "app_id": r.app, "project_id": r.project, **item}
            for r in refs for item in list_insights(rt, r, include_stale=include_stale)]
    # newest first across users too (each user's list already is), so that --limit keeps the
    # newest rather than the first users' whole lists; it printed every insight, unbounded
    rows.sort(key=lambda item: _newest_first(item["timestamp"]))
    total, rows = len(rows), rows[:limit]
    if as_json:  # what GET /memory/insights answers under data, each row naming its user
        emit_json({"insights": rows, "total": total})
        return
    for item in rows:
        mark = "" if item["status"] == "active" else f"  [{item['status']}: " \
            f"{_one_clipped_line(item.get('stale_reason'))}]"
        say(f"{item['id']}  {item['user_id']}  depth {shown_number(item['depth'])}  "
            f"{(item['timestamp'] or '')[:10]}{mark}")
        # on one line, as `lessons` gives a lesson: a hand-written line of the text like
        # "in_20261013_0099  ada  depth 1  2026-10-13" was printed as a row of its own
        say(f"  {' '.join(str(item['text'] or '').split())}")
        if item.get("question"):
            say(f"  question: {_one_clipped_line(item['question'])}")
        shown = item["evidence"]  # the first ones, as `lessons` lists a lesson's
        more = item["evidence_count"] - len(shown)
        say(f"  evidence: {', '.join(shown) or '-'}" + (f" +{more} more" if more else ""))
    if total > len(rows):
        say(f"... {counted(total - len(rows), 'more insight')} not listed "
            f"(--limit, at most {MAX_LIST_LIMIT:,})")
    if not rows:
        say("No insights yet. reflect_insights writes them once enough important "
            "Episodes accumulate (`everos-reflect trigger reflect_insights --force`).")


def _one_clipped_line(value: object) -> str:
    """A metadata value a person may write (an insight's ``question``, ``stale_reason``) on
    the one line ``insights`` gives it, cut at 300 characters: a hand-written question of 300
    lines printed as 300 lines, and a 5,000-character reason whole inside the status mark."""
    return clipped(" ".join(str(value or "").split()))


def _newest_first(stamp: str | None) -> float:
    """Sort key: the later instant first (not the text: offsets differ), none last."""
    from datetime import datetime

    from everos_reflect.strategies.beliefs import instant

    return -instant(datetime.fromisoformat(stamp) if stamp else None)


@click.command("explain")
@click.argument("entry_id")
@root_option
@click.option("--user", "user_id", required=True, help="User id.")
@_user_options
@json_option
@handle_errors
def explain_cmd(entry_id: str, root: str | None, user_id: str, app: str | None,
                project: str | None, as_json: bool) -> None:
    """Show what ENTRY_ID rests on: its citation tree down to the Episodes, with dates."""
    from everos_reflect.markdown.parser import lookup_entry_id
    from everos_reflect.strategies.insight_views import explain, render_tree

    ref = UserRef.of(user_id, app, project)
    entry_id = lookup_entry_id(entry_id, ref)  # an impossible day: unknown, as at the API
    rt = open_runtime(root)
    tree = explain(rt, ref, entry_id)
    if as_json:
        emit_json(tree)  # what GET /memory/explain/{id} answers under data
        return
    for line in render_tree(tree):
        say(line)


COMMANDS = [insights_cmd, explain_cmd]
