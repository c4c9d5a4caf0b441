"""The belief tiers at the command line: ``worldview``, ``relations``, ``resolve``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from everos_reflect.cli.common import (
    OneOf,
    app_filter_option,
    emit_json,
    filtered_refs,
    handle_errors,
    json_option,
    open_runtime,
    project_filter_option,
    root_option,
    say,
    writable_root,
)
from everos_reflect.errors import EverosError, clipped
from everos_reflect.strategies.belief_views import RELATION_STATUSES

if TYPE_CHECKING:
    from everos_reflect.model import UserRef


def _user_options(fn: Any) -> Any:
    fn = project_filter_option(fn)
    fn = app_filter_option(fn)
    return click.option("--user", "user_id", default=None,
                        help="User id (default: every user).")(fn)


def _who(ref: UserRef) -> dict[str, str]:
    return {"user_id": ref.user_id, "app_id": ref.app, "project_id": ref.project}


@click.command("worldview")
@root_option
@_user_options
@click.option("--history", is_flag=True, help="Every version of every key, newest first.")
@json_option
@handle_errors
def worldview_cmd(root: str | None, user_id: str | None, app: str | None, project: str | None,
                  history: bool, as_json: bool) -> None:
    """The convictions an agent holds now: one per key (identity, strategy, commitments, ...)."""
    from everos_reflect.strategies.belief_views import worldview

    runtime = open_runtime(root)
    rows = [{**_who(ref), **row} for ref in filtered_refs(runtime, user_id, app, project)
            for row in worldview(runtime, ref, history=history)]
    if as_json:
        emit_json({"convictions": rows})
        return
    if not rows:
        say("no convictions yet (update_worldview writes them from insights)")
        return
    for row in rows:
        state = "" if row["live"] else f"  [archived by {row['deprecated_by']}]" \
            if row["deprecated_by"] else f"  [{row['status']}]"
        # a hand-written key of any length; none (never current: --history lists it) was "None"
        key = clipped(" ".join(str(row["key"]).split())) if row["key"] else "(no key)"
        # the text on its one line, as `lessons` gives a lesson: a line of it written like a
        # row of this listing was printed as one
        say(f"{row['user_id']}  {row['id']}  {key}: {' '.join(row['text'].split())}{state}")
        more = row["evidence_count"] - len(row["evidence"])  # the first ones, as `insights`
        say(f"    evidence: {', '.join(row['evidence']) or '-'}"
            + (f" +{more} more" if more else "") + f"  ({row['timestamp']})")


@click.command("relations")
@root_option
@_user_options
@click.option("--status", type=OneOf(RELATION_STATUSES), default=None,
              help="Only relations of this status.")
@json_option
@handle_errors
def relations_cmd(root: str | None, user_id: str | None, app: str | None, project: str | None,
                  status: str | None, as_json: bool) -> None:
    """Self-contradiction edges between convictions, newest first."""
    from everos_reflect.strategies.belief_views import relations

    runtime = open_runtime(root)
    rows = [{**_who(ref), **row} for ref in filtered_refs(runtime, user_id, app, project)
            for row in relations(runtime, ref, status=status)]
    if as_json:
        emit_json({"relations": rows})
        return
    if not rows:
        say("no relations" + (f" with status {status}" if status else ""))
        return
    for row in rows:
        say(f"{row['user_id']}  {row['id']}  [{row['status']}]  "
            f"{' x '.join(row['between']) or '-'}")  # a hand edit may leave none
        say(f"    {' '.join(row['text'].split())}")  # on one line, as a conviction's
        if row["resolution"]:
            say(f"    resolution: {' '.join(str(row['resolution']).split())}")


@click.command("resolve")
@root_option
@click.argument("rel_id")
@click.option("--note", required=True, help="Why the contradiction no longer stands.")
@_user_options
@json_option
@handle_errors
def resolve_cmd(root: str | None, rel_id: str, note: str, user_id: str | None, app: str | None,
                project: str | None, as_json: bool) -> None:
    """Mark a self-contradiction edge resolved, with a note; the convictions stay as they are."""
    from everos_reflect.markdown.parser import lookup_entry_id
    from everos_reflect.model import ENTRY_ID_RE, UserRef, malformed_relation_id
    from everos_reflect.strategies.belief_views import (
        InvalidNote,
        check_relation_id,
        checked_note,
        owners_of,
        resolve_relation,
    )

    writable_root(root)  # refused in one line, before anything is done
    runtime = open_runtime(root)
    refs = filtered_refs(runtime, user_id, app, project, note=False)
    # the request's own problems, each named, before any look-up, as the API's 422 names
    # them: an empty note on an unknown relation was told "no relation" alone
    problems = [] if ENTRY_ID_RE.fullmatch(rel_id) else [malformed_relation_id(rel_id)]
    try:
        checked_note(note)
    except InvalidNote as exc:
        problems.append(f"--note {exc.reason}")
    if problems:
        raise EverosError("; ".join(problems))
    lookup_entry_id(rel_id, refs[0] if user_id is not None else None)  # as at the API
    check_relation_id(rel_id)
    refs = owners_of(runtime, rel_id, refs)
    if not refs:
        # the user named whole, as `explain`, `undo` and the API name one
        whose = f" for user {UserRef.of(user_id, app, project)}" if user_id else ""
        raise EverosError(f"no relation {rel_id}{whose}")
    if len(refs) > 1:
        raise EverosError(f"{rel_id} exists for several users "
                          f"({', '.join(str(r) for r in refs)}): name one with --user")
    try:
        row = {**_who(refs[0]), **resolve_relation(runtime, refs[0], rel_id, note)}
    except InvalidNote as exc:  # as `add` says a blank --subject
        raise EverosError(f"--note {exc.reason}") from None
    if as_json:
        emit_json(row)
    else:
        say(f"{row['id']} resolved: {row['resolution']}")


COMMANDS = [worldview_cmd, relations_cmd, resolve_cmd]
