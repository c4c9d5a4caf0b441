"""Property: after any sequence of hand edits, incremental sync equals a fresh rebuild.

A hypothesis state machine edits the Markdown of one root the way people and the daemon do
(append, edit text or metadata, delete, deprecate, undo, corrupt, fix, delete a file) and keeps
its index in sync through ``sync_path`` and ``scan``. Whenever it checks, the SQLite ``entries``
and ``files`` rows and the LanceDB rows (vectors included) must equal those of a ``reindex()``
of a copy of the same Markdown, with no exception: a file whose frontmatter is broken holds no
entry, and an entry made unreadable by a hand edit has no row, in both.

Insights citing the Episodes ride along (``derive_insight``): change events mark them stale as
their evidence is edited, archived or deleted, and at every check the rebuilt copy must agree —
the same active/stale sets, and nothing in it that should be stale still active.
"""

from __future__ import annotations

import shutil
import tempfile
from datetime import date
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from everos_reflect.embedding import HashEmbedder
from everos_reflect.errors import EverosError
from everos_reflect.index.sync import Indexer
from everos_reflect.markdown import writer
from everos_reflect.markdown.parser import parse_log
from everos_reflect.model import Entry, EntryId, Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from everos_reflect.strategies.provenance import find_stale, load_records

REF = UserRef.of("u_sam")
DAYS = [date(2026, 10, 12), date(2026, 10, 13)]
WORDS = ["dog", "cat", "Toby", "Buddy", "park", "vet", "walk", "food"]

days = st.sampled_from(DAYS)
picks = st.integers(0, 20)
texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)


def _runtime(root: Path) -> Runtime:
    return Runtime(root, Settings(), embedder=HashEmbedder(16))


def fingerprint(rt: Runtime, skip_paths: set[str],
                skip_ids: frozenset[str] = frozenset()) -> dict[str, set[tuple[object, ...]]]:
    """Everything the index holds that Markdown determines, as comparable sets."""
    entries = {
        (r["id"], r["path"], r["content_hash"], r["text_hash"], r["deprecated_by"],
         r["embed_model"], r["subject"], r["text"])
        for r in rt.db().execute("SELECT * FROM entries")
        if r["path"] not in skip_paths and r["id"] not in skip_ids
    }
    files = {
        (r["path"], r["sha256"], r["problems"])
        for r in rt.db().execute("SELECT path, sha256, problems FROM files")
    }
    lance = {
        (r["id"], r["path"], r["content_hash"], r["deprecated_by"],
         tuple(np.round(np.asarray(r["vector"], dtype=np.float64), 5)))
        for r in rt.vectors.rows(
            Kind.EPISODE, columns=("id", "path", "content_hash", "deprecated_by", "vector")
        )
        if r["path"] not in skip_paths and r["id"] not in skip_ids
    }
    return {"entries": entries, "files": files, "lance": lance}


class SyncMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="everos-sync-"))
        self.root = self.tmp / "live"
        self.rt = _runtime(self.root)
        self.indexer = Indexer(self.rt)
        self.dirty: set[Path] = set()
        self.originals: dict[Path, str] = {}  # text before a corruption, for `fix`

    # ------------------------------------------------------------------ helpers

    def path(self, day: date) -> Path:
        return self.rt.store.log_path(REF, Kind.EPISODE, day)

    def entries(self) -> list[Entry]:
        out: list[Entry] = []
        for day in DAYS:
            if self.path(day).exists():
                out += parse_log(self.path(day).read_text()).entries
        return out

    def pick(self, n: int) -> Entry | None:
        entries = self.entries()
        return entries[n % len(entries)] if entries else None

    def rewrite(self, day: date, text: str) -> None:
        self.path(day).write_text(text)
        self.dirty.add(self.path(day))

    def replace_entry(self, entry: Entry, block: str) -> None:
        day = EntryId.parse(entry.id).day
        self.rewrite(day, self.path(day).read_text().replace(entry.raw, block, 1))

    # ------------------------------------------------------------------ edits

    @initialize(first=st.lists(st.tuples(days, texts), min_size=2, max_size=4))
    def seed(self, first: list[tuple[date, str]]) -> None:
        """Start with a few indexed entries, so every example has something to edit."""
        for day, text in first:
            self.append(day, text)
        self.indexer.scan()
        self.dirty.clear()

    @rule(day=days, text=texts)
    def append(self, day: date, text: str) -> None:
        try:
            self.rt.store.append(
                REF, Kind.EPISODE,
                {"timestamp": f"{day.isoformat()}T09:00:00+00:00", "parent_type": "memcell"},
                {"Subject": text.split()[0], "Content": text},
                day=day,
            )
        except EverosError:  # the store refuses to write a file it cannot parse: fine
            return
        self.dirty.add(self.path(day))

    @rule(n=picks, text=texts)
    def edit_text(self, n: int, text: str) -> None:
        entry = self.pick(n)
        if entry is not None:
            sections = {**entry.sections, "Content": text}
            self.replace_entry(entry, writer.render_entry(entry.id, entry.meta, sections))

    @rule(n=picks, importance=st.integers(1, 10))
    def edit_metadata(self, n: int, importance: int) -> None:
        entry = self.pick(n)
        if entry is not None:
            meta = {**entry.meta, "importance": importance}
            self.replace_entry(entry, writer.render_entry(entry.id, meta, entry.sections))

    @rule(n=picks)
    def delete_entry(self, n: int) -> None:
        entry = self.pick(n)
        if entry is not None:
            self.replace_entry(entry, "")

    @rule(n=picks, m=picks)
    def deprecate(self, n: int, m: int) -> None:
        old, new = self.pick(n), self.pick(m)
        if old is None or new is None or old.id == new.id:
            return
        day = EntryId.parse(old.id).day
        text = self.path(day).read_text()
        if parse_log(text).ok:
            self.rewrite(day, writer.add_deprecations(text, {old.id: new.id}))

    @rule(day=days)
    def undo_deprecations(self, day: date) -> None:
        if not self.path(day).exists():
            return
        text = self.path(day).read_text()
        log = parse_log(text)
        if log.ok and log.deprecated_entries:
            self.rewrite(day, writer.remove_deprecations(text, list(log.deprecated_entries)))

    @rule(day=days)
    def corrupt_frontmatter(self, day: date) -> None:
        if self.path(day).exists() and self.path(day) not in self.originals:
            text = self.path(day).read_text()
            self.originals[self.path(day)] = text
            self.rewrite(day, text.replace("type: episode_daily", "type: [episode_daily", 1))

    @rule(n=picks)
    def corrupt_entry(self, n: int) -> None:
        entry = self.pick(n)
        if entry is None:
            return
        path = self.path(EntryId.parse(entry.id).day)
        if path not in self.originals:
            self.originals[path] = path.read_text()
            self.replace_entry(entry, entry.raw.replace("owner_id:", "owner_id: [", 1))

    @rule(day=days)
    def fix(self, day: date) -> None:
        original = self.originals.pop(self.path(day), None)
        if original is not None:
            self.rewrite(day, original)

    @rule(day=days)
    def delete_file(self, day: date) -> None:
        if self.path(day).exists():
            self.path(day).unlink()
            self.originals.pop(self.path(day), None)
            self.dirty.add(self.path(day))

    @rule(n=picks, m=picks)
    def derive_insight(self, n: int, m: int) -> None:
        """An insight the daemon derived from two live Episodes (SPEC §10 metadata)."""
        a, b = self.pick(n), self.pick(m)
        if a is None or b is None or a.id == b.id or a.deprecated_by or b.deprecated_by:
            return
        meta = {"timestamp": "2026-10-14T09:00:00+00:00", "evidence": [a.id, b.id],
                "depth": 1, "status": "active", "derivation": "dw_machine",
                "evidence_hash": {a.id: a.text_hash, b.id: b.text_hash}}
        self.rt.store.append(REF, Kind.INSIGHT, meta, {"Insight": f"{a.content} / {b.content}"},
                             day=DAYS[0])
        self.dirty.add(self.rt.store.log_path(REF, Kind.INSIGHT, DAYS[0]))

    # ------------------------------------------------------------------ syncing and checking

    @rule()
    def sync_dirty_files(self) -> None:
        for path in sorted(self.dirty):
            self.indexer.sync_path(path)
        self.dirty.clear()

    @rule()
    def scan(self) -> None:
        self.indexer.scan()
        self.dirty.clear()

    @rule()
    def check(self) -> None:
        self.sync_dirty_files()
        self.assert_matches_a_rebuild()

    def assert_matches_a_rebuild(self) -> None:
        copy = self.tmp / f"copy-{len(list(self.tmp.iterdir()))}"
        shutil.copytree(self.root, copy, ignore=shutil.ignore_patterns(".index"))
        fresh = _runtime(copy)
        try:
            Indexer(fresh).reindex()
            broken = any(not parse_log(p.read_text()).ok for p in self.rt.store.iter_files())
            assert fingerprint(self.rt, set()) == fingerprint(fresh, set())
            statuses = {e.id: e.meta.get("status")
                        for e in fresh.store.entries(REF, Kind.INSIGHT)}
            assert statuses == {e.id: e.meta.get("status")
                                for e in self.rt.store.entries(REF, Kind.INSIGHT)}
            if not broken:  # a broken file hides its entries from the check, not from sync
                unknown: set[str] = set()
                assert find_stale(load_records(fresh, REF, unknown), unknown) == {}
        finally:
            fresh.close()

    def teardown(self) -> None:
        try:
            self.scan()
            self.assert_matches_a_rebuild()
        finally:
            self.rt.close()
            shutil.rmtree(self.tmp, ignore_errors=True)


SyncMachine.TestCase.settings = settings(
    max_examples=15,
    stateful_step_count=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_incremental_sync_equals_a_fresh_reindex = SyncMachine.TestCase
