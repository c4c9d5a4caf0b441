"""Commands around the memory root itself: ``init``, ``add``, ``lint``, ``status``,
``enable`` / ``disable``.

The runtime and the Markdown store are imported inside the commands that need them, so
``init`` and ``enable`` stay quick and work even before a root holds any log.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import tomlkit

from everos_reflect.cli.common import (
    emit_json,
    existing_root,
    fail,
    handle_errors,
    json_option,
    progress,
    root_option,
    settle_interrupted,
)
from everos_reflect.errors import ConfigError, EverosError, InvalidEpisode
from everos_reflect.markdown.parser import UNDONE
from everos_reflect.model import Kind, UserRef, new_episode
from everos_reflect.settings import (
    OME_FILE_NAME,
    USER_FILE_NAME,
    everos_toml_template,
    load_ome,
    load_settings,
    packaged_text,
    parse_ome,
)
from everos_reflect.strategies.consistency import live_beside_sources

if TYPE_CHECKING:
    from everos_reflect.markdown.store import MarkdownStore
    from everos_reflect.runtime import Runtime

#: Strategies shipped with the package. Used only when the engine's registry cannot be imported
#: (e.g. a partial install), so ``enable`` still guards against typos.
BUILTIN_STRATEGIES = frozenset({"reflect_episodes"})


def _resolve(root: str | None) -> Path:
    from everos_reflect.runtime import resolve_root

    return resolve_root(root)


def _write_atomic(path: Path, text: str) -> None:
    """Temp file in the same folder, fsync, rename: a reader never sees half a config file.

    The file keeps its permissions (mkstemp would make it owner-only).
    """
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
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
    path = _resolve(target or root)  # click.Path already refused an existing file
    files = {
        path / USER_FILE_NAME: everos_toml_template(),
        path / OME_FILE_NAME: packaged_text("ome.toml"),
    }
    existing = [p for p in files if p.exists()]
    if existing and not force:
        names = ", ".join(str(p) for p in existing)
        fail(f"refusing to overwrite {names} (use --force to replace)")
    path.mkdir(parents=True, exist_ok=True)
    for file, text in files.items():
        _write_atomic(file, text)
    if as_json:
        emit_json({"root": str(path), "written": [str(p) for p in files]})
        return
    click.echo(f"Initialized memory root {path}")
    click.echo(f"  settings:   {path / USER_FILE_NAME} (all keys commented out = defaults)")
    click.echo(f"  strategies: {path / OME_FILE_NAME} (enable with: everos-reflect enable "
               f"reflect_episodes --root {path})")


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
@click.option("--importance", type=click.IntRange(1, 10), default=None, help="1-10.")
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
    from everos_reflect.markdown.store import MarkdownStore

    ref = UserRef.of(user_id, app, project)
    try:
        episode = new_episode(ref, subject=subject, content=content, timestamp=timestamp,
                              session_id=session_id, importance=importance)
    except InvalidEpisode as exc:
        fail(f"--{exc.field} {exc.reason}")
    meta, day = episode.meta, episode.day
    path = existing_root(root)
    if importance is None:
        meta["importance"] = _score_importance(path, subject, content)
    store = MarkdownStore(path, limits=load_settings(path).limits)
    settle_interrupted(store.root)
    entry = store.append(ref, Kind.EPISODE, meta, episode.sections, day=day)
    if as_json:
        emit_json({
            "id": entry.id,
            "app_id": ref.app,
            "project_id": ref.project,
            "user_id": ref.user_id,
            "timestamp": meta["timestamp"],
            "path": store.rel(store.log_path(ref, Kind.EPISODE, day)),
        })
    else:
        click.echo(entry.id)


# --- lint -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """One thing ``lint`` or ``status`` found wrong: where, and why."""

    file: str
    line: int
    message: str
    severity: str = "error"

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        suffix = " (warning)" if self.severity == "warning" else ""
        return f"{where}: {self.message}{suffix}"

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "message": self.message,
                "severity": self.severity}


def _strategy_problems(tables: dict[str, dict[str, Any]], file: str) -> list[tuple[str, str, str]]:
    """Unknown strategy names, and each registered strategy's own checks of its table."""
    try:
        from everos_reflect.engine import registry
    except ImportError:
        registry = None  # type: ignore[assignment]
    registered = set(registry.known_strategies()) if registry is not None else set()
    known = registered | BUILTIN_STRATEGIES
    found: list[tuple[str, str, str]] = []
    for name, table in tables.items():
        if name not in known:
            found.append((file, f"strategies.{name}",
                          f"unknown strategy (known: {', '.join(sorted(known))})"))
        elif registry is not None and name in registered:
            try:
                registry.validate_strategy_settings(name, table, file)
            except ConfigError as exc:
                found.extend(exc.problems)
    return found


def config_problems(root: Path) -> list[Problem]:
    """Problems of ``everos.toml`` and ``ome.toml`` (shape, and each strategy's values when the
    engine's registry is available)."""
    found: list[tuple[str, str, str]] = []
    try:
        load_settings(root)
    except ConfigError as exc:
        found.extend(exc.problems)
    try:
        tables = load_ome(root)
    except ConfigError as exc:
        found.extend(exc.problems)
    else:
        found.extend(_strategy_problems(tables, str(root / OME_FILE_NAME)))
    problems = []
    for file, key, reason in found:
        line = int(key[5:]) if key.startswith("line ") and key[5:].isdigit() else 0
        message = reason if line else f"{key}: {reason}"
        problems.append(Problem(file, line, message))
    return problems


def _frontmatter_line(text: str, key: str) -> int:
    """Line of ``key:`` inside a file's leading frontmatter, else 1 (the file's start)."""
    lines = text.splitlines()
    for number, line in enumerate(lines[1:], 2):
        if line.strip() == "---":
            break
        if line.lstrip().startswith((f"{key}:", f"'{key}':", f'"{key}":')):
            return number
    return 1


@dataclass
class StoreScan:
    """One pass over every daily log: what ``lint`` reports and what ``status`` counts."""

    files: int = 0
    problems: list[Problem] = field(default_factory=list)
    #: per user, "<kind>:live" / "<kind>:deprecated" -> number of entries
    counts: dict[UserRef, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))


def scan_store(
    store: MarkdownStore,
    files: Iterable[Path] | None = None,
    advance: Callable[[int], None] | None = None,
) -> StoreScan:
    """Parse every daily log once; collect problems (file order) and live/deprecated counts.

    The parser already reports ids whose kind or date does not match their file and ids
    repeated in a file; since an id's kind and date name the one file that may hold it, that
    covers every duplicate per user. Added here, across a user's files:
    ``deprecated_entries`` naming unknown ids, and atomic facts whose episode is gone.
    Only ids and references are kept between the two passes, not the files' text.
    """
    scan = StoreScan()
    kinds_of: dict[UserRef, dict[str, Kind]] = defaultdict(dict)
    deprecations: list[tuple[str, UserRef, set[str], list[tuple[str, str, int]]]] = []
    fact_parents: list[tuple[str, UserRef, str, int, str | None]] = []
    live_ids: dict[UserRef, set[str]] = defaultdict(set)
    narratives: list[tuple[str, UserRef, str, int, list[str]]] = []
    for path in store.iter_files() if files is None else files:
        if advance is not None:
            advance(1)
        rel = store.rel(path)
        try:
            log = store.read(path)
        except FileNotFoundError:
            continue  # removed since it was listed
        except OSError as exc:
            scan.problems.append(Problem(rel, 0, f"cannot read: {exc.strerror or exc}"))
            continue
        scan.files += 1
        for d in log.diagnostics:
            severity = "warning" if d.severity == "warning" else "error"
            scan.problems.append(Problem(rel, d.line, d.message, severity))
        located = store.ref_for_path(path)
        if located is None:
            scan.problems.append(Problem(rel, 0, "not a daily log of any user"))
            continue
        ref, kind, _ = located
        for entry in log.entries:
            kinds_of[ref][entry.id] = kind
            state = "deprecated" if entry.deprecated_by else "live"
            scan.counts[ref][f"{kind.value}:{state}"] += 1
            if kind == Kind.ATOMIC_FACT and entry.parent_type == "episode":
                fact_parents.append((rel, ref, entry.id, entry.line, entry.parent_id))
            if not entry.deprecated_by:
                live_ids[ref].add(entry.id)
                if kind == Kind.EPISODE and entry.parent_type == "cluster" and entry.sources:
                    narratives.append((rel, ref, entry.id, entry.line, entry.sources))
        if log.deprecated_entries:
            marks = [(old, new, _frontmatter_line(log.text, old))
                     for old, new in log.deprecated_entries.items()]
            deprecations.append((rel, ref, {e.id for e in log.entries}, marks))

    for rel, ref, own, marks in deprecations:
        for old, new, line in marks:
            if old not in own:
                scan.problems.append(Problem(
                    rel, line, f"deprecated_entries: {old} is not an entry of this file"))
            if new != UNDONE and new not in kinds_of[ref]:
                scan.problems.append(Problem(
                    rel, line, f"deprecated_entries: {old} points at unknown id {new}"))
    for rel, ref, fact_id, line, parent in fact_parents:
        if parent is None or kinds_of[ref].get(parent) != Kind.EPISODE:
            scan.problems.append(Problem(
                rel, line, f"atomic fact {fact_id}: parent episode {parent} not found"))
    for rel, ref, narrative, line, sources in narratives:
        for item in live_beside_sources({narrative: sources}, live_ids[ref]):
            scan.problems.append(Problem(rel, line, item.message()))
    return scan


def journal_problems(root: Path) -> list[Problem]:
    """Interrupted merges still in the journal (lint reads, it never settles them)."""
    from everos_reflect.strategies.journal import has_pending

    if not has_pending(root):
        return []
    return [Problem(".index/sqlite/system.db", 0,
                    "merges interrupted by a crash await recovery (any command that writes, "
                    "`serve` or the next run settles them)")]


#: How ``lint``/``status`` word a symlink the store refused to follow.
OUTSIDE_ROOT = "symlink leading outside the memory root: not read (nothing outside the root is)"


def _scan_with_progress(store: MarkdownStore, description: str) -> StoreScan:
    outside: list[str] = []
    files = list(store.iter_files(outside=outside))
    with progress(description, len(files)) as advance:
        scan = scan_store(store, files, advance)
    scan.problems[:0] = [Problem(rel, 0, OUTSIDE_ROOT) for rel in sorted(set(outside))]
    return scan


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


@click.command("lint")
@root_option
@json_option
@handle_errors
def lint_cmd(root: str | None, as_json: bool) -> None:
    """Check every daily log and the config files; exit 1 on any problem (warnings too).

    Warnings are entries the daemon still indexes (e.g. a timestamp without an offset), but a
    linter that passes them would hide exactly the hand edits a user wants to hear about.
    """
    from everos_reflect.markdown.store import MarkdownStore

    path = existing_root(root)
    try:
        limits = load_settings(path).limits
    except ConfigError:
        limits = None  # reported below with the other config problems; checked with defaults
    scan = _scan_with_progress(MarkdownStore(path, limits=limits), "Checking daily logs")
    checked = scan.files
    problems = config_problems(path) + scan.problems + journal_problems(path)
    errors = [p for p in problems if p.severity != "warning"]
    if as_json:
        emit_json({
            "root": str(path),
            "ok": not problems,
            "files_checked": checked,
            "problems": [p.as_dict() for p in problems],
        })
    else:
        for problem in problems:
            click.echo(str(problem))
        warnings = len(problems) - len(errors)
        summary = f"{_plural(checked, 'file')} checked, {_plural(len(errors), 'error')}"
        click.echo(summary + (f", {_plural(warnings, 'warning')}" if warnings else ""))
    if problems:
        raise SystemExit(1)


# --- status -----------------------------------------------------------------------------------


def _counts_from_index(root: Path) -> tuple[dict[UserRef, Counter[str]], list[dict[str, Any]]]:
    from everos_reflect.index import db as dbmod

    conn = dbmod.connect(root, readonly=True)
    try:
        counts: dict[UserRef, Counter[str]] = defaultdict(Counter)
        rows = conn.execute(
            "SELECT app_id, project_id, user_id, kind, deprecated_by IS NOT NULL AS dep, "
            "COUNT(*) AS n FROM entries GROUP BY 1, 2, 3, 4, 5"
        )
        for row in rows:
            ref = UserRef(row["app_id"], row["project_id"], row["user_id"])
            counts[ref][f"{row['kind']}:{'deprecated' if row['dep'] else 'live'}"] += row["n"]
        bad = []
        for row in conn.execute("SELECT path, problems FROM files WHERE problems != '[]' "
                                "ORDER BY path"):
            lines = [_problem_line(p) for p in json.loads(row["problems"])]
            if any(lines):
                bad.append({"file": row["path"], "problems": [x for x in lines if x]})
        return counts, bad
    finally:
        conn.close()


def _problem_line(problem: Any) -> str | None:
    """``"line: message"``, the one form ``status`` shows a file's problem in, from a
    diagnostic the index recorded (warnings are left to ``lint``)."""
    if isinstance(problem, dict):
        if problem.get("severity") == "warning":
            return None
        return f"{problem.get('line', 0)}: {problem.get('message', '')}"
    return str(problem)


def _counts_from_markdown(
    store: MarkdownStore,
) -> tuple[dict[UserRef, Counter[str]], list[dict[str, Any]]]:
    scan = _scan_with_progress(store, "Reading daily logs")
    by_file: dict[str, list[str]] = defaultdict(list)
    for problem in scan.problems:
        if problem.severity != "warning":
            by_file[problem.file].append(f"{problem.line}: {problem.message}")
    return scan.counts, [{"file": f, "problems": msgs} for f, msgs in sorted(by_file.items())]


def status_document(runtime: Runtime) -> dict[str, Any]:
    """Everything ``status`` reports, as one JSON-ready document.

    Counts come from ``system.db`` when the index exists (cheap), else from parsing the
    Markdown. New sections (e.g. "strategies") are added as new top-level keys; the text
    renderer shows keys it does not know generically.
    """
    from everos_reflect.index import db as dbmod

    root = runtime.root
    source = "markdown"
    counts = None
    if dbmod.db_path(root).exists():
        try:
            counts, bad_files = _counts_from_index(root)
            source = "index"
        except sqlite3.Error:
            counts = None
    if counts is None:
        counts, bad_files = _counts_from_markdown(runtime.store)

    outside: list[str] = []
    users = set(counts) | set(runtime.store.iter_users(outside))
    if source == "index":  # the Markdown scan reported these already
        bad_files = sorted(bad_files + [{"file": rel, "problems": [f"0: {OUTSIDE_ROOT}"]}
                                        for rel in sorted(set(outside))],
                           key=lambda item: item["file"])
    kinds = [k.value for k in Kind]
    user_docs = []
    totals = {k: {"live": 0, "deprecated": 0} for k in kinds}
    for ref in sorted(users):
        doc: dict[str, Any] = {"app_id": ref.app, "project_id": ref.project,
                               "user_id": ref.user_id}
        for kind in kinds:
            live, dep = counts[ref][f"{kind}:live"], counts[ref][f"{kind}:deprecated"]
            doc[kind] = {"live": live, "deprecated": dep}
            totals[kind]["live"] += live
            totals[kind]["deprecated"] += dep
        user_docs.append(doc)
    config = config_problems(root)
    return {
        "root": str(root),
        "counts_from": source,
        "users": user_docs,
        "totals": totals,
        "files_with_problems": bad_files,
        "config": {"ok": not config, "problems": [p.as_dict() for p in config]},
        "index": _index_lag(runtime) if source == "index" else None,
        "merges": _merge_consistency(root) if source == "index" else None,
        "strategies": _strategies(runtime),
    }


def _index_lag(runtime: Runtime) -> dict[str, Any] | None:
    """How far the derived index is behind the Markdown (None if it cannot be read)."""
    from everos_reflect.index.sync import Indexer

    try:
        return Indexer(runtime).pending()
    except (EverosError, sqlite3.Error, OSError) as exc:
        return {"error": str(exc)}


def _merge_consistency(root: Path) -> dict[str, Any] | None:
    """Interrupted merges and live narratives beside live sources, from the index."""
    from everos_reflect.index import db as dbmod
    from everos_reflect.strategies.consistency import index_report

    try:
        conn = dbmod.connect(root, readonly=True)
    except sqlite3.Error:
        return None
    try:
        return index_report(conn)
    except sqlite3.Error as exc:
        return {"error": str(exc)}
    finally:
        conn.close()


def _strategies(runtime: Runtime) -> list[dict[str, Any]]:
    """Schedule and last result of each strategy; never fails the whole status."""
    from everos_reflect.engine.engine import strategies_status

    try:
        return strategies_status(runtime)
    except (EverosError, sqlite3.Error) as exc:
        return [{"error": str(exc)}]


def _score_importance(root: Path, subject: str, content: str) -> int:
    """SPEC §3/seed 000: an Episode added without importance is scored on write (the LLM
    when one is configured, else the offline scorer of ``llm/importance.py``)."""
    from everos_reflect.llm import make_llm
    from everos_reflect.llm.importance import importance_on_write, score_importance
    from everos_reflect.settings import load_settings

    try:
        llm = make_llm(load_settings(root).llm)
    except EverosError:
        return score_importance(f"{subject}: {content}")
    return importance_on_write(llm, subject.strip(), content.strip())[0]


def _render_status(doc: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(soft_wrap=True)  # long paths stay on one line when piped
    console.print(f"root {doc['root']}  (counts from {doc['counts_from']})", markup=False)
    table = Table("user", "episodes", "atomic facts", "insights", caption="live / deprecated")
    table.columns[0].no_wrap = True
    for user in doc["users"]:
        name = f"{user['app_id']}/{user['project_id']}/{user['user_id']}"
        cells = [f"{user[k]['live']} / {user[k]['deprecated']}"
                 for k in ("episode", "atomic_fact", "insight")]
        table.add_row(name, *cells)
    console.print(table)
    if doc["files_with_problems"]:
        console.print(f"[red]{len(doc['files_with_problems'])} files with problems[/red]")
        for item in doc["files_with_problems"]:
            console.print(f"  {item['file']}", markup=False)
            for problem in item["problems"]:
                line, _, message = str(problem).partition(": ")
                shown = (f"line {line}: {message}" if line.isdigit() and line != "0"
                         else message if line == "0" else str(problem))
                console.print(f"    {shown}", markup=False)
    else:
        console.print("no files with problems")
    if doc["config"]["ok"]:
        console.print("config ok")
    else:
        console.print("[red]config problems[/red]")
        for problem in doc["config"]["problems"]:
            console.print(f"  {Problem(**problem)}", markup=False)
    lag = doc["index"]
    if lag is None:
        console.print("index: not built yet (run `everos-reflect reindex` or `serve`)")
    elif "error" in lag:
        console.print(f"[red]index: {lag['error']}[/red]", markup=True)
    elif lag["files_changed"] or lag["files_deleted"]:
        console.print(f"index: behind by {lag['files_changed']} changed and "
                      f"{lag['files_deleted']} deleted logs (oldest change "
                      f"{lag['lag_seconds']:.0f} s ago)")
    else:
        console.print("index: up to date with the Markdown")
    merges = doc.get("merges") or {}
    if merges.get("interrupted"):
        console.print(f"[red]{merges['interrupted']} interrupted merge(s) await recovery[/red] "
                      "(any command that writes, `serve` or the next run settles them)")
    for item in merges.get("held_back") or []:
        console.print(f"{item['app_id']}/{item['project_id']}/{item['user_id']}: cluster "
                      f"{item['cluster_id']} held back after an undo ({len(item['members'])} "
                      "episodes wait for a new member; remerge_undone = true merges them)",
                      markup=False)
    for item in merges.get("live_beside_sources") or []:
        console.print(f"[red]{item['app_id']}/{item['project_id']}/{item['user_id']}: "
                      f"narrative {item['narrative']} is live beside its live source(s) "
                      f"{', '.join(item['live_sources'])}[/red]", markup=True)
    for item in merges.get("archived_toward_missing") or []:
        console.print(f"{item['app_id']}/{item['project_id']}/{item['user_id']}: "
                      f"{item['entry']} is archived toward {item['archived_toward']}, which no "
                      "log holds (run `lint`)", markup=False, style="red")
    if doc["strategies"]:
        table = Table("strategy", "enabled", "cron", "next run", "last run", "problem")
        for row in doc["strategies"]:
            last = row.get("last_run") or {}
            last_text = f"{last.get('status', '')} {last.get('finished_at') or ''}".strip()
            table.add_row(
                str(row.get("name", "?")), str(row.get("enabled", "")), str(row.get("cron", "")),
                str(row.get("next_run") or "-"), last_text or "never",
                str(row.get("config_error") or row.get("unavailable") or row.get("error")
                    or ""),
            )
        console.print(table)
    known = {"root", "counts_from", "users", "totals", "files_with_problems", "config",
             "index", "strategies", "merges"}
    for key, value in doc.items():
        if key not in known:
            console.print(f"[bold]{key}[/bold]")
            console.print(value)


@click.command("status")
@root_option
@json_option
@handle_errors
def status_cmd(root: str | None, as_json: bool) -> None:
    """Users, live/deprecated counts, files with problems and config problems."""
    from everos_reflect.runtime import Runtime
    from everos_reflect.settings import Settings

    path = existing_root(root)
    # Status reports a broken config instead of failing on it, so it opens with defaults.
    try:
        settings = load_settings(path)
    except ConfigError:
        settings = Settings()
    runtime = Runtime(path, settings=settings)
    try:
        doc = status_document(runtime)
    finally:
        runtime.close()
    if as_json:
        emit_json(doc)
    else:
        _render_status(doc)


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
    doc = tomlkit.parse(text)
    if "strategies" not in doc:
        doc.add("strategies", tomlkit.table(is_super_table=True))
    strategies = doc["strategies"]
    if name not in strategies:
        table = tomlkit.table()
        table.add("enabled", enabled)
        strategies[name] = table  # type: ignore[index]
    else:
        strategies[name]["enabled"] = enabled  # type: ignore[index]
    return tomlkit.dumps(doc)


def _toggle(root: str | None, name: str, enabled: bool, as_json: bool) -> None:
    known = known_strategy_names()
    if name not in known:
        fail(f"unknown strategy {name!r} (known: {', '.join(sorted(known))})")
    path = existing_root(root) / OME_FILE_NAME
    before = path.read_text("utf-8") if path.exists() else packaged_text("ome.toml")
    after = set_enabled(before, name, enabled, str(path))
    changed = after != before or not path.exists()
    if changed:
        _write_atomic(path, after)
    state = "enabled" if enabled else "disabled"
    if as_json:
        emit_json({"name": name, "enabled": enabled, "file": str(path), "changed": changed})
    else:
        click.echo(f"{name} {state} in {path}" if changed else f"{name} already {state}")


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
