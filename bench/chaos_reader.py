"""An independent reader of a memory root, for the chaos harness: it never imports the product.

The harness checks the product's crash safety with the product's own parser at its peril: a bug
shared by the writer and the parser would hide itself. So this module reads the daily logs with
nothing but the SPEC (§2, §3): YAML frontmatter between ``---`` lines, entries between
``<!-- entry:ID -->`` / ``<!-- /entry:ID -->`` markers, each with a YAML metadata block, and the
file's ``deprecated_entries`` mapping. It reads the index with the ``sqlite3`` module.
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

OPEN = re.compile(r"^<!--\s*entry:\s*(\S+?)\s*-->\s*$")
CLOSE = re.compile(r"^<!--\s*/entry:\s*(\S+?)\s*-->\s*$")
KIND_DIRS = {"episodes": "episode", ".atomic_facts": "atomic_fact"}
UNDONE = "undone"


class Unreadable(ValueError):
    """A daily log that does not follow the format."""


@dataclass
class Entry:
    id: str
    kind: str
    meta: dict[str, Any]
    body: str
    deprecated_by: str | None = None

    @property
    def live(self) -> bool:
        return self.deprecated_by is None


@dataclass
class User:
    """Every entry of one user (ids are unique per user), with where each archive key lives."""

    entries: dict[str, Entry] = field(default_factory=dict)
    links: list[tuple[str, str, str]] = field(default_factory=list)  # (file, old, new)


def read_log(data: bytes, kind: str) -> tuple[dict[str, Any], list[Entry]]:
    """Frontmatter and entries of one daily log; raises :class:`Unreadable`."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unreadable(f"not UTF-8: {exc}") from exc
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        raise Unreadable("no frontmatter")
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        raise Unreadable("frontmatter not closed") from None
    front = yaml.safe_load("\n".join(lines[1:end])) or {}
    if not isinstance(front, dict):
        raise Unreadable("frontmatter is not a mapping")
    entries: list[Entry] = []
    i = end + 1
    while i < len(lines):
        opened = OPEN.match(lines[i])
        if opened is None:
            if CLOSE.match(lines[i]):
                raise Unreadable(f"line {i + 1}: closing marker without an opening one")
            i += 1
            continue
        entry_id = opened.group(1)
        try:
            close = next(j for j in range(i + 1, len(lines)) if CLOSE.match(lines[j]))
        except StopIteration:
            raise Unreadable(f"entry {entry_id} is never closed") from None
        if CLOSE.match(lines[close]).group(1) != entry_id:
            raise Unreadable(f"entry {entry_id} closed as another id")
        block = lines[i + 1:close]
        meta: dict[str, Any] = {}
        if block and block[0].strip() == "---":
            try:
                stop = next(k for k in range(1, len(block)) if block[k].strip() == "---")
            except StopIteration:
                raise Unreadable(f"entry {entry_id}: metadata not closed") from None
            meta = yaml.safe_load("\n".join(block[1:stop])) or {}
            block = block[stop + 1:]
        entries.append(Entry(entry_id, kind, meta, "\n".join(block)))
        i = close + 1
    return front, entries


def user_dirs(root: Path) -> list[Path]:
    """``<root>/<app>/<project>/users/<user>`` folders."""
    return sorted(p for p in root.glob("*/*/users/*") if p.is_dir() and not p.is_symlink())


def read_user(user_dir: Path) -> tuple[User, list[str]]:
    """A user's entries and the problems found reading them (one line per unreadable file)."""
    user, problems = User(), []
    for folder, kind in KIND_DIRS.items():
        for path in sorted((user_dir / folder).glob("*.md")):
            try:
                front, entries = read_log(path.read_bytes(), kind)
            except (Unreadable, yaml.YAMLError) as exc:
                problems.append(f"{path}: {exc}")
                continue
            archived = front.get("deprecated_entries") or {}
            for entry in entries:
                entry.deprecated_by = archived.get(entry.id)
                if entry.id in user.entries:
                    problems.append(f"{path}: duplicate id {entry.id}")
                user.entries[entry.id] = entry
            user.links += [(str(path), str(old), str(new)) for old, new in archived.items()]
    return user, problems


@dataclass
class Violations:
    """Each invariant's failures (messages); empty lists everywhere = the root is sound."""

    unparseable: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    live_beside: list[str] = field(default_factory=list)
    dangling: list[str] = field(default_factory=list)
    index: list[str] = field(default_factory=list)
    #: derived records (insight, lesson) whose status after a killed scan and the next start
    #: differs from what an unkilled scan of the same root gives (``provenance`` kills)
    derived: list[str] = field(default_factory=list)

    def count(self) -> dict[str, int]:
        return {k: len(v) for k, v in self.__dict__.items()}

    def total(self) -> int:
        return sum(self.count().values())


def check_root(root: Path, expected: dict[tuple[str, str], str], *,
               check_index: bool = True) -> Violations:
    """The crash-safety invariants of a root.

    ``expected``: (user dir relative to the root, entry id) → text that entry must still hold,
    for every entry ever seen or acknowledged by a finished ``add``.
    """
    found = Violations()
    users: dict[str, User] = {}
    for udir in user_dirs(root):
        rel = str(udir.relative_to(root))
        user, problems = read_user(udir)
        users[rel] = user
        found.unparseable += problems
        found.live_beside += live_beside(rel, user)
        for file, old, new in user.links:
            if new != UNDONE and new not in user.entries:
                found.dangling.append(f"{file}: {old} -> missing {new}")
    for (rel, entry_id), text in expected.items():
        entry = users.get(rel, User()).entries.get(entry_id)
        if entry is None:
            found.lost.append(f"{rel}: {entry_id} is gone")
        elif text not in entry.body:
            found.lost.append(f"{rel}: {entry_id} no longer holds its text")
    if check_index:
        found.index += compare_index(root, users)
    return found


def live_beside(rel: str, user: User) -> list[str]:
    """Each live merged narrative of ``user`` (at ``rel``) beside a live source of its own."""
    out = []
    for entry in user.entries.values():
        if entry.kind == "episode" and entry.meta.get("parent_type") == "cluster" \
                and entry.live:
            beside = [s for s in entry.meta.get("sources") or []
                      if s in user.entries and user.entries[s].live and s != entry.id]
            if beside:
                out.append(f"{rel}: {entry.id} live beside {beside}")
    return out


def half_done(rel: str, user: User) -> list[str]:
    """What a copy of a merge taken half done shows (at ``rel``): a live narrative beside a
    live source (:func:`live_beside`), an entry archived toward a narrative the user does not
    hold, or a live fact a merge wrote for a narrative the user does not hold."""
    out = live_beside(rel, user)
    out += [f"{rel}: {old} archived toward missing {new}" for _, old, new in user.links
            if new != UNDONE and new not in user.entries]
    out += [f"{rel}: fact {e.id} live, of missing narrative {e.meta.get('parent_id')}"
            for e in user.entries.values()
            if e.kind == "atomic_fact" and e.live and e.meta.get("reflection")
            and e.meta.get("parent_id") not in user.entries]
    return out


def compare_index(root: Path, users: dict[str, User]) -> list[str]:
    """The index must hold exactly what a rebuild from the Markdown would: every entry, with
    its archive state, and nothing else."""
    rows = _query(root, "SELECT app_id, project_id, user_id, id, deprecated_by "
                        "FROM entries WHERE kind IN ('episode', 'atomic_fact')")
    if rows is None:
        return ["no index"]
    indexed: dict[str, dict[str, str | None]] = {}
    for app, project, user, entry_id, dep in rows:
        indexed.setdefault(f"{app}/{project}/users/{user}", {})[entry_id] = dep
    out = []
    for rel in sorted(set(indexed) | set(users)):
        want = {e.id: e.deprecated_by for e in users.get(rel, User()).entries.values()}
        have = indexed.get(rel, {})
        for entry_id in sorted(set(want) | set(have)):
            if entry_id not in have:
                out.append(f"{rel}: {entry_id} missing from the index")
            elif entry_id not in want:
                out.append(f"{rel}: {entry_id} indexed but not in the Markdown")
            elif want[entry_id] != have[entry_id]:
                out.append(f"{rel}: {entry_id} deprecated_by {have[entry_id]!r} in the index, "
                           f"{want[entry_id]!r} in the Markdown")
    return out


def snapshot(root: Path) -> dict[tuple[str, str], str]:
    """(user dir, id) → the entry's body, for every entry now in the root: what must survive."""
    out = {}
    for udir in user_dirs(root):
        user, _ = read_user(udir)
        rel = str(udir.relative_to(root))
        for entry in user.entries.values():
            out[(rel, entry.id)] = entry.body
    return out


def live_narratives(root: Path) -> list[tuple[str, str]]:
    """(user id, narrative id) of every live merged narrative (what ``undo`` can revert)."""
    out = []
    for udir in user_dirs(root):
        user, _ = read_user(udir)
        out += [(udir.name, e.id) for e in user.entries.values()
                if e.kind == "episode" and e.live and e.meta.get("parent_type") == "cluster"]
    return out


def _query(root: Path, sql: str, *, tolerate_missing_table: bool = False) -> list[Any] | None:
    """Rows of ``sql`` on the root's index, opened read-only; ``None`` when there is no index
    (or, when tolerated, a query that fails: no such table yet)."""
    db = root / ".index" / "sqlite" / "system.db"
    if not db.exists():
        return None
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return conn.execute(sql).fetchall()
    except sqlite3.Error:
        if tolerate_missing_table:
            return None
        raise
    finally:
        conn.close()


def journal_rows(root: Path) -> int:
    rows = _query(root, "SELECT COUNT(*) FROM merge_journal", tolerate_missing_table=True)
    return rows[0][0] if rows else 0


def last_run(root: Path) -> dict[str, Any] | None:
    rows = _query(root, "SELECT status, error, counts FROM runs ORDER BY started_at DESC, "
                        "id DESC LIMIT 1")
    if not rows:
        return None
    status, error, counts = rows[0]
    return {"status": status, "error": error, "counts": json.loads(counts or "{}")}
