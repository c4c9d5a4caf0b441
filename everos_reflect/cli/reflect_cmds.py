"""Reflection's commands: ``reports`` (the audit of every merge attempt) and ``provenance``
(which sources each sentence of a narrative stands for).

``undo`` and ``demo`` belong to this group too; each adds its command to :data:`COMMANDS`.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from everos_reflect.cli.common import (
    WholeRange,
    counted,
    emit_json,
    existing_root,
    handle_errors,
    json_option,
    open_runtime,
    root_option,
    say,
    shown,
)
from everos_reflect.model import MAX_LIST_LIMIT
from everos_reflect.runtime import Runtime


def list_reports(runtime: Runtime, limit: int = 20) -> list[dict[str, Any]]:
    """The newest ``reflection_report`` rows first, as the API lists them
    (:func:`~everos_reflect.index.audit.reflection_report_rows`). A root with no
    ``system.db`` (or an empty one) has no audit: it is not opened, which would leave an
    empty index behind."""
    from everos_reflect.index.audit import reflection_report_rows
    from everos_reflect.index.db import db_built

    if not db_built(runtime.root):
        return []
    return reflection_report_rows(runtime.db(), limit)


def _render(reports: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table("when (UTC)", "user", "cluster", "mode", "status", "sources", "merged into",
                  "facts -/+", "coverage", "by", "note",
                  title="Reflection reports (newest first)")
    for r in reports:
        coverage = "" if r["fact_coverage"] is None else f"{r['fact_coverage']:.2f}"
        by = "/".join(x for x in (r["provider"], r["model"]) if x)
        table.add_row(
            (r["created_at"] or "")[:19].replace("T", " "),
            r["owner_id"] if r["app_id"] == "default_app" and r["project_id"] ==
            "default_project" else f"{r['app_id']}/{r['project_id']}/{r['owner_id']}",
            r["cluster_id"], r["mode"], r["status"], str(r["source_count"]),
            r["merged_entry_id"] or "-",
            f"{r['deprecated_fact_count']}/{r['new_fact_count']}", coverage, Text(shown(by)),
            # plain text: an error quoting a provider ("[/response_format]") or naming a
            # setting ("[llm]") is not rich markup (it raised MarkupError, or was eaten);
            # nor may a provider's reply quoted there drive the terminal
            Text(shown("; ".join(x for x in (r["error"], r["damaged"]) if x))),
        )
    # Piped output keeps whole rows instead of wrapping at 80 columns.
    Console(width=None if sys.stdout.isatty() else 200).print(table)


@click.command("reports")
@root_option
@click.option("--limit", type=WholeRange(1, MAX_LIST_LIMIT), default=20, show_default=True,
              help="How many reports to show.")
@json_option
@handle_errors
def reports_cmd(root: str | None, limit: int, as_json: bool) -> None:
    """Reflection's audit: one row per merge attempt, newest first."""
    from everos_reflect.index.db import db_built
    from everos_reflect.index.reads import merged_narrative_count

    rt = open_runtime(root)
    try:
        reports = list_reports(rt, limit)
        merged = (merged_narrative_count(rt.db())
                  if not reports and not as_json and db_built(rt.root) else 0)
    finally:
        rt.close()
    if as_json:  # what GET /api/v1/ome/reports answers under "data" (a bare list before)
        emit_json({"reports": reports})
        return
    if not reports and merged:
        # the audit lives in system.db alone (SPEC §6): lost with .index/, never rebuilt
        say(f"No Reflection reports in the audit, though the logs hold "
            f"{counted(merged, 'merged narrative')}: the audit is kept in "
            ".index/sqlite/system.db only, which `reindex` keeps but a removed .index/ loses.")
        return
    if not reports:
        say("No Reflection reports yet: nothing has been merged in this root.")
        return
    _render(reports)


@click.command("provenance")
@click.argument("entry_id")
@click.option("--user", "user_id", required=True, help="User id.")
@click.option("--app", default=None, help="App id (default: default_app).")
@click.option("--project", default=None, help="Project id (default: default_project).")
@root_option
@json_option
@handle_errors
def provenance_cmd(entry_id: str, user_id: str, app: str | None, project: str | None,
                   root: str | None, as_json: bool) -> None:
    """Show which source Episodes each sentence of an entry (a narrative) stands for."""
    from everos_reflect.markdown.store import MarkdownStore
    from everos_reflect.model import UserRef
    from everos_reflect.provenance import edited_since_merge, provenance
    from everos_reflect.settings import load_settings

    ref = UserRef.of(user_id, app, project)
    path = existing_root(root)
    entry = MarkdownStore(path, limits=load_settings(path).limits).get(ref, entry_id)
    found = provenance(entry)
    if as_json:
        emit_json(found.to_dict())
        return
    if found.recorded:
        how = "recorded per sentence"
    elif edited_since_merge(entry):
        how = ("its Content was edited by hand after the merge: every sentence credited to "
               "all sources")
    elif entry.sources:
        how = "no valid per-sentence record: every sentence credited to all sources"
    else:  # an Episode as written (or a fact): no merge, so no sources to tell apart
        how = "not a merged narrative: it stands for itself"
    say(f"{entry.id} ({counted(len(found.sentences), 'sentence')}, {how})")
    for i, s in enumerate(found.sentences, 1):
        say(f"{i:>3}. {s.text}\n     <- {', '.join(s.sources)}")


COMMANDS: list[click.Command] = [reports_cmd, provenance_cmd]
