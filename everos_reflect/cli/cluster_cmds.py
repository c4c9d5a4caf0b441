"""``clusters`` (list the clusters) and ``recluster`` (rebuild them from the index)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click

from everos_reflect.cli.common import (
    emit_json,
    handle_errors,
    json_option,
    open_runtime,
    root_option,
    settle_journal,
)
from everos_reflect.model import UserRef, validate_name

if TYPE_CHECKING:
    pass

_user = click.option("--user", "user_id", default=None, help="Only this user.")
_app = click.option("--app", default=None, help="App id (default: every app, or default_app "
                    "with --user).")
_project = click.option("--project", default=None, help="Project id (default: every project, "
                        "or default_project with --user).")


def _day(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d")


@click.command("clusters")
@root_option
@_user
@_app
@_project
@json_option
@handle_errors
def clusters_cmd(root: str | None, user_id: str | None, app: str | None, project: str | None,
                 as_json: bool) -> None:
    """List clusters: size, span, preview, consolidated or not, new members since."""
    from everos_reflect.clustering.service import ClusterService

    runtime = open_runtime(root)
    ref = UserRef.of(user_id, app, project) if user_id else None
    if app is not None:
        validate_name(app, "app_id")
    if project is not None:
        validate_name(project, "project_id")
    infos = [
        c for c in ClusterService(runtime).clusters(ref)
        if (app is None or c.ref.app == app) and (project is None or c.ref.project == project)
    ]
    if as_json:
        emit_json({"clusters": [c.to_json() for c in infos]})
        return
    if not infos:
        click.echo("no clusters")
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(show_lines=False)
    for name in ("cluster", "user", "size", "span", "consolidated", "new", "preview"):
        table.add_column(name, justify="right" if name in ("size", "new") else "left",
                         no_wrap=name != "preview")
    for c in infos:
        span = _day(c.first_ts) if _day(c.first_ts) == _day(c.last_ts) else \
            f"{_day(c.first_ts)} → {_day(c.last_ts)}"
        table.add_row(c.cluster_id, str(c.ref), str(c.size), span,
                      c.consolidated_entry_id or "no",
                      str(c.new_since_consolidation) if c.consolidated else "-",
                      (c.preview[:60] + "…") if len(c.preview) > 60 else c.preview)
    Console().print(table)


@click.command("recluster")
@root_option
@_user
@_app
@_project
@json_option
@handle_errors
def recluster_cmd(root: str | None, user_id: str | None, app: str | None,
                  project: str | None, as_json: bool) -> None:
    """Rebuild clusters from the index (e.g. after changing the clustering settings)."""
    from everos_reflect.clustering.service import ClusterService

    runtime = open_runtime(root)
    settle_journal(runtime)
    ref = UserRef.of(user_id, app, project) if user_id else None
    counts = ClusterService(runtime).recluster(ref)
    if as_json:
        emit_json(counts)
        return
    click.echo(f"reclustered {counts['users']} user(s): {counts['clusters']} cluster(s), "
               f"{counts['members']} member(s)"
               + (f", {counts['skipped']} without a vector" if counts["skipped"] else ""))


COMMANDS: list[click.Command] = [clusters_cmd, recluster_cmd]
