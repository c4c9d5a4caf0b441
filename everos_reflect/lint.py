"""Checking a memory root: every daily log and the config files (``lint``), with the problems
``status`` reports too. Library code: the CLI and the HTTP API call the same functions and
only render differently.
"""

from __future__ import annotations

import sqlite3
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from everos_reflect.errors import ConfigError, file_at
from everos_reflect.fileio import broken_link, denied_folder, os_reason, what_stands
from everos_reflect.markdown.marks import foreign_mark_message, frontmatter_line
from everos_reflect.markdown.parser import UNDONE, is_entry_id
from everos_reflect.model import (
    DEFAULT_APP,
    DEFAULT_PROJECT,
    LOG_FILENAME_RE,
    Entry,
    Kind,
    UserRef,
    path_text,
    quoted_value,
    shown_key,
)
from everos_reflect.problem_words import unknown
from everos_reflect.procedural.lessons import Lesson, live_rivals, read_lesson, successor
from everos_reflect.settings import (
    OME_FILE_NAME,
    USER_FILE_NAME,
    config_file,
    load_ome,
    load_settings,
)
from everos_reflect.strategies.consistency import (
    archive_cycle,
    citation_cycle_message,
    citation_cycles,
    cycle_message,
    live_beside_sources,
    orphan_fact_message,
    unknown_target_message,
    withdrawn,
)

if TYPE_CHECKING:
    from everos_reflect.markdown.store import MarkdownStore

#: Strategies shipped with the package. Used only when the engine's registry cannot be imported
#: (e.g. a partial install), so a typo in ``ome.toml`` is still caught.
BUILTIN_STRATEGIES = frozenset({"reflect_episodes"})

#: ``progress(description, total)`` → a context giving ``advance(n)``: how a caller (the CLI's
#: progress bar) watches a long scan. ``None``: nobody watches.
Progress = Callable[[str, int], AbstractContextManager[Callable[[int], None]]]
#: ``merge_sources(user, id)`` → the sources the audit lists for the merge (not undone) that
#: wrote its narrative under ``id``, else ``[]`` (:func:`audit_sources`).
MergeSources = Callable[[UserRef, str], list[str]]


@dataclass(frozen=True)
class Problem:
    """One thing ``lint`` or ``status`` found wrong: where, and why."""

    file: str
    line: int
    message: str
    severity: str = "error"

    def __str__(self) -> str:
        suffix = " (warning)" if self.severity == "warning" else ""
        return f"{file_at(self.file, self.line)}: {self.message}{suffix}"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: a byte of a path that is not UTF-8 written ``\\xff``
        (:func:`~everos_reflect.model.path_text`), which the API could not encode (a 500)."""
        return {"file": path_text(self.file), "line": self.line,
                "message": path_text(self.message), "severity": self.severity}


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
        if name not in known:  # as the engine says it (`strategies`, `serve`): it listed all
            # seven where "did you mean 'reflect_episodes'?" named the one meant
            found.append((file, shown_key(f"strategies.{name}"),
                          unknown("strategy", str(name), known, list_few=True)))
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
        found.extend(_strategy_problems(tables, config_file(root, OME_FILE_NAME)))
    problems = []
    for file, key, reason in found:
        line = int(key[5:]) if key.startswith("line ") and key[5:].isdigit() else 0
        message = reason if line else f"{key}: {reason}"
        problems.append(Problem(file, line, message))
    return problems


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
    depth_cap: Callable[[Entry], tuple[str, int]] | None = None,
    merge_sources: MergeSources | None = None,
) -> StoreScan:
    """Parse every daily log once; collect problems (file order) and live/deprecated counts.

    The parser already reports ids whose kind or date does not match their file and ids
    repeated in a file; since an id's kind and date name the one file that may hold it, that
    covers every duplicate per user. Added here, across a user's files:
    ``deprecated_entries`` naming unknown ids, and atomic facts whose episode is gone.
    Only ids and references are kept between the two passes, not the files' text. With
    ``depth_cap`` (a derived record → the tier that writes it and its ``max_depth``), a
    record whose written ``depth`` is deeper is named (:func:`deep_record_problem`). With
    ``merge_sources`` (the audit), a merge's source archived toward its narrative's id where
    a person's own Episode stands now is named (:func:`hidden_sources`).
    """
    scan = StoreScan()
    kinds_of: dict[UserRef, dict[str, Kind]] = defaultdict(dict)
    deprecations: list[tuple[str, UserRef, set[str], list[tuple[str, str, int]]]] = []
    fact_parents: list[tuple[str, UserRef, str, int, str | None]] = []
    live_ids: dict[UserRef, set[str]] = defaultdict(set)
    narratives: list[tuple[str, UserRef, str, int, list[str]]] = []
    merged: dict[UserRef, set[str]] = defaultdict(set)  # every Reflection narrative's id
    citations = CitationGraph()
    rivals = LessonRivals()
    for path in store.iter_files() if files is None else files:
        if advance is not None:
            advance(1)
        rel = store.rel(path)
        try:
            log = store.read(path)
        except FileNotFoundError:
            continue  # removed since it was listed
        except OSError as exc:
            scan.problems.append(Problem(rel, 0, f"cannot read: {os_reason(exc)}"))
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
            if kind == Kind.EPISODE and entry.parent_type == "cluster":
                merged[ref].add(entry.id)
            state = "deprecated" if entry.deprecated_by else "live"
            scan.counts[ref][f"{kind.value}:{state}"] += 1
            citations.add(rel, ref, kind, entry)
            rivals.add(rel, ref, kind, entry)
            if depth_cap is not None and kind.derived and \
                    (problem := deep_record_problem(entry, depth_cap)) is not None:
                scan.problems.append(Problem(rel, entry.line, problem, "warning"))
            if kind == Kind.ATOMIC_FACT and entry.parent_type == "episode":
                fact_parents.append((rel, ref, entry.id, entry.line, entry.parent_id))
            if not entry.deprecated_by:
                live_ids[ref].add(entry.id)
                if kind == Kind.EPISODE and entry.parent_type == "cluster" and entry.sources:
                    narratives.append((rel, ref, entry.id, entry.line, entry.sources))
        if log.deprecated_entries:
            marks = [(old, new, frontmatter_line(log.text, old))
                     for old, new in log.deprecated_entries.items()]
            deprecations.append((rel, ref, {e.id for e in log.entries}, marks))

    archived_toward: dict[UserRef, dict[str, str]] = defaultdict(dict)
    for _rel, ref, _own, marks in deprecations:
        for old, new, _line in marks:
            archived_toward[ref][old] = new
    for rel, ref, own, marks in deprecations:
        for old, new, line in marks:
            if old not in own:
                scan.problems.append(Problem(rel, line, foreign_mark_message(old)))
            if new != UNDONE and new not in kinds_of[ref]:
                scan.problems.append(Problem(rel, line, unknown_target_message(old, new)))
    for rel, ref, _own, marks in deprecations:
        for old, _new, line in marks:
            cycle = archive_cycle(old, archived_toward[ref]) if old in kinds_of[ref] else []
            if cycle and not withdrawn(old, cycle, merged[ref]):
                scan.problems.append(Problem(rel, line, cycle_message(old, cycle)))
    for rel, ref, fact_id, line, parent in fact_parents:
        if parent is None or kinds_of[ref].get(parent) != Kind.EPISODE:
            scan.problems.append(Problem(rel, line, orphan_fact_message(fact_id, parent)))
    for rel, ref, narrative, line, sources in narratives:
        for item in live_beside_sources({narrative: sources}, live_ids[ref]):
            scan.problems.append(Problem(rel, line, item.message()))
    if merge_sources is not None:
        scan.problems += hidden_sources(deprecations, kinds_of, merged, merge_sources)
    scan.problems += citations.problems() + rivals.problems()
    return scan


def hidden_sources(
    deprecations: list[tuple[str, UserRef, set[str], list[tuple[str, str, int]]]],
    kinds_of: dict[UserRef, dict[str, Kind]], merged: dict[UserRef, set[str]],
    merge_sources: MergeSources,
) -> list[Problem]:
    """The Episodes a merge archived toward its narrative's id where an Episode that is no
    narrative stands now (a person replaced the narrative's log with one of their own under
    that id): they stay hidden from search behind an entry that is not the merge's, and lint
    said nothing. ``undo`` of the id restores them and leaves the person's Episode live.
    Only the sources the audit lists are named: a person's own draft archived toward their
    Episode is their mark."""
    found: list[Problem] = []
    sources: dict[tuple[UserRef, str], set[str]] = {}
    for rel, ref, _own, marks in deprecations:
        kinds = kinds_of[ref]
        for old, new, line in marks:
            if kinds.get(new) is not Kind.EPISODE or new in merged[ref] \
                    or kinds.get(old) is not Kind.EPISODE:
                continue
            if (ref, new) not in sources:
                sources[(ref, new)] = set(merge_sources(ref, new))
            if old in sources[(ref, new)]:
                found.append(Problem(rel, line, hidden_source_message(ref, old, new)))
    return found


def hidden_source_message(ref: UserRef, old: str, new: str) -> str:
    """What ``lint`` says of a merge's source archived toward an entry that is not the
    merge's narrative (:func:`hidden_sources`), and what to do."""
    where = "".join(f" --{flag} {value}" for flag, value, default in (
        ("app", ref.app, DEFAULT_APP), ("project", ref.project, DEFAULT_PROJECT))
        if value != default)
    return (f"deprecated_entries: {old} is archived toward {new}, where a Reflection merge "
            f"wrote its narrative, but {new} holds an Episode that is no narrative now "
            f"(written by hand): {old} stays hidden behind it; `everos-reflect undo {new} "
            f"--user {ref.user_id}{where}` restores the merge's sources and leaves {new} as "
            "it is")


def audit_sources(conn: sqlite3.Connection) -> MergeSources:
    """:data:`MergeSources` read from the audit on ``conn``: the sources of the merge that
    wrote an id, unless that merge was undone."""
    from everos_reflect.index.audit import merge_row, merge_sources

    def sources(ref: UserRef, merged_id: str) -> list[str]:
        try:
            row = merge_row(conn, ref, merged_id)
            if row is None or row[1] == "undone":
                return []
            return merge_sources(conn, ref, merged_id)
        except sqlite3.Error:  # an audit that cannot be read: journal_problems names it
            return []

    return sources


def deep_record_problem(entry: Entry,
                        depth_cap: Callable[[Entry], tuple[str, int]]) -> str | None:
    """What to say of a derived record whose ``depth``, as written, is deeper than the
    ``max_depth`` of the tier that writes it (SPEC §10: at most ``max_depth``), else None. A
    hand edit's ``depth: 7`` under a cap of 2 said nothing; an unreadable depth is the
    parser's to name."""
    depth = entry.meta.get("depth")
    if not isinstance(depth, int) or isinstance(depth, bool):
        return None
    tier, cap = depth_cap(entry)
    if depth <= cap:
        return None
    return (f"entry {entry.id}: depth {depth} is above max_depth {cap} of {tier} (SPEC §10: "
            f"a record is at most max_depth deep; fix the depth, or raise "
            f"[strategies.{tier}] max_depth in {OME_FILE_NAME})")


def depth_caps(root: Path) -> Callable[[Entry], tuple[str, int]]:
    """``depth_cap`` for :func:`scan_store`: the tier that writes a derived record and its
    ``max_depth`` in ``root``'s ``ome.toml`` (each tier's default where the file or its
    table is broken: those problems are named on their own)."""
    from everos_reflect.engine.registry import get_strategy, validate_strategy_settings
    from everos_reflect.strategies.provenance import writer_of

    try:
        tables = load_ome(root)
    except ConfigError:
        tables = {}
    caps: dict[str, int] = {}

    def cap(entry: Entry) -> tuple[str, int]:
        tier = writer_of(entry)
        if tier not in caps:
            try:
                caps[tier] = int(validate_strategy_settings(
                    tier, tables.get(tier) or {}, OME_FILE_NAME)["max_depth"])
            except ConfigError:
                caps[tier] = int(get_strategy(tier).all_settings()["max_depth"].default)
        return tier, caps[tier]

    return cap


class CitationGraph:
    """Who cites whom among a root's derived records (SPEC §10: an insight's, conviction's or
    lesson's ``evidence``, the two convictions a relation stands ``between``), per user, to
    name the cycles a hand edit made (:func:`citation_cycles`). ``lint`` feeds it every
    log; the index keeps no citations, so ``status`` over the index does not check them."""

    #: The metadata keys by which a derived record cites others.
    CITING_KEYS = ("evidence", "between")

    def __init__(self) -> None:
        self._cites: dict[UserRef, dict[str, list[str]]] = defaultdict(dict)
        self._at: dict[UserRef, dict[str, tuple[str, int]]] = defaultdict(dict)

    def add(self, rel: str, ref: UserRef, kind: Kind, entry: Entry) -> None:
        """Note ``entry``'s citations (none unless ``kind`` is derived); ``rel``: its log."""
        if not kind.derived:
            return
        cited = [i for key in self.CITING_KEYS for i in _id_list(entry.meta.get(key))]
        if cited:
            self._cites[ref][entry.id] = cited
            self._at[ref][entry.id] = (rel, entry.line)

    def problems(self) -> list[Problem]:
        """An error per cycle, at the entry of its smallest id."""
        found = []
        for ref, graph in self._cites.items():
            for cycle in citation_cycles(graph):
                rel, line = self._at[ref][cycle[0]]
                found.append(Problem(rel, line, citation_cycle_message(cycle)))
        return found


class LessonRivals:
    """Every lesson of a root, per user, to name the ids of a live lesson's ``contested_with``
    that are no rival (:func:`~everos_reflect.procedural.lessons.live_rivals`): a task id, a
    lesson deleted, retired or of another task type. Such a lesson was served as contested
    for good, and nothing said why. The lessons are kept without their text."""

    def __init__(self) -> None:
        self._lessons: dict[UserRef, list[tuple[str, int, Lesson]]] = defaultdict(list)

    def add(self, rel: str, ref: UserRef, kind: Kind, entry: Entry) -> None:
        """Note ``entry`` if it is a lesson; ``rel``: its log."""
        if kind is Kind.LESSON:
            self._lessons[ref].append((rel, entry.line, replace(read_lesson(entry), text="")))

    def problems(self) -> list[Problem]:
        """A warning per live lesson naming one or more ids that are no rival. Ids that are
        no entry id at all, and the lesson's own, are the parser's to name."""
        found = []
        for lessons in self._lessons.values():
            live = {x.id: x for _, _, x in lessons if x.live}
            archived = {x.id: x.deprecated_by for _, _, x in lessons if x.deprecated_by}
            for rel, line, x in lessons:
                if not (x.live and x.rivals_named):
                    continue
                kept = live_rivals(x, live, archived)
                odd = [i for i in x.contested_with
                       if is_entry_id(i) and successor(i, archived) not in kept]
                if odd:
                    found.append(Problem(rel, line, no_rival_message(x, odd, kept),
                                         "warning"))
        return found


def no_rival_message(lesson: Lesson, odd: list[str], kept: tuple[str, ...]) -> str:
    """What ``lint`` says of ``lesson`` naming ``odd`` as rivals, none a live lesson of its
    task type (``kept``: the rivals it has)."""
    shown = ", ".join(odd[:3]) + (f" and {len(odd) - 3:,} more" if len(odd) > 3 else "")
    verb = "is" if len(odd) == 1 else "are"
    outcome = ("the lesson is read as active: no live rival is left"
               if lesson.status == "contested" and not kept else "not read as one")
    return (f"entry {lesson.id}: contested_with names {shown}, which {verb} no live lesson "
            f"of task type {quoted_value(lesson.task_type)}: no rival ({outcome}; a contest "
            "is decided against live lessons of its task type alone)")


def _id_list(value: object) -> list[str]:
    """The ids a citing key holds; anything else there is the parser's to report."""
    return [i for i in value if isinstance(i, str)] if isinstance(value, list) else []


def journal_problems(root: Path) -> list[Problem]:
    """Interrupted merges still in the journal (lint reads, it never settles them), or the
    index that holds the journal when it cannot be read: lint said "0 errors", exit 0, of a
    root whose ``system.db`` was junk or had a file in the place of its folder."""
    from everos_reflect.index import db as dbmod
    from everos_reflect.strategies.journal import has_pending

    if dbmod.db_built(root):
        try:
            dbmod.connect(root, readonly=True).close()
        except sqlite3.Error as exc:
            return [Problem(".index/sqlite/system.db", 0,
                            f"interrupted merges cannot be checked: {exc}")]
    if not has_pending(root):
        return []
    return [Problem(".index/sqlite/system.db", 0,
                    "merges interrupted by a crash await recovery (any command that writes, "
                    "`serve` or the next run settles them)")]


#: How ``lint``/``status`` word a symlink the store refused to follow.
OUTSIDE_ROOT = "symlink leading outside the memory root: not read (nothing outside the root is)"


def scan_with_outside(store: MarkdownStore, description: str = "Checking daily logs",
                      progress: Progress | None = None,
                      depth_cap: Callable[[Entry], tuple[str, int]] | None = None,
                      merge_sources: MergeSources | None = None) -> StoreScan:
    """:func:`scan_store` over every file, plus a problem per symlink the store refused to
    follow out of the root, per user folder whose name is not a valid id (app, project or
    user) and per folder, FIFO or device named like a log: the store skips those, so without
    this they were passed over without a word (and a folder there blocks every write to that
    day's log)."""
    outside: list[str] = []
    invalid: list[tuple[str, str]] = []
    irregular: list[str] = []
    misnamed: list[str] = []
    files = list(store.iter_files(outside=outside, invalid=invalid, irregular=irregular,
                                  misnamed=misnamed))
    watch = progress(description, len(files)) if progress else nullcontext(None)
    with watch as advance:
        scan = scan_store(store, files, advance, depth_cap, merge_sources)
    scan.problems[:0] = skipped_problems(outside, invalid) + irregular_problems(
        store.root, irregular) + misnamed_problems(misnamed)
    return scan


def misnamed_problems(misnamed: list[str]) -> list[Problem]:
    """A warning per Markdown file in a kind's folder that is named like no log of that kind
    (:meth:`MarkdownStore.iter_files`' ``misnamed``): a copy, a typo in the date, another
    kind's log. Its entries are read by nothing, and ``lint`` said all was well."""
    found = []
    for rel in sorted(set(misnamed)):
        parts = Path(rel).parts
        folder, name = Path(rel).parent.name, Path(rel).name
        # a kind's folder is the one in a user's folder: a log put in the folder of a user
        # named "episodes" was told its date "is no calendar date"
        kind = next((k for k in Kind if k.folder == folder), None) if len(parts) == 6 else None
        m = LOG_FILENAME_RE.fullmatch(name)
        other = Kind.from_stem(m.group(1)) if m else None
        if kind is None and other is not None:  # outside every kind's folder
            why = f"a log of {other.folder}/ goes in the user's {other.folder}/ folder"
        elif kind is None:
            why = "not in a folder of logs"
        elif other is kind and m is not None:  # the right name but for its date
            why = (f"{m.group(2)} is no calendar date; the {folder} folder's logs are named "
                   f"{kind.stem}-YYYY-MM-DD.md")
        elif other is not None:
            why = f"named like a log of {other.folder}/, not of {folder}/"
        else:
            why = f"the {folder} folder's logs are named {kind.stem}-YYYY-MM-DD.md"
        found.append(Problem(rel, 0, f"not read: {why}{_name_end(name)}", "warning"))
    return found


def _name_end(name: str) -> str:
    """`` (this name ends in a space)`` for a log's name that goes on past ``.md`` with what a
    listing does not show (a space, a tab, a dot), else ``""``: "the logs are named
    episode-YYYY-MM-DD.md" alone, of a name that reads as just that, sent a person looking
    for a difference they could not see."""
    cut = name
    while cut != cut.rstrip().rstrip("."):
        cut = cut.rstrip().rstrip(".")
    if cut == name or not cut.lower().endswith(".md"):
        return ""
    end = name[len(cut)]
    words = {" ": "a space", "\t": "a tab", ".": "a dot"}.get(end)
    if words is None:
        words = f"U+{ord(end):04X} ({unicodedata.name(end, 'a space')})"
    return f" (this name ends in {words})"


def irregular_problems(root: Path, irregular: list[str]) -> list[Problem]:
    """One problem per path :meth:`MarkdownStore.iter_files` found in place of a log or of a
    folder of logs (its ``irregular``). ``lint`` and ``status`` word them alike."""
    found = [_irregular_problem(root, rel) for rel in sorted(set(irregular))]
    return [problem for problem in found if problem is not None]


def _irregular_problem(root: Path, rel: str) -> Problem | None:
    """A folder, FIFO or device where a daily log goes, a file where a kind's folder
    (``episodes``, ``.insights`` …) goes, or one among project or user folders (:func:`_stray`:
    ``<app>/<x>``, ``<app>/<project>/users``, ``<app>/<project>/users/<x>``), or a folder of
    the layout this process may not open (:func:`~everos_reflect.fileio.denied_folder`)."""
    if (denied := denied_folder(root / rel)) is not None:
        return Problem(rel, 0, f"not read: {denied}: this folder may not be opened, so no log "
                       "under it is read (nor written: add, Reflection, undo) until its "
                       "permissions let this account in")
    if len(Path(rel).parts) < 5:
        return _stray(root, rel)
    if Path(rel).name in {kind.folder for kind in Kind}:
        return Problem(rel, 0, f"{what_stands(root / rel, root)} where the {Path(rel).name} folder "
                       "goes: no log of it is read, and nothing is written there (add, "
                       "Reflection, undo) until it is moved away")
    return Problem(rel, 0, f"{what_stands(root / rel, root)} where a daily log goes: not read, "
                   "and nothing is written to this log (add, Reflection, undo) until it is "
                   "moved away")


def _stray(root: Path, rel: str) -> Problem:
    """Something that is no folder at the top of the root (:func:`_top_file`), in an app
    folder (where project folders go), a project folder (``users``) or a ``users`` folder
    (where user folders go). A ``README`` there is
    harmless, so it is a warning naming it: nothing in it is read. Only where a folder the
    tool itself creates goes is it an error, since every write there fails: a project's
    ``users`` folder, and the default tenant's project folder (``default_app/default_project``,
    where ``add`` without ``--app``/``--project`` writes)."""
    parts = Path(rel).parts
    what = what_stands(root / rel, root)
    if len(parts) == 1:
        return _top_file(rel, what)
    if len(parts) == 3:
        return Problem(rel, 0, f"{what} where the users folder goes: no log of this project "
                       "is read, and nothing is written to it (add, Reflection) until it is "
                       "moved away")
    if parts == (DEFAULT_APP, DEFAULT_PROJECT):
        return Problem(rel, 0, f"{what} where the default project's folder goes: nothing is "
                       "written to it (add without --app/--project) until it is moved away")
    slot = "a project" if len(parts) == 2 else "a user"
    if broken_link(root / rel, root) is not None:  # the folder of that name is out of reach
        return Problem(rel, 0, f"{what} where {slot} folder goes: nothing under it is read, "
                       "and every write to it fails (add, Reflection), until it is moved away "
                       "or what it leads to is back")
    return Problem(rel, 0, f"{what} where {slot} folder goes: not read (only folders are); "
                   "move it away if it holds memory", "warning")


#: Files a memory root holds at its top besides its apps (SPEC §2), and a README.
_TOP_FILES = frozenset({USER_FILE_NAME, OME_FILE_NAME})


def _top_file(name: str, what: str) -> Problem | None:
    """A file at the top of the root, where only apps, the config files and ``.index`` go:
    a Markdown file there (``notes.md``, ``2026-01-01.md``) is not read, which a user who
    put memory in it must hear (a warning). A file named ``default_app`` is an error: ``add``
    without ``--app`` writes there. Config files, a README and other files are left alone."""
    if name == DEFAULT_APP:
        return Problem(name, 0, f"{what} where the default app's folder goes: nothing is "
                       "written to it (add without --app) until it is moved away")
    if name in _TOP_FILES or not name.lower().endswith((".md", ".markdown")) \
            or name.lower().startswith("readme"):
        return None
    return Problem(name, 0, f"{what} at the top of the memory root: not read (memory is read "
                   "only from the daily logs under <app>/<project>/users/<user>/)", "warning")


def skipped_problems(outside: list[str], invalid: list[tuple[str, str]]) -> list[Problem]:
    """One problem per path the store skipped: a symlink it refused to follow out of the root
    (``outside``) or a user folder whose name is not a valid id (``invalid``, as
    :meth:`MarkdownStore.iter_users` fills it). ``lint`` and ``status`` word them alike."""
    return [Problem(rel, 0, OUTSIDE_ROOT) for rel in sorted(set(outside))] + [
        Problem(folder, 0, f"{why}; this folder's logs are not read")
        for folder, why in sorted(set(invalid))]


def _audit(root: Path) -> sqlite3.Connection | None:
    """The index's audit, read-only, or None when there is none to read (never built, or
    unreadable: :func:`journal_problems` names that)."""
    from everos_reflect.index import db as dbmod

    if not dbmod.db_built(root):
        return None
    try:
        return dbmod.connect(root, readonly=True)
    except sqlite3.Error:
        return None


def lint_report(root: Path, progress: Progress | None = None) -> dict[str, Any]:
    """Everything ``lint`` finds: config problems, every daily log's problems and interrupted
    merges, as one JSON-ready document (``ok`` is False on any problem, warnings included)."""
    from everos_reflect.markdown.store import MarkdownStore

    try:
        limits = load_settings(root).limits
    except ConfigError:
        limits = None  # reported with the other config problems; checked with defaults
    conn = _audit(root)
    try:
        scan = scan_with_outside(MarkdownStore(root, limits=limits), "Checking daily logs",
                                 progress, depth_caps(root),
                                 audit_sources(conn) if conn is not None else None)
    finally:
        if conn is not None:
            conn.close()
    problems = config_problems(root) + scan.problems + journal_problems(root)
    return {"root": str(root), "ok": not problems, "files_checked": scan.files,
            "problems": [p.as_dict() for p in problems]}


__all__ = ["BUILTIN_STRATEGIES", "OUTSIDE_ROOT", "CitationGraph", "LessonRivals", "Problem",
           "Progress", "StoreScan",
           "audit_sources", "config_problems", "deep_record_problem", "depth_caps",
           "hidden_source_message", "hidden_sources", "irregular_problems",
           "journal_problems", "lint_report",
           "misnamed_problems",
           "scan_store",
           "scan_with_outside", "skipped_problems"]
