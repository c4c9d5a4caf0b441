"""Commands an agent's memory is fed and read through: ``task add``, ``lessons``,
``briefing``, ``mcp``."""

from __future__ import annotations

import click

from everos_reflect.cli.common import (
    OneOf,
    WholeRange,
    app_filter_option,
    counted,
    emit_json,
    fail,
    handle_errors,
    json_option,
    note_no_users,
    note_unknown_user,
    open_runtime,
    project_filter_option,
    root_option,
    say,
    sync_for_read,
    validated,
    writable_root,
)
from everos_reflect.errors import InvalidEpisode
from everos_reflect.model import (
    LIST_LIMIT,
    MAX_BRIEFING_TOKENS,
    MAX_LIST_LIMIT,
    Kind,
    UserRef,
    shown_names,
)
from everos_reflect.problem_words import shown_number

user_option = click.option("--user", "user_id", required=True, help="User id.")
app_option = click.option("--app", default=None, help="App id (default: default_app).")
project_option = click.option("--project", default=None,
                              help="Project id (default: default_project).")


@click.group("task")
def task_group() -> None:
    """Task records: what the agent did, step by step, and how it went."""


@task_group.command("add")
@root_option
@user_option
@app_option
@project_option
@click.option("--type", "task_type", required=True, help="Task type, e.g. deploy.")
@click.option("--goal", required=True, help="What the task was for.")
@click.option("--step", "steps", multiple=True, required=True,
              help="One step, in order; repeat for each step.")
@click.option("--outcome", required=True, type=OneOf(["success", "failure", "partial"]),
              help="How the task ended.")
@click.option("--error", "errors", multiple=True, help="An error met; repeat for each.")
@click.option("--note", default=None, help="What happened (the Outcome section's text).")
@click.option("--timestamp", default=None, help="ISO 8601 (default: now, UTC).")
@json_option
@handle_errors
def task_add_cmd(root: str | None, user_id: str, app: str | None, project: str | None,
                 task_type: str, goal: str, steps: tuple[str, ...], outcome: str,
                 errors: tuple[str, ...], note: str | None, timestamp: str | None,
                 as_json: bool) -> None:
    """Append a task record to a user's tasks/ log and print its id."""
    from everos_reflect.index.reads import root_id_watermark
    from everos_reflect.markdown.store import MarkdownStore
    from everos_reflect.procedural.tasks import new_task
    from everos_reflect.settings import load_settings

    ref = UserRef.of(user_id, app, project)
    try:
        task = new_task(ref, task_type=task_type, goal=goal, steps=list(steps),
                        outcome=outcome, errors=list(errors), outcome_note=note,
                        timestamp=timestamp)
    except InvalidEpisode as exc:
        flag = {"task_type": "type", "outcome_note": "note"}.get(exc.field, exc.field)
        said = exc.reason.removeprefix(f"invalid {exc.field} ")  # an id's words name it
        fail(f"--{flag} {said}" if said == exc.reason else f"invalid --{flag} {said}")
    path = writable_root(root)
    # the root's limits, as the index reads the log: with the shipped ones, a root that
    # lowered max_entry_bytes was given a task record the index then refused ("not read")
    limits = load_settings(path).limits
    store = MarkdownStore(path, limits=limits,
                          seen_seq=root_id_watermark(path, limits.max_file_bytes))
    entry = store.append(ref, Kind.TASK, task.meta, task.sections, day=task.day)
    if as_json:
        emit_json({"id": entry.id, "app_id": ref.app, "project_id": ref.project,
                   "user_id": ref.user_id, "timestamp": task.meta["timestamp"],
                   "task_type": task_type, "outcome": outcome,
                   "path": store.rel(store.log_path(ref, Kind.TASK, task.day))})
    else:
        say(entry.id)


@click.command("briefing")
@click.argument("query")
@root_option
@user_option
@app_option
@project_option
@click.option("--task-type", default=None,
              help="Add the lessons of this task type. Without it the block holds no lesson: "
                   "lessons are learned per task type and served only for theirs.")
@click.option("--max-tokens", type=WholeRange(1, MAX_BRIEFING_TOKENS), default=1000,
              show_default=True,
              help="Budget of the whole block (bundled tokenizer).")
@json_option
@handle_errors
def briefing_cmd(query: str, root: str | None, user_id: str, app: str | None,
                 project: str | None, task_type: str | None, max_tokens: int,
                 as_json: bool) -> None:
    """Print one bounded block of memory for QUERY (what an agent reads before a task).

    Current convictions, the lessons of --task-type (only with it: a lesson is learned for
    one task type, and one of another type would mislead), then the insights, Episodes,
    facts and task records that answer QUERY. Without --task-type, the task types the user
    has lessons for are named on stderr (not with --json)."""
    from everos_reflect.api import ops
    from everos_reflect.api.models import BriefingRequest

    body = validated(BriefingRequest, user_id=user_id, app_id=app, project_id=project,
                     query=query, task_type=task_type, max_tokens=max_tokens)
    from everos_reflect.briefing.build import lesson_task_types

    runtime = open_runtime(root)
    note_unknown_user(runtime, UserRef.of(user_id, app, project))
    try:
        behind = sync_for_read(runtime)  # like `search`: Episodes added or edited since
        data = {**ops.briefing(runtime, body), **behind}
        types = [] if as_json else lesson_task_types(runtime, UserRef.of(user_id, app, project))
    finally:
        runtime.close()
    if as_json:
        emit_json(data)
    else:
        say(data["text"] or f"(nothing fits in {counted(max_tokens, 'token')})")
    if types and not task_type:  # left out without a word, taken for no lesson learned
        say(f"note: no lessons without --task-type; this user has lessons for "
            f"{shown_names(types)}", err=True)
    elif types and task_type not in types:  # 'Deploy' for 'deploy': as silent, as misleading
        say(f"note: no lessons for task type {task_type!r}; this user has lessons for "
            f"{shown_names(types)}", err=True)


@click.command("lessons")
@root_option
@click.option("--task-type", required=True, help="Task type, e.g. deploy.")
@click.option("--user", "user_id", default=None, help="User id (default: every user).")
@app_filter_option
@project_filter_option
@click.option("--limit", type=WholeRange(1, MAX_LIST_LIMIT), default=LIST_LIMIT, show_default=True,
              help="The most lessons listed, most confirmed first.")
@json_option
@handle_errors
def lessons_cmd(root: str | None, task_type: str, user_id: str | None, app: str | None,
                project: str | None, limit: int, as_json: bool) -> None:
    """List the lessons learned for a task type, most confirmed first."""
    from everos_reflect.api import ops
    from everos_reflect.api.models import LessonsQuery
    from everos_reflect.briefing.build import lesson_task_types

    query = validated(LessonsQuery, task_type=task_type, user_id=user_id, app_id=app,
                      project_id=project, limit=limit)
    runtime = open_runtime(root)
    try:
        if user_id is not None:
            note_unknown_user(runtime, UserRef.of(user_id, app, project))
        else:
            note_no_users(runtime, app, project)
        data = ops.lessons(runtime, query)
        others = lesson_task_types(runtime, UserRef.of(user_id, app, project)) if (
            user_id is not None and not data["lessons"] and not as_json) else []
    finally:
        runtime.close()
    if as_json:
        emit_json(data)
        return
    if not data["lessons"]:  # 'Deploy' for 'deploy' read as nothing learned
        say(f"no lessons for task type {task_type!r} yet" + (
            f"; this user has lessons for {shown_names(others)}" if others else ""))
    for x in data["lessons"]:
        mark = " [contested]" if x["status"] == "contested" else ""
        who = f"{x['user_id']} " if user_id is None else ""
        text = " ".join(x["text"].split())  # one line a lesson, as the briefing gives it
        say(f"{x['id']} {who}{x['lesson_type']:5} x{shown_number(x['confirmations'])}{mark}  "
            f"{text}")
        more = x["evidence_count"] - len(x["evidence"])
        say(f"    evidence: {', '.join(x['evidence']) or '-'}"
            + (f" +{more} more" if more else ""))
    if data["total"] > len(data["lessons"]):
        say(f"... {counted(data['total'] - len(data['lessons']), 'more lesson')} not listed "
            f"(--limit, at most 1000)")


@click.command("mcp")
@root_option
@handle_errors
def mcp_cmd(root: str | None) -> None:
    """Serve the memory tools over MCP on stdin/stdout (for agent clients)."""
    import anyio

    from everos_reflect.api.mcp_server import serve_stdio

    runtime = open_runtime(root)
    try:
        anyio.run(serve_stdio, runtime)
    finally:
        runtime.close()


COMMANDS = [task_group, lessons_cmd, briefing_cmd, mcp_cmd]
