"""What every command shares: the root option, JSON output, progress and error handling."""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from everos_reflect.errors import EverosError, describe
from everos_reflect.fileio import os_error_text
from everos_reflect.model import BYTE_ESCAPES, QUOTED_MAX, quoted, shown_names
from everos_reflect.problem_words import counted as counted  # the CLI's counts say it

if TYPE_CHECKING:
    from pydantic import BaseModel

    from everos_reflect.model import UserRef
    from everos_reflect.runtime import Runtime

F = TypeVar("F", bound=Callable[..., Any])
M = TypeVar("M", bound="BaseModel")

root_option = click.option(
    "--root",
    "root",
    type=click.Path(file_okay=False, path_type=str),
    default=None,
    help="Memory root (default: $EVEROS_ROOT, else ~/.everos).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
#: ``--fleet`` of a command that reports a root's strategies (``status``, ``clusters``,
#: ``strategies``) or runs one (``trigger``): the fleet's ``[strategies]`` defaults under the
#: root's ``ome.toml``, as the fleet's runs read them.
fleet_defaults_option = click.option(
    "--fleet", "fleet_file", default=None, type=click.Path(dir_okay=False, path_type=str),
    help="The fleet.toml this root runs in: its [strategies] defaults are laid under the "
         "root's ome.toml, as the fleet's runs lay them.")


class WholeRange(click.IntRange):
    """A whole-number option read as the API reads a query's whole number
    (:func:`~everos_reflect.typed_numbers.whole_number`): the digits 0-9 and an optional
    ``-``, within the bounds, refused in words a person uses (``must be a whole number from 1
    to 100, got '5.0'``). ``click.IntRange`` read ``+5``, `` 5`` and ``1_0``, which the API
    refuses, and named its own type ("'5.0' is not a valid integer range")."""

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        from everos_reflect.typed_numbers import NumberProblem, whole_number

        try:
            return whole_number(str(value), int(self.min), int(self.max))  # type: ignore[arg-type]
        except NumberProblem as exc:
            self.fail(str(exc), param, ctx)


class SecondsRange(click.FloatRange):
    """A number-of-seconds option read as :class:`WholeRange` reads a whole number
    (:func:`~everos_reflect.typed_numbers.seconds`): ``2.5`` or ``.5``, never ``nan``,
    ``inf``, ``1e3``, ``+5`` or `` 5``."""

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        from everos_reflect.typed_numbers import NumberProblem, seconds

        try:
            return seconds(str(value), float(self.min), float(self.max))  # type: ignore[arg-type]
        except NumberProblem as exc:
            self.fail(str(exc), param, ctx)


class OneOf(click.Choice):
    """A choice option refused in the words the API and the config files use
    (:func:`~everos_reflect.problem_words.one_of`: ``must be one of: active, resolved; got
    'x'``). ``click.Choice`` said "'x' is not one of 'active', 'resolved'", and ``relations
    --status`` took any value and answered "no relations with status x"."""

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        from everos_reflect.problem_words import one_of

        if value in self.choices:
            return value
        self.fail(one_of([str(c) for c in self.choices], value), param, ctx)


#: A strategy's problem up to this long is shown in its table cell; a longer one by its lead
#: and a note number, the whole text once below the table.
PROBLEM_CELL_CHARS = 32


def problem_cell(problem: str, notes: dict[str, int]) -> str:
    """What a table (``status``, ``fleet status``) shows of one strategy's problem. The whole
    text in an 80-column cell took 20 lines per strategy, and four strategies that need an
    LLM said the same 300 characters four times: a long problem shows its lead (``needs an
    LLM``) and a number (kept in ``notes``), and its text is printed once under the table.

    The lead ends where the problems' format ends it, at the first ``": "`` (``needs an LLM:
    …``, ``<path>:<line>: …``, ``invalid configuration: …``). Cut at the first ``":"``, a
    problem leading with a path that holds a colon (``C:\\memory is read-only here …``,
    ``episode-….md:12: …``) was shown ``C``, or the path without its line, and one leading
    with a URL ``http``."""
    if len(problem) <= PROBLEM_CELL_CHARS:
        return problem
    number = notes.setdefault(problem, len(notes) + 1)
    lead = problem.split(": ", 1)[0]
    if len(lead) > PROBLEM_CELL_CHARS:
        lead = lead[:PROBLEM_CELL_CHARS - 1] + "…"
    return f"{lead} [{number}]"


def ome_invalid(problem: str) -> str:
    """``ome.toml``'s problem as a line's lead: ``invalid ome.toml: strategies.x.enabled: …``.
    Each problem names the file already (relative to the root since session 36), so the lead
    "ome.toml is invalid: " named it twice ("ome.toml is invalid: ome.toml: …"); a problem
    that does not name it keeps that lead."""
    said = problem.removeprefix("invalid configuration: ")
    return f"invalid {said}" if said.startswith("ome.toml: ") else f"ome.toml is invalid: {said}"


class HostName(click.ParamType):
    """``serve --host`` checked as ``[server] host`` is (:func:`~everos_reflect.settings.
    host_problem`), in the same words. ``--host ''`` was taken for "not given" (the
    configured host was served), and ``--host ' 127.0.0.1'`` reached the socket."""

    name = "host"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        from everos_reflect.settings import host_problem

        reason = host_problem(str(value))
        if reason:
            self.fail(reason, param, ctx)
        return str(value)


def fleet_defaults(root: Path, fleet_file: str | None) -> dict[str, dict[str, Any]]:
    """The strategy defaults of ``--fleet`` for ``root`` (none without it)."""
    if fleet_file is None:
        return {}
    from everos_reflect.fleet.config import strategy_defaults_for  # lazy: fast `--help`

    return strategy_defaults_for(fleet_file, root)
#: ``--app``/``--project`` of a command whose ``--user`` is optional: without it they filter
#: (None = every app/project); with it they name the user's tenant (default_app/project).
app_filter_option = click.option("--app", default=None, help="App id (default: every app, or "
                                 "default_app with --user).")
project_filter_option = click.option("--project", default=None, help="Project id (default: "
                                     "every project, or default_project with --user).")


def filtered_refs(runtime: Runtime, user_id: str | None, app: str | None,
                  project: str | None, *, note: bool = True) -> list[UserRef]:
    """The users a command with :data:`app_filter_option`/:data:`project_filter_option` works
    on: the one ``--user`` names, else every user of the root that the filters match.

    A filter that cannot be an app or project id (``--app ../x``, ``--app ''``) is refused, as
    ``clusters`` and ``lessons`` refuse it: ``insights``, ``worldview``, ``relations`` and
    ``resolve`` compared it with every user's app, matched none and said "No insights yet"
    with exit 0, as if the root held none."""
    from everos_reflect.model import UserRef, validate_name

    for value, what in ((app, "app_id"), (project, "project_id")):
        if value is not None:
            validate_name(value, what)
    if user_id is not None:
        ref = UserRef.of(user_id, app, project)
        if note:  # a listing; a command that looks an id up names the user in its error
            note_unknown_user(runtime, ref)
        return [ref]
    users = list(runtime.store.iter_users())
    refs = [r for r in users
            if (app is None or r.app == app) and (project is None or r.project == project)]
    if note and not refs:
        note_no_users(runtime, app, project, users)
    return refs


def note_no_users(runtime: Runtime, app: str | None, project: str | None,
                  users: Sequence[UserRef] | None = None) -> None:
    """A note on stderr when ``--app``/``--project`` (without ``--user``) match no user of the
    root, naming the apps (or projects) there are (stdout, and ``--json``, stay as they are):
    ``recluster --app acmee`` said "reclustered 0 users" and ``clusters --app acmee`` "no
    clusters", exit 0, as if the app existed and had nothing to cluster."""
    if app is None and project is None:
        return
    from everos_reflect.problem_words import did_you_mean

    users = list(runtime.store.iter_users()) if users is None else users
    if any((app is None or r.app == app) and (project is None or r.project == project)
           for r in users):
        return
    if not users:
        hint = " (it has no users yet)"
    elif app is not None and all(r.app != app for r in users):
        apps = sorted({r.app for r in users})
        hint = did_you_mean(app, apps) or f" (its apps: {shown_names(apps)})"
    else:
        projects = sorted({r.project for r in users if app is None or r.app == app})
        where = "" if app is None else f" in {app}"
        hint = (did_you_mean(str(project), projects)
                or f" (its projects{where}: {shown_names(projects)})")
    what = (f"app {app}" if project is None else f"project {project}" if app is None
            else f"{app}/{project}")
    say(f"note: no users in {what} of this root{hint}", err=True)


def note_unknown_user(runtime: Runtime, ref: UserRef) -> None:
    """A note on stderr when ``--user`` names a user the root has no folder for (stdout, and
    ``--json``, stay as they are): a typo (``--user u_andew``) was answered "No insights yet",
    "no convictions yet", as if the user existed and had none."""
    if not runtime.store.user_gone(ref):
        return
    from everos_reflect.problem_words import did_you_mean

    users = list(runtime.store.iter_users())
    same = [r.user_id for r in users if (r.app, r.project) == (ref.app, ref.project)]
    hint = did_you_mean(ref.user_id, same) or (
        f" (it has {counted(len(users), 'user')})" if users else " (it has no users yet)")
    say(f"note: no user {ref.user_id} in {ref.app}/{ref.project} of this root{hint}", err=True)


class UTCFormatter(logging.Formatter):
    """Log lines stamped as the run records and audit rows are: UTC, ISO 8601, with the zone
    (``2026-12-04T11:20:00.123+00:00``). ``logging``'s own stamp is local wall time with no
    zone: a ``serve`` log could not be lined up with ``runs``, the audit or another host."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")

    def formatMessage(self, record: logging.LogRecord) -> str:
        """One record, one line: a line break or a terminal escape in what the line names (a
        root path, a file, a key) is written as an escape (``\\n``, ``\\x1b``). A root at
        ``/tmp/a<newline>b`` was logged as two lines, the second one looking like a line of
        its own, and a name holding an escape sequence reached the terminal raw. A traceback
        still follows its line, as ``logging`` writes it."""
        return one_line(super().formatMessage(record))


def configure_logging() -> None:
    """The log of the long-running commands (``serve``, ``fleet serve``): INFO and up, one
    UTC-stamped line per record on stderr (uvicorn's lines too: see ``serve.uvicorn_config``)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(UTCFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])


def existing_root(root: str | None) -> Path:
    """The memory root a command works on; it must already be one (see
    :func:`~everos_reflect.runtime.is_memory_root`): commands never create a root, or write
    inside a folder that is not one, by accident — only ``init`` does."""
    from everos_reflect.runtime import not_a_root_reason, resolve_root  # lazy: fast `--help`

    path = resolve_root(root)
    reason = not_a_root_reason(path)
    if reason:
        raise EverosError(reason)
    return path


def writable_root(root: str | None) -> Path:
    """:func:`existing_root` of a command that writes to it: a root this process cannot write
    (a read-only mount, another user's files) is refused in one line, as ``serve`` and
    ``recluster`` refuse it, before anything is done; ``add``, ``reindex``, ``task add``,
    ``undo`` and ``resolve`` failed naming a lock file ("Read-only file system:
    …/.index/locks/md-….lock")."""
    from everos_reflect.errors import IndexReadOnly
    from everos_reflect.runtime import index_read_only

    path = existing_root(root)
    if index_read_only(path):
        raise IndexReadOnly(path / ".index")
    return path


def open_runtime(root: str | None) -> Runtime:
    """The runtime of an existing memory root (see :func:`existing_root`)."""
    from everos_reflect.runtime import Runtime

    return Runtime(existing_root(root))


def settle_interrupted(root: Path) -> int:
    """Settle what a crash interrupted (every strategy's ``recover`` hook that says a writer
    must wait for it, e.g. Reflection's merge journal) before a command writes to ``root``.

    Costs one read-only query per such strategy when nothing is pending (the usual case); only
    a root with interrupted work opens a full runtime. Returns how many units were settled.
    """
    from everos_reflect.engine.recovery import has_interrupted, settle

    if not has_interrupted(root):
        return 0
    from everos_reflect.runtime import Runtime

    runtime = Runtime(root)
    try:
        return settle(runtime)
    finally:
        runtime.close()


def settle_journal(runtime: Runtime) -> int:
    """:func:`settle_interrupted` for a command that has its runtime open already."""
    from everos_reflect.engine.recovery import settle

    return settle(runtime)


#: Characters a terminal acts on rather than shows: C0 and C1 controls (ESC starts colour,
#: cursor, title and clipboard sequences), DEL, and the bidirectional overrides that reorder
#: what is displayed. Line feeds and tabs are layout and pass.
_UNSHOWABLE = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))
               if chr(c) not in "\n\t"}
_UNSHOWABLE.update({c: f"\\u{c:04x}" for c in (0x200E, 0x200F, *range(0x202A, 0x202F),
                                               *range(0x2066, 0x206A))})
_UNSHOWABLE.update(BYTE_ESCAPES)  # a path's byte that is not UTF-8: \xff, as path_text


#: :data:`_UNSHOWABLE`, the tab and the line breaks: what an error line, a log line or a path
#: in a command's output shows as an escape, so it stays one line whatever it quotes (a
#: ``--root`` path may hold a line break) and a tab is not taken for spaces.
_ONE_LINE = {**_UNSHOWABLE, **{ord(c): ascii(c)[1:-1] for c in "\t\n\r\u2028\u2029"}}


def sync_for_read(runtime: Runtime, *, patient: bool = False) -> dict[str, Any]:
    """Bring the index up to date with the Markdown before a read (``search``,
    ``briefing``), so results reflect hand edits made since the last sync. A read-only root
    cannot be synced: it is read as last indexed, and stderr says so, with how many logs
    changed since, so a stale answer is never taken for a fresh one. Returns what a JSON
    answer adds for it, as the API's does (:func:`~everos_reflect.api.ops.read_as_built`).

    Another process may hold the indexer for minutes (``serve``'s first scan of a large
    root): a read waited for all of it without a word (54 s on LoCoMo). It waits
    :data:`~everos_reflect.api.ops.INDEX_WAIT_SECONDS`, as MCP's and the API's reads do, then
    answers from the index as it stands and says so (stderr, and ``note`` in JSON).
    ``patient`` waits as long as it takes (``recluster`` must see every log)."""
    from filelock import Timeout

    from everos_reflect.api.ops import INDEX_WAIT_SECONDS, index_whole, read_as_built
    from everos_reflect.embedding.base import answer_waiting
    from everos_reflect.index.sync import Indexer

    runtime.index_to_read()
    if not runtime.read_only:
        if not patient:  # patient: its scan waits for the indexer until any reindex is done
            # a reindex under way (another process's) is waited for a little, then told, as
            # the API and MCP do: its sync waited 10 s for the indexer the reindex holds, then
            # the read answered from the half-built index, a few hits as if all
            index_whole(runtime)
        try:
            with answer_waiting():  # the person who typed the command waits: one attempt
                Indexer(runtime).scan(timeout=-1 if patient else INDEX_WAIT_SECONDS)
        except Timeout:
            note = (f"another process held the index over {INDEX_WAIT_SECONDS:g} s (a scan "
                    "or rebuild): answered as last indexed; changes since may not be seen")
            say(f"note: {note}", err=True)
            return {"note": note}
        return {}
    behind = read_as_built(runtime)
    say(f"note: {behind['note']}", err=True)
    return behind


def shown(text: object) -> str:
    """``text`` safe to print on a terminal: every character a terminal would act on is
    written as its escape (``\\x1b``). Memory text comes from conversations, LLM replies and
    hand edits: printed as it was, an ``ESC ]0;...`` in an Episode retitled the person's
    terminal and ``ESC [2J`` cleared it. JSON output needs none of this (``json`` escapes)."""
    return str(text).translate(_UNSHOWABLE)


def say(message: object = "", *, err: bool = False) -> None:
    """``click.echo`` of :func:`shown` text: how the commands print what they read."""
    click.echo(shown(message), err=err)


class OneLineStderr(logging.Handler):
    """Log records as one line each on the current ``sys.stderr``: the message, and for a
    record carrying an exception what it says (:func:`~everos_reflect.errors.describe`)
    instead of the traceback."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
            exc = record.exc_info[1] if record.exc_info else None
            if exc is not None:
                text += f": {describe(exc)}"
            sys.stderr.write(text.translate(_ONE_LINE) + "\n")
        except Exception:
            self.handleError(record)


def one_line_log_records() -> None:
    """Show a command's warnings and errors without tracebacks (SPEC §8: one clear line).

    With no logging configured, Python's handler of last resort prints each WARNING+ record,
    and ``log.exception`` (a strategy run that raised, in an in-process ``trigger``) with its
    whole traceback. This replaces only that last resort: ``serve`` and ``fleet`` configure
    logging of their own, with tracebacks, for the daemon's log.
    """
    handler = OneLineStderr(logging.WARNING)
    logging.lastResort = handler


#: :data:`BYTE_ESCAPES` inside a JSON string: its backslash escaped.
_JSON_BYTE_ESCAPES = {c: shown.replace("\\", "\\\\") for c, shown in BYTE_ESCAPES.items()}


def emit_json(document: Any) -> None:
    """Write exactly one JSON document to stdout, UTF-8 throughout: a byte of a path that is
    not UTF-8 is written as the text ``\\xff``, as every other output shows it (written raw,
    the document was no longer UTF-8, and ``jq`` refused it)."""
    text = json.dumps(document, indent=2, ensure_ascii=False, default=str)
    click.echo(text.translate(_JSON_BYTE_ESCAPES))


def one_line(text: object) -> str:
    """``text`` as an error line, a log line and a command's output show it, a user's path
    above all: :func:`shown`, and a tab, a line break or a line separator as its escape
    (``\\t``, ``\\n``, ``\\u2028``); every other letter as written (``café``). ``init`` printed
    a root whose name holds a line break as two lines, the second one looking like output of
    its own, and then with ``ascii()``, which wrote ``café`` as ``caf\\xe9``."""
    return str(text).translate(_ONE_LINE)


def fail(message: str, code: int = 1) -> NoReturn:
    """One clear line on stderr and a non-zero exit, never a traceback."""
    click.echo(f"error: {one_line(message)}", err=True)
    sys.exit(code)


class _OneLineUsageError(click.ClickException):
    """A click error (bad option, missing argument, unknown command) shown as one ``error:``
    line, as :func:`fail` shows every other error (SPEC §8), with click's exit code. Click's
    own display is a usage block: ``Usage: …``, a hint, a blank line, then ``Error: …``."""

    def __init__(self, cause: click.ClickException, command: str | None,
                 argv: Sequence[str] = ()) -> None:
        super().__init__(_short_values(_extra_argument_quoted(cause.format_message()), argv))
        self.exit_code = cause.exit_code
        ctx = getattr(cause, "ctx", None)
        command = ctx.command_path if ctx is not None else command
        self.hint = f" (see '{command} --help')" if command else ""

    def show(self, file: Any = None) -> None:
        message = " ".join(self.format_message().split())  # click may wrap a long message
        if self.hint:
            message = message.removesuffix(".")
        click.echo(f"error: {shown(message)}{self.hint}", err=True)


class OneLineErrors(click.Group):
    """The top-level group: every click error of it or any command below it (they are all
    parsed inside its ``make_context`` or ``invoke``) becomes a :class:`_OneLineUsageError`."""

    def make_context(self, info_name: str | None, args: list[str], *more: Any,
                     **kwargs: Any) -> click.Context:
        argv = list(args)  # parsing consumes ``args``
        try:
            ctx = super().make_context(info_name, args, *more, **kwargs)
        except click.ClickException as exc:
            raise _one_line(exc, info_name, argv) from exc
        ctx.meta[_ARGV] = argv
        return ctx

    def resolve_command(self, ctx: click.Context, args: list[str]
                        ) -> tuple[str | None, click.Command | None, list[str]]:
        """The command, refused when it is given an option that takes one value more than
        once: the last one was taken without a word (``task add --outcome success --outcome
        failure`` recorded a failure), where the API refuses a query parameter given twice."""
        name, cmd, rest = super().resolve_command(ctx, args)
        if cmd is not None and not ctx.resilient_parsing:
            path, twice = repeated_options(cmd, click.Context(cmd, info_name=name, parent=ctx),
                                           rest)
            if twice:
                raise click.UsageError(f"option given more than once: {', '.join(twice)}; "
                                       "give each once", path)
        return name, cmd, rest

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:
            sub = ctx.invoked_subcommand  # named before its options are parsed
            raise _one_line(exc, f"{ctx.command_path} {sub}" if sub else ctx.command_path,
                            ctx.meta.get(_ARGV, ())) from exc


_ARGV = "everos_reflect.argv"


def repeated_options(cmd: click.Command, ctx: click.Context, args: Sequence[str]
                     ) -> tuple[click.Context, list[str]]:
    """The options of ``cmd`` (or of the subcommand of a group such as ``task``) that take
    one value and are in ``args`` more than once (flags and ``multiple`` options may be
    repeated), with the context of the command that has them. Arguments that do not parse
    are left to the command's own parse, which names what is wrong."""
    try:
        _, rest, order = cmd.make_parser(ctx).parse_args(args=list(args))
    except click.ClickException:
        return ctx, []
    seen = Counter(id(p) for p in order)
    twice = [next((o for o in p.opts if o.startswith("--")), p.opts[0]) for p in
             dict.fromkeys(order) if isinstance(p, click.Option) and seen[id(p)] > 1
             and not (p.multiple or p.count or p.is_flag)]
    if twice or not isinstance(cmd, click.Group) or not rest:
        return ctx, twice
    sub = cmd.get_command(ctx, rest[0])
    if sub is None:
        return ctx, []
    return repeated_options(sub, click.Context(sub, info_name=rest[0], parent=ctx), rest[1:])


def _one_line(exc: click.ClickException, command: str | None,
              argv: Sequence[str]) -> click.ClickException:
    if isinstance(exc, _OneLineUsageError):
        return exc
    return _OneLineUsageError(exc, command, argv)


#: click's refusal of one positional argument a command does not take, the argument as given.
_EXTRA_ARGUMENT = re.compile(r"Got unexpected extra argument \((.*)\)", re.DOTALL)


def _extra_argument_quoted(message: str) -> str:
    """Click's "Got unexpected extra argument (x)" with the argument quoted, as every other
    refused value is (``'x'``): ``strategies ''`` said "argument ()", and ``'a b'`` read as
    two arguments."""
    m = _EXTRA_ARGUMENT.fullmatch(message)
    return message if m is None else f"Got unexpected extra argument {quoted(m.group(1))}"


def _short_values(message: str, argv: Sequence[str]) -> str:
    """``message`` with each long command-line value it echoes quoted short (:func:`quoted`).
    Click's own errors quote the whole value (``'zzz…' is not a valid integer``, ``No such
    command``, ``No such option: --zzz…``): a 5,000-character ``--max-tokens`` made a
    5,000-character error line."""
    for arg in argv:
        values = [arg]
        if arg.startswith("-") and "=" in arg:  # --opt=value
            values += arg.split("=", 1)
        for value in values:
            if len(value) > QUOTED_MAX and value in message:
                message = message.replace(repr(value), quoted(value))
                message = message.replace(value, quoted(value))
    return message


def validated(model: type[M], **fields: Any) -> M:
    """``model(**fields)``, or one line naming each bad field and exit 1.

    The commands that share an API request model validate through it, so a bad option is
    refused exactly as the API refuses it, in its words (:func:`~everos_reflect.api.ops.
    validation_message`), without pydantic's multi-line report or a traceback. It had a
    translator of its own, which said pydantic's "Input should be 'success', 'failure' or
    'partial'" where the API did not.
    """
    from pydantic import ValidationError

    from everos_reflect.api.ops import validation_message

    try:
        return model(**fields)
    except ValidationError as exc:
        fail(validation_message(exc.errors(), model))


#: Set (to anything but ``0``), a defect met by a command prints its traceback before the
#: error line: what a report of it needs, which the one line (SPEC §8) leaves out.
TRACEBACK_VARIABLE = "EVEROS_TRACEBACK"


def handle_errors(fn: F) -> F:
    """Turn domain errors (and I/O errors) into one line on stderr and exit code 1."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except EverosError as exc:
            fail(str(exc))
        except BrokenPipeError:
            # the reader went away (`... --json | head`): not an error to report. Click's
            # main exits 1 without a word and keeps the final flush from raising again.
            raise
        except OSError as exc:
            fail(os_error_text(exc, _root_of(kwargs.get("root"))))
        except KeyboardInterrupt:
            fail("interrupted", 130)
        except (click.exceptions.ClickException, click.exceptions.Abort,
                click.exceptions.Exit):
            raise  # click's own: a usage error, an abort, an early exit
        except Exception as exc:  # one line still (SPEC §8), not a traceback
            said = describe(exc)
            if not said.startswith("internal error"):
                fail(said)
            if os.environ.get(TRACEBACK_VARIABLE, "").strip() not in ("", "0"):
                click.echo("".join(traceback.format_exception(exc)), err=True, nl=False)
            fail(f"{said}; please report this defect ({TRACEBACK_VARIABLE}=1 prints where it "
                 "happened)")

    return wrapper  # type: ignore[return-value]


def _root_of(given: object) -> Path | None:
    """The memory root a failed command named (``--root``, else ``EVEROS_ROOT``, else the
    default), so its error names a file in it as ``lint`` and the API do; None when there is
    none to tell."""
    from everos_reflect.runtime import resolve_root

    if given is not None and not isinstance(given, (str, os.PathLike)):
        return None
    try:
        return resolve_root(given)
    except (EverosError, OSError):
        return None


@contextmanager
def progress(description: str, total: int | None) -> Iterator[Callable[[int], None]]:
    """A rich progress bar on a terminal; silent otherwise. Yields ``advance(n)``."""
    if not sys.stderr.isatty():
        yield lambda n=1: None
        return
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n=1: bar.advance(task, n)
