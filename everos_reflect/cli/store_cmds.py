"""Commands around the memory root itself: ``init``, ``add``, ``lint``, ``status``,
``enable`` / ``disable``.

The runtime and the Markdown store are imported inside the commands that need them, so
``init`` and ``enable`` stay quick and work even before a root holds any log.
"""

from __future__ import annotations

import os
import re
import sqlite3
import stat
import tempfile
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import tomlkit

from everos_reflect.cli.common import (
    WholeRange,
    counted,
    emit_json,
    existing_root,
    fail,
    fleet_defaults,
    fleet_defaults_option,
    handle_errors,
    json_option,
    one_line,
    problem_cell,
    progress,
    root_option,
    say,
    settle_interrupted,
    shown,
    writable_root,
)
from everos_reflect.errors import ConfigError, EverosError, InvalidEpisode
from everos_reflect.fileio import os_reason, read_config_bytes
from everos_reflect.lint import (
    BUILTIN_STRATEGIES,
    Problem,
    lint_report,
)
from everos_reflect.model import Kind, UserRef, new_episode, shell_word
from everos_reflect.problem_words import unknown_strategy
from everos_reflect.settings import (
    OME_FILE_NAME,
    USER_FILE_NAME,
    config_file,
    config_text,
    everos_toml_template,
    load_settings,
    packaged_text,
    parse_ome,
)
from everos_reflect.status import status_document

if TYPE_CHECKING:
    from collections.abc import Callable



def _resolve(root: str | None) -> Path:
    from everos_reflect.runtime import resolve_root

    return resolve_root(root)


def _write_atomic(root: Path, path: Path, text: str) -> None:
    """Temp file in the same folder, fsync, rename: a reader never sees half a config file.

    The file keeps its permissions (mkstemp would make it owner-only). A symlinked ``path``
    is written through or refused (see :func:`_config_target`), never replaced by a file.
    """
    path = _config_target(root, path)
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o644
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:  # named for the file asked to be written, not a temp file beside it
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    try:
        os.chmod(tmp, mode)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


#: File systems the kernel serves of itself (``/proc``, ``/sys`` and their kin): they exist,
#: and take no file a program makes there.
KERNEL_FILE_SYSTEMS = frozenset({
    "proc", "sysfs", "cgroup", "cgroup2", "debugfs", "tracefs", "securityfs", "configfs",
    "pstore", "bpf", "efivarfs", "fusectl", "binfmt_misc", "mqueue", "hugetlbfs", "devpts"})


#: The mount table :func:`mount_of` reads (Linux).
MOUNT_TABLE = Path("/proc/self/mountinfo")
#: Where the machine's device files are: a folder on the file system mounted here is refused as
#: a root whatever its type (``devtmpfs``, or a container's ``tmpfs``).
DEVICE_FOLDER = "/dev"


def file_system_of(path: Path) -> str | None:
    """The type of the file system ``path`` is on (``proc``, ``ext4``), from the mount table
    (``/proc/self/mountinfo``, Linux): the mount point that holds it deepest. ``None`` when
    it cannot be told (another OS, no ``/proc``)."""
    found = mount_of(path)
    return None if found is None else found[0]


def mount_of(path: Path) -> tuple[str, str] | None:
    """``(type, mount point)`` of the file system ``path`` is on (:func:`file_system_of`);
    ``None`` when it cannot be told."""
    try:
        table = MOUNT_TABLE.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    real = os.path.realpath(path)
    best, kind = "", None
    for row in table.splitlines():
        fields, _, rest = row.partition(" - ")
        parts = fields.split()
        if len(parts) < 5 or not rest:
            continue
        # the mount point, with a space, tab, newline or backslash written \040-style
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), parts[4])
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, rest.split()[0]
    return None if kind is None else (kind, best)


def _existing(path: Path) -> Path:
    """``path``, or the nearest folder above it that exists."""
    there = path
    while not there.exists() and there != there.parent:
        there = there.parent
    return there


def unfit_folder(path: Path) -> str | None:
    """Why ``init`` must not make a root at ``path``, checked before anything is written, when
    it is on a file system that holds no program's files: one the kernel serves of itself
    (:data:`KERNEL_FILE_SYSTEMS`), or the device files' (``devtmpfs``, or whatever is
    mounted at :data:`DEVICE_FOLDER`). As root, ``init /dev`` wrote ``everos.toml`` and
    ``ome.toml`` among the device files (devtmpfs takes them, in memory, gone at the next
    boot), and ``init /dev/memory`` made a folder there. A ``tmpfs`` elsewhere (``/tmp``,
    ``/dev/shm``) is an ordinary folder and is not refused. ``None`` when fit, or when it
    cannot be told."""
    there = _existing(path)
    found = mount_of(there)
    if found is None:
        return None
    kind, point = found
    where = "it" if there == path else one_line(there)
    if kind in KERNEL_FILE_SYSTEMS:
        return (f"cannot make a memory root at {one_line(path)}: {where} is on a {kind} file "
                "system, which the kernel serves of itself and which takes no files a "
                "program makes; choose a folder on a disk")
    if kind == "devtmpfs" or point == DEVICE_FOLDER:
        return (f"cannot make a memory root at {one_line(path)}: {where} is on the {kind} "
                f"file system mounted at {one_line(point)}, which holds the machine's device "
                "files, in memory until the next boot; choose a folder on a disk")
    return None


def kernel_folder(path: Path, exc: OSError) -> str | None:
    """Why ``init`` cannot make a root at ``path``, when what failed (``exc``) is a file
    system the kernel serves of itself (:data:`KERNEL_FILE_SYSTEMS`), else ``None``.
    ``init /proc/self`` said "No such file or directory: /proc/7674/everos.toml" of a folder
    that exists, and ``init /sys/kernel`` (as root) "Permission denied": neither is why."""
    there = _existing(path)
    kind = file_system_of(there)
    if kind not in KERNEL_FILE_SYSTEMS:
        return None
    said = exc.strerror or os_reason(exc)
    where = "it" if there == path else one_line(there)
    return (f"cannot make a memory root at {one_line(path)}: {where} is on a {kind} file "
            "system, which the kernel serves of itself and which takes no files a program "
            f"makes (the OS said \"{said}\"); choose a folder on a disk")


def _config_target(root: Path, path: Path) -> Path:
    """The file an edit of ``path`` must replace: a symlinked config file (through any chain of
    links) is written through, as the Markdown store writes through a symlinked log; the rename
    used to replace the link itself, so the link was gone and its target kept the old text.
    Refused with :class:`EverosError`, nothing written: a link leading outside the memory root
    (as the store refuses one) and a dangling link (writing it would create a file wherever it
    points, or fail naming a temp file nobody asked for).
    """
    if not path.is_symlink():
        return path
    real = os.path.realpath(path)
    real_root = os.path.realpath(root)
    if not (real == real_root or real.startswith(real_root + os.sep)):
        raise EverosError(f"{path}: not writing this file: it is a symlink leading outside "
                          f"the memory root (to {real}); edit that file instead")
    if not os.path.lexists(real):
        raise EverosError(f"{path}: not writing this file: it is a symlink to {real}, which "
                          "does not exist; fix or remove the link")
    if not os.path.isfile(real):
        raise EverosError(f"{path}: not writing this file: it is a symlink to {real}, which "
                          "is not a regular file")
    return Path(real)


# --- init -------------------------------------------------------------------------------------


@click.command("init")
@click.argument(
    "target", metavar="[ROOT]", required=False, type=click.Path(file_okay=False, path_type=str)
)
@root_option
@click.option("--force", is_flag=True, help="Overwrite an existing everos.toml / ome.toml.")
@json_option
@handle_errors
def init_cmd(target: str | None, root: str | None, force: bool, as_json: bool) -> None:
    """Create a memory root ROOT with commented everos.toml and ome.toml."""
    path = _resolve(target if target is not None else root)  # click.Path refused a file
    outer = root_around(path)
    if outer is not None:
        fail(f"{path} is inside the memory root {outer}; a memory root holds no other root: "
             "choose a folder outside it")
    files = {
        path / USER_FILE_NAME: everos_toml_template(),
        path / OME_FILE_NAME: packaged_text("ome.toml"),
    }
    unfit = unfit_folder(path)
    if unfit is not None:
        fail(unfit)
    existing = [p for p in files if p.exists()]
    if existing and not force:
        names = ", ".join(str(p) for p in existing)
        fail(f"refusing to overwrite {names} (use --force to replace)")
    try:
        path.mkdir(parents=True, exist_ok=True)
        for file in files:  # every link checked first: a refused one leaves both as they were
            _config_target(path, file)
        for file, text in files.items():
            _write_atomic(path, file, text)
    except OSError as exc:
        why = kernel_folder(path, exc)
        if why is None:
            raise
        fail(why)
    if as_json:
        emit_json({"root": str(path), "written": [str(p) for p in files]})
        return
    shown = one_line(path)
    say(f"Initialized memory root {shown}")
    say(f"  settings:   {one_line(path / USER_FILE_NAME)} (all keys commented out = "
        "defaults)")
    say(f"  strategies: {one_line(path / OME_FILE_NAME)} (enable with: everos-reflect "
        f"enable reflect_episodes --root {shell_word(path)})")


def _parser_lag(parser: dict[str, int | None], read_only: bool) -> str:
    """The ``status`` line for an index read by another parser version than this one."""
    recorded, this = parser["index"], parser["this"]
    if recorded is not None and this is not None and recorded > this:
        return (f"read by parser version {recorded}, newer than this program's {this}: the "
                "logs synced here are read again by the newer version; upgrade everos-reflect "
                "here")
    read_by = "an older parser" if recorded is None else f"parser version {recorded}"
    if read_only:
        return (f"read by {read_by}, not by this program's {this}, and read-only here: logs "
                "read differently now are answered as read then until the index is rebuilt "
                "where it is writable (`reindex`, or `serve`'s first scan)")
    return f"read by {read_by}: the next sync reads every log again with version {this}"


def root_around(path: Path) -> Path | None:
    """The memory root ``path`` would be made inside of, if any: the nearest folder above it
    that holds a root's files (``everos.toml``, ``ome.toml``, ``.index``). A root made there
    put its ``.index`` and logs in the outer root's tree, a pair the fleet refuses."""
    from everos_reflect.runtime import ROOT_MARKERS

    for parent in path.parents:
        if any((parent / marker).exists() for marker in ROOT_MARKERS):
            return parent
    return None


# --- add --------------------------------------------------------------------------------------


@click.command("add")
@root_option
@click.option("--user", "user_id", required=True, help="User id.")
@click.option("--app", default=None, help="App id (default: default_app).")
@click.option("--project", default=None, help="Project id (default: default_project).")
@click.option("--subject", required=True, help="One-line subject.")
@click.option("--content", required=True, help="The episode's text.")
@click.option("--timestamp", default=None, help="ISO 8601 (default: now, UTC).")
@click.option("--session", "session_id", default=None, help="Session id; also the parent memcell.")
@click.option("--importance", type=WholeRange(1, 10), default=None, help="1-10.")
@json_option
@handle_errors
def add_cmd(
    root: str | None,
    user_id: str,
    app: str | None,
    project: str | None,
    subject: str,
    content: str,
    timestamp: str | None,
    session_id: str | None,
    importance: int | None,
    as_json: bool,
) -> None:
    """Append an Episode to a user's daily log and print its id."""
    from everos_reflect.index.reads import root_id_watermark
    from everos_reflect.markdown.store import MarkdownStore

    ref = UserRef.of(user_id, app, project)
    try:
        episode = new_episode(ref, subject=subject, content=content, timestamp=timestamp,
                              session_id=session_id, importance=importance)
    except InvalidEpisode as exc:
        fail(f"--{exc.field} {exc.reason}")
    meta, day = episode.meta, episode.day
    path = writable_root(root)
    note = None
    if importance is None:
        meta["importance"], note = _score_importance(path, subject, content)
        if note is not None:  # the Episode is written all the same, scored offline
            say(f"note: {note}", err=True)
    limits = load_settings(path).limits
    store = MarkdownStore(path, limits=limits,
                          seen_seq=root_id_watermark(path, limits.max_file_bytes))
    settle_interrupted(store.root)
    entry = store.append(ref, Kind.EPISODE, meta, episode.sections, day=day)
    if as_json:
        doc = {
            "id": entry.id,
            "app_id": ref.app,
            "project_id": ref.project,
            "user_id": ref.user_id,
            "timestamp": meta["timestamp"],
            "path": store.rel(store.log_path(ref, Kind.EPISODE, day)),
        }
        if note is not None:  # as the API and MCP answer: scored offline, and why
            doc["importance_note"] = note
        emit_json(doc)
    else:
        say(entry.id)


# --- lint -------------------------------------------------------------------------------------


@click.command("lint")
@root_option
@json_option
@handle_errors
def lint_cmd(root: str | None, as_json: bool) -> None:
    """Check every daily log and the config files; exit 1 on any problem (warnings too).

    Warnings are entries the daemon still indexes (e.g. a timestamp without an offset), but a
    linter that passes them would hide exactly the hand edits a user wants to hear about.
    """
    report = lint_report(existing_root(root), progress)
    problems = [Problem(**p) for p in report["problems"]]
    errors = [p for p in problems if p.severity != "warning"]
    if as_json:
        emit_json(report)
    else:
        for problem in problems:
            say(one_line(problem))
        warnings = len(problems) - len(errors)
        summary = f"{counted(report['files_checked'], 'file')} checked, " \
            f"{counted(len(errors), 'error')}"
        say(summary + (f", {counted(warnings, 'warning')}" if warnings else ""))
    if problems:
        raise SystemExit(1)


# --- status -----------------------------------------------------------------------------------


def _score_importance(root: Path, subject: str, content: str) -> tuple[int, str | None]:
    """SPEC §3/seed 000: an Episode added without importance is scored on write (the LLM
    when one is configured, in one short attempt, else the offline scorer of
    ``llm/importance.py``), and why the LLM did not score it, when it did not."""
    from everos_reflect.llm import make_llm
    from everos_reflect.llm.importance import importance_on_write, score_importance
    from everos_reflect.settings import load_settings

    try:
        llm = make_llm(load_settings(root).llm)
    except EverosError:
        return score_importance(f"{subject}: {content}"), None
    scored = importance_on_write(llm, subject.strip(), content.strip())
    return scored.importance, scored.note


#: Set-aside clusters ``status`` names one by one; the rest are counted.
SET_ASIDE_SHOWN = 10


def _print_first(console: Any, items: list[dict[str, Any]],
                 line: Callable[[dict[str, Any]], str]) -> None:
    """The first :data:`SET_ASIDE_SHOWN` of ``items``, one ``line`` each, then how many more
    (a status on a root with thousands of them stays a screen long)."""
    for item in items[:SET_ASIDE_SHOWN]:
        console.print(line(item), markup=False)
    if len(items) > SET_ASIDE_SHOWN:
        console.print(f"  and {len(items) - SET_ASIDE_SHOWN} more (`status --json` lists "
                      "every one)", markup=False)


def _when(stamp: object) -> str:
    """An ISO time as the status table shows it, to the minute (``2026-12-07 02:00``, its
    offset after it unless UTC): the full stamp with microseconds was cut to ``2026-12…``."""
    if not stamp:
        return ""
    try:
        when = datetime.fromisoformat(str(stamp))
    except ValueError:
        return shown(stamp)
    offset = when.strftime("%z")
    zone = "" if offset in ("", "+0000") else f" {offset[:3]}:{offset[3:]}"
    return when.strftime("%Y-%m-%d %H:%M") + zone


def _render_too_deep(console: Any, insights: dict[str, Any]) -> None:
    """The stale insights revalidation holds back as deeper than ``max_depth``, counted per
    tier and cap, with the setting that brings them back."""
    if "error" in insights:
        console.print(f"insights held stale: {shown(insights['error'])}", markup=False,
                      style="red")
        return
    held = insights.get("held_too_deep") or []
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for item in held:
        groups.setdefault((str(item["tier"]), int(item["max_depth"])), []).append(item)
    for (tier, cap), items in groups.items():
        one = len(items) == 1
        them, they = ("it", "it is") if one else ("them", "they are")
        console.print(f"{counted(len(items), 'insight')} held stale: a verdict would stand "
                      f"{them} deeper than max_depth {cap} ({tier}); {they} not revalidated "
                      f"until you raise max_depth in [strategies.{tier}] of ome.toml past "
                      f"{cap}, or edit {them} or {'its' if one else 'their'} evidence",
                      markup=False)
        _print_first(console, items, _too_deep_line)


def _too_deep_line(item: dict[str, Any]) -> str:
    """One insight held too deep, and the stale insights that wait for it with it (the first
    three by id, then how many more)."""
    line = f"  {item['app_id']}/{item['project_id']}/{item['user_id']}: {item['insight_id']}"
    waiting = [str(i) for i in item.get("waiting") or []]
    if waiting:
        named = ", ".join(waiting[:3]) + (f" and {len(waiting) - 3} more"
                                          if len(waiting) > 3 else "")
        line += (f" ({counted(len(waiting), 'stale insight')} citing it "
                 f"{'waits' if len(waiting) == 1 else 'wait'} with it: {named})")
    return line


def _wait(episodes: int) -> str:
    """``1 episode waits``, ``3 episodes wait``."""
    return f"{counted(episodes, 'episode')} {'waits' if episodes == 1 else 'wait'}"


def _with_lines(item: dict[str, Any]) -> list[tuple[str, int]]:
    """Each problem of a ``files_with_problems`` item with its line number (0: the whole
    file), read from the item's ``lines``, never from the text: split at its first ": ", a
    message of the whole file that led with a number ("2026: …") was shown on that line. An
    item without ``lines`` (a daemon of an earlier version) shows each problem as written."""
    # a null problem (a message the index held none of) as the table shows what is not
    # there: it was the text "None"
    problems = ["-" if p is None else str(p) for p in item.get("problems") or []]
    lines = item.get("lines")
    if not isinstance(lines, list) or len(lines) != len(problems):
        return [(problem, 0) for problem in problems]
    return [(problem, line if isinstance(line, int) and not isinstance(line, bool)
             and line > 0 else 0) for problem, line in zip(problems, lines, strict=True)]


def _render_status(doc: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Column, Table
    from rich.text import Text

    console = Console(soft_wrap=True)  # long paths stay on one line when piped
    console.print(f"root {one_line(doc['root'])}  (counts from {doc['counts_from']})",
                  markup=False)
    if doc["users"]:
        table = Table("user", "episodes", "atomic facts", "insights",
                      caption="live / deprecated")
        table.columns[0].no_wrap = True
        for user in doc["users"]:
            name = f"{user['app_id']}/{user['project_id']}/{user['user_id']}"
            cells = [f"{user[k]['live']} / {user[k]['deprecated']}"
                     for k in ("episode", "atomic_fact", "insight")]
            table.add_row(name, *cells)
        console.print(table)
    else:  # an empty table and its caption read like a rendering fault on a new root
        console.print("no users yet: `everos-reflect add` writes the first Episode")
    if doc["files_with_problems"]:
        console.print(f"[red]{counted(len(doc['files_with_problems']), 'file')} with problems"
                      "[/red]")
        for item in doc["files_with_problems"]:
            console.print(f"  {one_line(item['file'])}", markup=False)
            for problem, line in _with_lines(item):
                text = (f"line {line}: {problem.removeprefix(f'{line}: ')}" if line
                        else problem)
                console.print(f"    {one_line(text)}", markup=False)
    warned = doc.get("files_with_warnings") or []
    if warned:
        lead = "" if doc["files_with_problems"] else "no files with errors; "
        console.print(f"{lead}{counted(len(warned), 'file')} with warnings "
                      "(`everos-reflect lint` lists them)", markup=False)
    elif not doc["files_with_problems"]:
        console.print("no files with problems")
    config = doc["config"]
    # the strategies' own error, said here once (each row points here): unless the problems
    # listed are ome.toml's, it is one they do not show (a fleet's defaults under ome.toml)
    strategies_error = config.get("strategies_error")
    if strategies_error and any(Path(p["file"]).name == OME_FILE_NAME
                                for p in config["problems"]):
        strategies_error = None
    if config["ok"] and not strategies_error:
        console.print("config ok")
    else:
        console.print("[red]config problems[/red]")
        for problem in config["problems"]:
            console.print(f"  {one_line(Problem(**problem))}", markup=False)
        if config.get("problems_not_shown"):
            console.print(f"  and {config['problems_not_shown']:,} more "
                          "(`everos-reflect lint` lists them)", markup=False)
        if strategies_error:
            console.print(f"  {one_line(strategies_error)}", markup=False)
    lag = doc["index"]
    if lag is None:
        console.print("index: not built yet (run `everos-reflect reindex` or `serve`)")
    elif "error" in lag:
        console.print(f"index: {shown(lag['error'])}", markup=False, style="red")
    else:
        # a read-only root's index is read as last built: nothing here will catch it up
        fixed = " (read-only here: read as last built)" if lag.get("read_only") else ""
        if lag["files_changed"] or lag["files_deleted"]:
            # a deleted log has no change time: with none changed there is no oldest change
            ago = "" if lag["lag_seconds"] is None else (
                f" (oldest change {lag['lag_seconds']:.0f} s ago)")
            console.print(f"index: behind by {lag['files_changed']} changed and "
                          f"{lag['files_deleted']} deleted logs{ago}{fixed}")
        else:
            console.print(f"index: up to date with the Markdown{fixed}")
        if (parser := lag.get("parser_version")) is not None:
            console.print(f"index: {_parser_lag(parser, bool(lag.get('read_only')))}")
        waiting = lag.get("waiting") or []
        if waiting:
            console.print(f"index: {counted(len(waiting), 'log')} to be synced again once "
                          f"{'it stands' if len(waiting) == 1 else 'they stand'} still:",
                          markup=False)
        _print_first(console, waiting, lambda item: (
            f"  {one_line(item['file'])}: {shown(item['why'])} ({counted(item['tries'], 'try')}"
            f" since {_when(item['since'])})"))
    merges = doc.get("merges") or {}
    if merges.get("interrupted"):
        many = merges["interrupted"] != 1
        console.print(f"[red]{counted(merges['interrupted'], 'interrupted merge')} "
                      f"{'await' if many else 'awaits'} recovery[/red] (any command that "
                      f"writes, `serve` or the next run settles {'them' if many else 'it'})")
    if merges.get("interrupted_undos"):
        many = merges["interrupted_undos"] != 1
        console.print(f"[red]{counted(merges['interrupted_undos'], 'interrupted undo')} "
                      f"{'await' if many else 'awaits'} recovery[/red] (any command that "
                      f"writes, `serve` or the next run finishes {'them' if many else 'it'})")
    for item in merges.get("held_back") or []:
        owner = f"{item['app_id']}/{item['project_id']}/{item['user_id']}"
        console.print(f"{owner}: cluster {item['cluster_id']} held back after an undo "
                      f"({_wait(len(item['members']))} for a new member; "
                      "remerge_undone = true merges them)", markup=False)
    aside = merges.get("set_aside") or []
    if isinstance(aside, dict):  # could not be read
        console.print(f"set-aside clusters: {shown(aside.get('error', ''))}", markup=False,
                      style="red")
        aside = []
    if aside:
        one = len(aside) == 1
        console.print(f"{counted(len(aside), 'cluster')} set aside: the server refused "
                      f"{'its' if one else 'their'} merge for good and it is not sent again "
                      "until a member is edited, joins or leaves, or the prompts or model "
                      f"change (`clusters` marks {'it' if one else 'them'})", markup=False)
    _print_first(console, aside, lambda item: f"  {item['app_id']}/{item['project_id']}/"
                                              f"{item['user_id']}: cluster {item['cluster_id']}"
                                              f" set aside: {shown(item['reason'])}")
    for item in merges.get("live_beside_sources") or []:
        console.print(f"[red]{item['app_id']}/{item['project_id']}/{item['user_id']}: "
                      f"narrative {item['narrative']} is live beside its live "
                      f"{'source' if len(item['live_sources']) == 1 else 'sources'} "
                      f"{', '.join(item['live_sources'])}[/red]", markup=True)
    # merges' archived_toward_missing is listed under its log (files with problems)
    _render_too_deep(console, doc.get("insights") or {})
    if doc["strategies"]:
        # a strategy's name is what `enable`, `trigger` and ome.toml take: never cut short
        names = [str(row.get("name", "?")) for row in doc["strategies"]]
        table = Table(Column("strategy", no_wrap=True, min_width=max(map(len, names))),
                      "enabled", Column("cron", no_wrap=True),
                      Column("next run", overflow="fold"), Column("last run", overflow="fold"),
                      "problem")
        notes: dict[str, int] = {}
        for row in doc["strategies"]:
            last = row.get("last_run") or {}
            last_text = f"{last.get('status', '')} {_when(last.get('finished_at'))}".strip()
            problem = ("ome.toml invalid (see above)" if row.get("config_invalid")
                       else shown(row.get("unavailable") or row.get("error") or ""))
            # words, not Python reprs: "True"/"None" read as a bug (`strategies` says "-")
            table.add_row(
                str(row.get("name", "?")), "yes" if row.get("enabled") else "no",
                str(row.get("cron") or "-"),
                _when(row.get("next_run")) or "-", last_text or "never",
                # plain text, not markup: "set [llm] provider" lost its "[llm]", and a run
                # error quoting "[/x]" raised MarkupError
                Text(problem_cell(problem, notes)),
            )
        console.print(table)
        for text, number in notes.items():
            console.print(f"[{number}] {text}", markup=False, soft_wrap=True)
    known = {"root", "counts_from", "users", "totals", "files_with_problems",
             "files_with_warnings", "config",
             "index", "strategies", "merges", "insights"}
    for key, value in doc.items():
        if key not in known:
            console.print(f"[bold]{key}[/bold]")
            console.print(value)


@click.command("status")
@root_option
@fleet_defaults_option
@json_option
@handle_errors
def status_cmd(root: str | None, fleet_file: str | None, as_json: bool) -> None:
    """Users, live/deprecated counts, files with problems and config problems.

    Strategies as the daemon serving the root runs them, when one does (it keeps its last
    good ome.toml while the file is invalid). Exit 1, the report printed, when the
    configuration is invalid and no daemon runs on a good one (no strategy runs until it is
    fixed), or when the index cannot be read."""
    from everos_reflect.cli.engine_cmds import strategy_rows
    from everos_reflect.runtime import Runtime
    from everos_reflect.settings import Settings

    path = existing_root(root)
    defaults = fleet_defaults(path, fleet_file)
    # Status reports a broken config instead of failing on it, so it opens with defaults.
    settings_error = None
    try:
        settings = load_settings(path)
    except ConfigError as exc:
        settings, settings_error = Settings(), str(exc)
    runtime = Runtime(path, settings=settings, ome_defaults=defaults)
    try:
        try:
            rows, notes, error = strategy_rows(runtime, asked=fleet_file is None)
        except (EverosError, sqlite3.Error):  # the report says why (its strategies section)
            rows, notes, error = None, [], None
        doc = status_document(runtime, progress, strategies=rows)
    finally:
        runtime.close()
    if as_json:
        emit_json(doc)
    else:
        _render_status(doc)
    errors = [error] if error else []
    if settings_error is not None:
        if any(row.get("via") == "daemon" for row in rows or []):
            notes.append(f"note: {settings_error}; the daemon serving this root runs on the "
                         "settings it started with")
        else:
            # the strategies were shown with the shipped settings: none of them runs, as
            # `serve` refuses to start (it said "enabled, next run Monday 02:00", exit 0)
            errors.append(f"{settings_error}; no strategy runs until it is fixed (`serve` "
                          "does not start)")
    index_error = (doc.get("index") or {}).get("error")
    if index_error:  # as every command reading it fails, and `fleet status` on such a root
        errors.append(f"the index cannot be read: {index_error}")
    for note in notes:
        say(note, err=True)
    for line in errors[:-1]:
        say(f"error: {line}", err=True)
    if errors:
        fail(errors[-1])


# --- enable / disable -------------------------------------------------------------------------


def known_strategy_names() -> set[str]:
    """Registered strategies, plus the built-in ones so a partial install still works."""
    try:
        from everos_reflect.engine.registry import known_strategies
    except ImportError:
        return set(BUILTIN_STRATEGIES)
    return set(known_strategies()) | BUILTIN_STRATEGIES


def set_enabled(text: str, name: str, enabled: bool, file: str) -> str:
    """``text`` of an ome.toml with ``strategies.<name>.enabled`` set; all else byte-for-byte.

    Raises :class:`ConfigError` (file, line, reason) when ``text`` is not valid to begin with,
    so a broken file is reported rather than rewritten.
    """
    parse_ome(text, file)
    bom = "\ufeff" if text.startswith("\ufeff") else ""  # kept, as every other byte
    doc = tomlkit.parse(text.removeprefix(bom))
    if "strategies" not in doc:
        doc.add("strategies", tomlkit.table(is_super_table=True))
    strategies = doc["strategies"]
    if name not in strategies:
        # `strategies = { ... }` written inline holds only inline tables: a [table] there
        # raised ValueError, a traceback instead of the change
        inline = isinstance(strategies, tomlkit.items.InlineTable)
        table = tomlkit.inline_table() if inline else tomlkit.table()
        table.add("enabled", enabled)
        strategies[name] = table  # type: ignore[index]
    else:
        strategies[name]["enabled"] = enabled  # type: ignore[index]
    return bom + tomlkit.dumps(doc)


def _refuse_if_not_in_force(text: str, file: str) -> None:
    """:class:`ConfigError` when the edited ``ome.toml`` would not validate (a problem
    elsewhere in it, an unknown key say): a daemon keeps its last good configuration then,
    so ``disable`` said "disabled" and exit 0 while the strategy went on running, and
    ``enable`` "enabled" one that never ran."""
    try:
        from everos_reflect.engine.registry import validate_ome
    except ImportError:  # a partial install: nothing to validate against
        return
    try:
        validate_ome(parse_ome(text, file), file)
    except ConfigError as exc:
        # first: a message names only the first problems (errors.MAX_PROBLEMS_SHOWN)
        raise ConfigError([(file, "(not changed)", (
            "fix this file first: a daemon keeps its last good configuration "
            "while the file is invalid, so the change would not take effect")),
            *exc.problems]) from None


def _toggle(root: str | None, name: str, enabled: bool, as_json: bool) -> None:
    known = known_strategy_names()
    if name not in known:
        fail(unknown_strategy(name, known))
    folder = existing_root(root)
    path, shown = folder / OME_FILE_NAME, config_file(folder, OME_FILE_NAME)
    try:
        data = read_config_bytes(path)
        before = packaged_text("ome.toml") if data is None else config_text(data, shown)
    except OSError as exc:
        fail(f"{shown}: {os_reason(exc)}")
    after = set_enabled(before, name, enabled, shown)
    _refuse_if_not_in_force(after, shown)
    changed = after != before or not path.exists()
    if changed:
        _write_atomic(folder, path, after)
    state = "enabled" if enabled else "disabled"
    if as_json:
        emit_json({"name": name, "enabled": enabled, "file": str(path), "changed": changed})
    else:
        say(f"{name} {state} in {one_line(path)}" if changed else f"{name} already {state}")


@click.command("enable")
@click.argument("name")
@root_option
@json_option
@handle_errors
def enable_cmd(name: str, root: str | None, as_json: bool) -> None:
    """Turn strategy NAME on in ome.toml (comments and layout kept)."""
    _toggle(root, name, True, as_json)


@click.command("disable")
@click.argument("name")
@root_option
@json_option
@handle_errors
def disable_cmd(name: str, root: str | None, as_json: bool) -> None:
    """Turn strategy NAME off in ome.toml (comments and layout kept)."""
    _toggle(root, name, False, as_json)


COMMANDS: list[click.Command] = [init_cmd, add_cmd, lint_cmd, status_cmd, enable_cmd,
                                 disable_cmd]
