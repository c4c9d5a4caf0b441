"""What ``status`` reports about a memory root: users and counts, files with problems, config
problems, index lag, merge consistency and each strategy's schedule. Library code: the CLI
(``status``) and the HTTP API (``GET /api/v1/status``) call :func:`status_document` and only
render it differently.
"""

from __future__ import annotations

import sqlite3
from collections import Counter, defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from everos_reflect.errors import MAX_PROBLEMS_SHOWN, EverosError
from everos_reflect.fileio import error_text, in_the_way, not_a_folder
from everos_reflect.lint import (
    Problem,
    Progress,
    config_problems,
    irregular_problems,
    misnamed_problems,
    scan_with_outside,
    skipped_problems,
)
from everos_reflect.model import Kind, UserRef, path_text

if TYPE_CHECKING:
    from everos_reflect.engine.engine import Engine
    from everos_reflect.markdown.store import MarkdownStore
    from everos_reflect.runtime import Runtime


#: ``(counts per user, files with problems, warnings per file)``: what status counts.
_Counted = tuple[dict[UserRef, Counter[str]], list[dict[str, Any]], Counter[str]]


def _counts_from_index(root: Path, store: MarkdownStore) -> _Counted | None:
    """The counts the index holds; ``None`` for an index that was never built: it holds no
    log while the root has some (a command that opened ``system.db`` before any sync made
    it, e.g. ``trigger`` of a disabled strategy: its "0 / 0" was taken for the root's)."""
    from everos_reflect.index import db as dbmod
    from everos_reflect.index import reads

    conn = dbmod.connect(root, readonly=True)
    try:
        if not reads.holds_any_log(conn) and next(iter(store.iter_files()), None) is not None:
            return None
        counts: dict[UserRef, Counter[str]] = defaultdict(Counter)
        for (ref, kind, archived), n in reads.entry_counts(conn).items():
            counts[ref][f"{kind}:{'deprecated' if archived else 'live'}"] += n
        bad = []
        warned: Counter[str] = Counter()
        for path, problems in reads.file_problems(conn):
            lines = [located(p) for p in problems]
            if any(lines):
                bad.append({"file": path, "problems": [x for x in lines if x]})
            warned[path] += sum(1 for p in problems
                                if isinstance(p, dict) and p.get("severity") == "warning")
        return counts, bad, +warned
    finally:
        conn.close()


def at_line(line: object, message: str) -> str:
    """``"7: message"``, the one form ``status`` shows a file's problem in (the file is named
    beside it), or the message alone for a problem of the whole file (line 0), as
    :func:`~everos_reflect.errors.file_at` names the file alone: ``status --json`` wrote
    "0: a folder where a daily log goes", a line no file has."""
    return f"{line}: {message}" if isinstance(line, int) and line > 0 else message


#: A file's problem as ``status`` keeps it until it writes the document: ``(line, message)``,
#: line 0 for a problem of the whole file, message ``None`` for one the index holds none of.
Located = tuple[int, str | None]


def line_of(line: object) -> int:
    """``line`` as a problem's line number: a line of the file (1 and up), else 0 (the whole
    file; also what is no line number, from a hand-edited index)."""
    return line if isinstance(line, int) and not isinstance(line, bool) and line > 0 else 0


def located(problem: Any) -> Located | None:
    """``(line, message)`` of a diagnostic the index recorded (warnings are left to
    ``lint``)."""
    if isinstance(problem, dict):
        if problem.get("severity") == "warning":
            return None
        return line_of(problem.get("line", 0)), _message_of(problem.get("message", ""))
    return 0, _message_of(problem)


def _message_of(value: object) -> str | None:
    """A recorded problem's message as text, ``None`` for a null one (a hand-edited or damaged
    index): it was shown as the text "None" (``status``'s "line 3: None", ``--json``'s
    ``"3: None"``), a message nobody wrote; ``status`` shows it as its table shows any value
    that is not there ("-"), ``--json`` as null."""
    return None if value is None else str(value)


def problem_line(problem: Any) -> str | None:
    """:func:`at_line` of a diagnostic the index recorded (warnings are left to ``lint``)."""
    found = located(problem)
    return None if found is None else at_line(found[0], "-" if found[1] is None else found[1])


def problems_item(file: str, problems: list[Located]) -> dict[str, Any]:
    """One item of ``files_with_problems``: the file, each problem as ``"7: message"`` (the
    message alone for the whole file), and in ``lines`` each one's line number (0: the whole
    file), so that a reader never takes a message's own lead for one: the renderer split
    "N: message" at the first ": ", and a problem of the whole file whose message began
    with a number and ": " was shown as being on that line."""
    return {"file": path_text(file),
            "problems": [None if message is None else path_text(at_line(line, message))
                         for line, message in problems],
            "lines": [line for line, _ in problems]}


def _counts_from_markdown(store: MarkdownStore, progress: Progress | None) -> _Counted:
    scan = scan_with_outside(store, "Reading daily logs", progress)
    by_file: dict[str, list[Located]] = defaultdict(list)
    warned: Counter[str] = Counter()
    for problem in scan.problems:
        if problem.severity == "warning":
            warned[problem.file] += 1
        else:
            by_file[problem.file].append((line_of(problem.line), problem.message))
    return (scan.counts, [{"file": f, "problems": msgs} for f, msgs in sorted(by_file.items())],
            warned)


def status_document(runtime: Runtime, progress: Progress | None = None, *,
                    strategies: list[dict[str, Any]] | None = None,
                    engine: Engine | None = None) -> dict[str, Any]:
    """Everything ``status`` reports, as one JSON-ready document.

    Counts come from ``system.db`` when the index exists (cheap), else from parsing the
    Markdown. ``strategies``: the strategy rows when the caller has better ones (the daemon's
    scheduler knows the next fire times); else they are computed. New sections are added as
    new top-level keys; the CLI's text renderer shows keys it does not know generically.
    ``engine``: the daemon's, whose strategy settings a run is given (else ``ome.toml`` is
    read as a run's engine reads it), for the holds a run applies.
    """
    from everos_reflect.index import db as dbmod

    root = runtime.root
    if engine is None:  # one reading of ome.toml (and one log of a broken one) for both uses
        from everos_reflect.engine.engine import Engine

        engine = Engine(runtime, recover=False)
    source = "markdown"
    counts = None
    unreadable: dict[str, Any] | None = None  # the index there is, when it cannot be read
    if dbmod.db_built(root):
        try:
            indexed = _counts_from_index(root, runtime.store)
        except sqlite3.Error as exc:
            # counted from the Markdown, and said: it read "index: not built yet"
            indexed, unreadable = None, {"error": str(exc)}
        if indexed is not None:
            counts, bad_files, warned = indexed
            source = "index"
    if counts is None:
        counts, bad_files, warned = _counts_from_markdown(runtime.store, progress)

    outside: list[str] = []
    invalid: list[tuple[str, str]] = []
    users = set(counts) | set(runtime.store.iter_users(outside, invalid))
    if source == "index":  # the Markdown scan reported these already
        # a folder, FIFO or device where a log goes is in no index: only a listing finds it;
        # nor is a log the indexer may not open (it skips it): only opening it finds that
        irregular: list[str] = []
        misnamed: list[str] = []  # nor a Markdown file named like no log (lint warns)
        found: dict[str, list[Located]] = defaultdict(list)
        for item in bad_files:
            found[item["file"]] += item["problems"]
        for path in runtime.store.iter_files(irregular=irregular, misnamed=misnamed):
            refused = runtime.store.refusal(path)
            if refused is not None:  # recorded too by a sync that found it standing still
                rel = runtime.store.rel(path)
                if (0, refused) not in found.get(rel, ()):
                    found[rel].append((0, refused))
        for p in skipped_problems(outside, invalid) + irregular_problems(root, irregular):
            if p.severity == "warning":  # a README among user folders: lint names it
                warned[p.file] += 1
            else:
                found[p.file].append((line_of(p.line), p.message))
        # lint's checks across a user's logs, asked of the index, not of every log
        for file, problem in _cross_file_problems(runtime):
            found[file].append(problem)
        bad_files = [{"file": f, "problems": msgs} for f, msgs in sorted(found.items())]
        for p in misnamed_problems(misnamed):
            warned[p.file] += 1
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
    rows, strategies_error, in_force = _said_once(
        _strategies(runtime, engine) if strategies is None else strategies)
    config_doc = _config_doc(config)
    if in_force is not None:
        config_doc["in_force"] = in_force
    if strategies_error is not None:
        config_doc["strategies_error"] = strategies_error
    return {
        "root": path_text(root),
        "counts_from": source,
        "users": user_docs,
        "totals": totals,
        # a byte of a folder's name that is not UTF-8 as \xff: the API's status failed on it
        "files_with_problems": [problems_item(item["file"], item["problems"])
                                for item in bad_files],
        # warnings are lint's to show: status counts them, so "no files with problems" is
        # not all it says of a root lint fails on
        "files_with_warnings": [{"file": path_text(f), "warnings": n}
                                for f, n in sorted(warned.items())],
        "config": config_doc,
        "index": _index_lag(runtime) if source == "index" else unreadable,
        "merges": _merges(runtime, engine) if source == "index" else None,
        "insights": _insights(runtime, engine) if source == "index" else None,
        "strategies": rows,
    }


def config_error_once(rows: list[dict[str, Any]],
                      ) -> tuple[list[dict[str, Any]], str | None]:
    """The strategy rows with their configuration error said once: the error (the same for
    every row: ``ome.toml`` as the engine reads it) goes to ``config.strategies_error``, and
    each row says only whether it applies (``config_invalid``). Every row repeated the whole
    message, up to 20 problems, seven times over."""
    rows, error, _ = _said_once(rows)
    return rows, error


def _said_once(rows: list[dict[str, Any]],
               ) -> tuple[list[dict[str, Any]], str | None, str | None]:
    """:func:`config_error_once`, and which configuration is in force (``ome.toml``,
    ``last_good``, ``none``: the same for every row) taken off the rows too: each row
    repeated it (``config_in_force``)."""
    error = next((str(r["config_error"]) for r in rows if r.get("config_error")), None)
    in_force = next((str(r["config_in_force"]) for r in rows if r.get("config_in_force")),
                    None)
    out = []
    for row in rows:
        if "config_error" in row:
            row = {k: v for k, v in row.items() if k != "config_error"}
            row["config_invalid"] = error is not None
        out.append({k: v for k, v in row.items() if k != "config_in_force"})
    return out, error, in_force


def strategies_document(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The strategy rows as every listing of them answers (``strategies --json``, the API's
    ``/ome/strategies``, each root of ``fleet status --json``), in the shape of ``status``:
    the configuration's error once, in ``config.strategies_error`` (absent when there is
    none), and which configuration is in force in ``config.in_force``; each row says only
    ``config_invalid`` (:func:`config_error_once`). Each of them repeated the whole error,
    and ``config_in_force``, on every row."""
    rows, error, in_force = _said_once(rows)
    config: dict[str, Any] = {} if in_force is None else {"in_force": in_force}
    if error is not None:
        config["strategies_error"] = error
    return {"config": config, "strategies": rows}


def rows_of_document(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The strategy rows of a :func:`strategies_document` (the daemon's answer to
    ``/ome/strategies``) with each row's ``config_error`` back, as ``strategies_status``
    gives them: what ``strategies`` and ``status`` read. Rows that carry ``config_error``
    themselves (a daemon of an earlier version) are kept as they are."""
    rows = doc["strategies"]
    if not isinstance(rows, list):
        raise TypeError("no list of strategies")
    error = (doc.get("config") or {}).get("strategies_error")
    in_force = (doc.get("config") or {}).get("in_force")
    out = []
    for row in rows:
        if isinstance(row, dict) and "config_invalid" in row:
            invalid = row["config_invalid"]
            row = {k: v for k, v in row.items() if k != "config_invalid"}
            row["config_error"] = error if invalid else None
        if isinstance(row, dict) and in_force is not None:
            row.setdefault("config_in_force", in_force)
        out.append(row)
    return out


def _config_doc(problems: list[Problem]) -> dict[str, Any]:
    """The configuration's problems, at most :data:`MAX_PROBLEMS_SHOWN` of them, and how many
    more there are when some are left out (``problems_not_shown``; ``lint`` lists every one):
    20,000 misspelt keys in ``ome.toml`` were 10 MB of this document."""
    doc: dict[str, Any] = {"ok": not problems,
                           "problems": [p.as_dict() for p in problems[:MAX_PROBLEMS_SHOWN]]}
    if len(problems) > MAX_PROBLEMS_SHOWN:
        doc["problems_not_shown"] = len(problems) - MAX_PROBLEMS_SHOWN
    return doc


def _cross_file_problems(runtime: Runtime) -> list[tuple[str, Located]]:
    """``(file, (line, message))`` of every problem ``lint`` finds across a user's logs that
    the index shows (:func:`index_cross_file_problems`): without them ``status`` said all was
    well of a root ``lint`` failed on. Only the logs holding one are read, for its line.
    Citation cycles among derived records are ``lint``'s alone: the index keeps no
    citations, and reading every derived log made ``status`` twice as slow at 10,000
    insights."""
    from everos_reflect.index import db as dbmod
    from everos_reflect.markdown.marks import frontmatter_line
    from everos_reflect.strategies.consistency import index_cross_file_problems

    try:
        conn = dbmod.connect(runtime.root, readonly=True)
    except sqlite3.Error:
        return []
    try:
        problems = index_cross_file_problems(conn)
    except sqlite3.Error:
        return []
    finally:
        conn.close()
    logs: dict[str, tuple[str, dict[str, int]] | None] = {}  # path -> (text, id -> line)
    shown = []
    for problem in problems:
        if problem.path not in logs:
            try:
                log = runtime.store.read(runtime.root / problem.path)
                logs[problem.path] = (log.text, {e.id: e.line for e in log.entries})
            except (OSError, EverosError):
                logs[problem.path] = None
        read = logs[problem.path]
        line = 0
        if read is not None and problem.at_mark:
            line = frontmatter_line(read[0], problem.entry)
        elif read is not None:
            line = read[1].get(problem.entry, 0)
        shown.append((problem.path, (line_of(line), problem.message)))
    return shown


def _index_lag(runtime: Runtime) -> dict[str, Any] | None:
    """How far the derived index is behind the Markdown (None if it cannot be read),
    ``read_only`` when this process cannot bring it up to date (a read-only root is read as
    last built), ``parser_version`` (``index``: the version its logs were read with,
    None when unrecorded; ``this``) when that is not this program's, and ``waiting``: the
    logs a sync found still being written (or unreadable for a moment), to be synced again
    once they stand still, each with ``why``, ``since`` and ``tries``."""
    from everos_reflect.index.sync import Indexer, recorded_parser_version, waiting_logs
    from everos_reflect.markdown.parser import PARSER_VERSION

    vectors = not_a_folder(runtime.index_dir / "lancedb")
    if vectors is not None:  # it read "index: up to date" while every search failed on it
        return {"error": in_the_way(vectors, runtime.root)}
    try:
        indexer = Indexer(runtime)
        lag = indexer.pending()
        if runtime.read_only:
            lag["read_only"] = True
        recorded = recorded_parser_version(runtime.db())
        if recorded != PARSER_VERSION:
            # read differently from how this program reads the logs: an older parser's index
            # a read-only root keeps for good, or a newer one's this program does not take over
            lag["parser_version"] = {"index": recorded, "this": PARSER_VERSION}
        waiting = waiting_logs(runtime.db())
        if waiting:  # synced again once they stand still; without this, nowhere said
            lag["waiting"] = [{**item, "file": path_text(item["file"])} for item in waiting]
        return lag
    except (EverosError, sqlite3.Error, OSError) as exc:
        return {"error": error_text(exc, runtime.root)}


def _merges(runtime: Runtime, engine: Engine | None = None) -> dict[str, Any] | None:
    """:func:`_merge_consistency`, plus the clusters Reflection set aside (``set_aside``)."""
    from everos_reflect.strategies.setaside import set_aside_clusters

    merges = _merge_consistency(runtime, engine)
    if merges is None or "error" in merges:
        return merges
    try:
        merges["set_aside"] = [c.to_json() for c in set_aside_clusters(runtime)]
    except (EverosError, sqlite3.Error, OSError) as exc:
        merges["set_aside"] = {"error": error_text(exc, runtime.root)}
    return merges


def _insights(runtime: Runtime, engine: Engine | None = None) -> dict[str, Any]:
    """The stale insights revalidation holds back as deeper than ``max_depth``
    (``held_too_deep``): without it a person saw an insight stay stale for good and no
    word of why, or of the setting that brings it back."""
    from everos_reflect.strategies.revalidate import held_too_deep

    try:
        return {"held_too_deep": [h.to_json() for h in held_too_deep(runtime, engine)]}
    except (EverosError, sqlite3.Error, OSError) as exc:
        return {"error": error_text(exc, runtime.root)}


def _merge_consistency(runtime: Runtime, engine: Engine | None = None) -> dict[str, Any] | None:
    """Interrupted merges, held-back clusters and live narratives beside live sources, from
    the index (and the logs of the members that would release a hold). Holds are those the
    run applies under its settings (``remerge_undone``, ``max_sources_per_merge``)."""
    from everos_reflect.index import db as dbmod
    from everos_reflect.strategies.consistency import index_report
    from everos_reflect.strategies.holdback import HoldRules, reflect_settings

    try:
        conn = dbmod.connect(runtime.root, readonly=True)
    except sqlite3.Error:
        return None
    try:
        rules = HoldRules.from_settings(reflect_settings(runtime, engine))
        return index_report(conn, runtime.store, rules)
    except sqlite3.Error as exc:
        return {"error": str(exc)}
    finally:
        conn.close()


def _strategies(runtime: Runtime, engine: Engine | None = None) -> list[dict[str, Any]]:
    """Schedule and last result of each strategy; never fails the whole status."""
    from everos_reflect.engine.engine import strategies_status

    try:
        return strategies_status(runtime, engine)
    except (EverosError, sqlite3.Error) as exc:
        return [{"error": str(exc)}]


__all__ = ["config_error_once", "problem_line", "rows_of_document", "status_document",
           "strategies_document"]
