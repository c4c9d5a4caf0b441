"""``clusters`` (list the clusters) and ``recluster`` (rebuild them from the index)."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click

from everos_reflect.cli.common import (
    app_filter_option,
    counted,
    emit_json,
    fleet_defaults,
    fleet_defaults_option,
    handle_errors,
    json_option,
    note_no_users,
    note_unknown_user,
    ome_invalid,
    open_runtime,
    project_filter_option,
    root_option,
    say,
    settle_journal,
    sync_for_read,
)
from everos_reflect.errors import IndexReadOnly
from everos_reflect.model import UserRef, validate_name

if TYPE_CHECKING:
    from everos_reflect.clustering.service import ClusterInfo, Member
    from everos_reflect.runtime import Runtime
    from everos_reflect.strategies.holdback import Held

_user = click.option("--user", "user_id", default=None, help="Only this user.")
_app = app_filter_option
_project = project_filter_option


def _day(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).date().isoformat()  # glibc strftime: year 5 is "5"


@click.command("clusters")
@root_option
@_user
@_app
@_project
@fleet_defaults_option
@json_option
@handle_errors
def clusters_cmd(root: str | None, user_id: str | None, app: str | None, project: str | None,
                 fleet_file: str | None, as_json: bool) -> None:
    """List clusters: size, span, preview, consolidated or not, new members since."""
    from everos_reflect.clustering.service import ClusterService

    runtime = open_runtime(root)
    runtime.ome_defaults = fleet_defaults(runtime.root, fleet_file)  # as the fleet's runs read
    ref = UserRef.of(user_id, app, project) if user_id is not None else None  # '' is refused
    if app is not None:
        validate_name(app, "app_id")
    if project is not None:
        validate_name(project, "project_id")
    if ref is not None:
        note_unknown_user(runtime, ref)
    else:
        note_no_users(runtime, app, project)
    _catch_up(runtime, required=False)
    service = ClusterService(runtime)
    infos = [
        c for c in service.clusters(ref)
        if (app is None or c.ref.app == app) and (project is None or c.ref.project == project)
    ]
    from everos_reflect.engine.engine import Engine
    from everos_reflect.strategies.holdback import HoldRules, held_back, reflect_settings
    from everos_reflect.strategies.setaside import set_aside_clusters

    # with the store: members are counted as the run's scan leaves them (one whose log
    # cannot be read is none, as in a reindex: only those members' logs are read); under the
    # run's own settings, so with remerge_undone = true no undo hold is shown
    engine = Engine(runtime, recover=False)
    problem = engine.config_problem()  # then the shipped settings are the ones shown
    rules = HoldRules.from_settings(reflect_settings(runtime, engine))
    held = {h.cluster_id: h for h in held_back(runtime.db(), ref, runtime.store, rules)}
    aside = {a.cluster_id: a.reason for a in set_aside_clusters(runtime, ref)}
    if problem is not None:  # the holds said nothing of it
        say(f"note: {ome_invalid(problem)}; clusters are held back as under the "
            "shipped reflect_episodes settings (a daemon runs on its last good ones)", err=True)
    if as_json:
        emit_json({"clusters": [
            {**c.to_json(), "held_back": c.cluster_id in held,
             "held_back_reason": _held_json(held.get(c.cluster_id)),
             "set_aside": c.cluster_id in aside, "set_aside_reason": aside.get(c.cluster_id),
             "members": [_member_json(m) for m in service.members(c.cluster_id)]}
            for c in infos]})
        return
    if not infos:
        say("no clusters")
        return
    width = shutil.get_terminal_size((80, 24)).columns
    for ref in sorted({c.ref for c in infos}):
        say(str(ref))
        for c in infos:
            if c.ref == ref:
                say(_lines(c, width, held=held.get(c.cluster_id),
                           aside=aside.get(c.cluster_id)))


def _held_json(held: Held | None) -> dict[str, Any] | None:
    """Why a cluster is held back: ``undone`` (nothing a merge could take joined)."""
    if held is None:
        return None
    return {"reason": held.reason}


def _member_json(member: Member) -> dict[str, Any]:
    return {"id": member.entry_id, "timestamp": _iso(member.ts),
            "similarity": member.similarity}


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


def _span(first: float, last: float) -> str:
    """``2026-08-02 → 09-07``: the year once when it does not change."""
    a, b = _day(first), _day(last)
    if a == b:
        return a
    return f"{a} → {b[5:]}" if a[:4] == b[:4] else f"{a} → {b}"


def _lines(c: ClusterInfo, width: int, *, held: Held | None = None,
           aside: str | None = None) -> str:
    """Two lines per cluster: id, size, span and state (fixed-width fields, never cut), then
    the preview, clipped to the terminal — readable at 80 columns, where a seven-column table
    squeezed the preview to nothing. A cluster set aside gets a third line: the server's
    answer, and what brings it back."""
    state = "not merged"
    if c.consolidated:
        state = f"→ {c.consolidated_entry_id}"  # merged into that narrative
        if c.new_since_consolidation:
            state += f" +{c.new_since_consolidation} new"
    if held is not None:
        state += " (held back: undone)"
    if aside is not None:
        state += " (set aside)"
    head = f"  {c.cluster_id}  {_plural(c.size, 'member')}  {_span(c.first_ts, c.last_ts)}  {state}"
    room = max(width - 6, 20)
    lines = [head, "      " + _clip(" ".join(c.preview.split()), room)]
    if aside is not None:
        lines.append("      " + _clip(f"set aside: {' '.join(aside.split())} (sent again once "
                                      "a member is edited, joins or leaves, or the prompts or "
                                      "model change)", room))
    return "\n".join(lines)


def _clip(text: str, room: int) -> str:
    return text if len(text) <= room else text[: room - 1] + "…"


def _plural(n: int, word: str) -> str:
    return f"{n:>3} {word}" + (" " if n == 1 else "s")


def _catch_up(runtime: Runtime, *, required: bool) -> None:
    """Sync the logs changed since the last sync, if any (:func:`sync_for_read`): Episodes are
    clustered as they are indexed, so without a daemon those added (`add`, a hand edit) since
    were in no cluster, and `clusters` said "no clusters". Only when something changed: a sync
    opens the vector index and the embedder, which listing clusters needs nothing of.

    ``required=False`` (listing): a sync that cannot run (an embedding server down) is a note
    on stderr and the clusters are listed as last synced, as they were before it synced."""
    from everos_reflect.errors import EverosError
    from everos_reflect.index.sync import Indexer

    runtime.index_to_read()
    lag = Indexer(runtime).pending()
    if not (lag["files_changed"] or lag["files_deleted"]):
        return
    try:
        sync_for_read(runtime, patient=required)
    except EverosError as exc:
        if required:
            raise
        say(f"note: could not bring the index up to date ({exc}); clusters as last synced",
            err=True)


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

    # --app/--project without --user narrow the users (they were ignored: `recluster --app
    # acme` rebuilt the clusters of every app); an id they cannot be is refused, as by
    # `clusters`
    for value, what in ((app, "app_id"), (project, "project_id")):
        if value is not None:
            validate_name(value, what)
    ref = UserRef.of(user_id, app, project) if user_id is not None else None  # '' is refused
    runtime = open_runtime(root)
    if runtime.read_only:  # refused in one line, not with an error about a lock file
        raise IndexReadOnly(runtime.index_dir)
    if ref is not None:
        note_unknown_user(runtime, ref)
    else:
        note_no_users(runtime, app, project)
    settle_journal(runtime)
    _catch_up(runtime, required=True)  # Episodes added since the last sync are reclustered too
    counts = ClusterService(runtime).recluster_exclusive(ref, on_wait=lambda: say(
        "Waiting for the strategy runs in flight to finish before reclustering ...", err=True),
        app=app, project=project)
    if as_json:
        emit_json(counts)
        return
    say(f"reclustered {counted(counts['users'], 'user')}: "
        f"{counted(counts['clusters'], 'cluster')}, {counted(counts['members'], 'member')}"
               + (f", {counts['skipped']} without a vector" if counts["skipped"] else ""))


COMMANDS: list[click.Command] = [clusters_cmd, recluster_cmd]
