"""Sync: the pure planners, then the Indexer against real Markdown, SQLite and LanceDB."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path

import numpy as np
import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.index.db import transaction
from everos_reflect.index.sync import (
    Indexer,
    StoredEntry,
    StoredFile,
    plan_file_sync,
    plan_scan,
)
from everos_reflect.markdown.settling import JUST_WRITTEN_NS
from everos_reflect.model import DailyLog, Diagnostic, Entry, Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings

DAY = date(2026, 10, 12)
MODEL = "hash-64"


def _entry(seq: int, content: str = "text", *, subject: str = "s", **meta: object) -> Entry:
    eid = f"ep_20261012_{seq:04d}"
    base = {"owner_id": "u", "timestamp": "2026-10-12T10:00:00+00:00", "parent_type": "memcell"}
    return Entry(
        id=eid,
        kind=Kind.EPISODE,
        meta={**base, **meta},
        sections={"Subject": subject, "Content": content},
    )


def _log(*entries: Entry, deprecated: dict[str, str] | None = None,
         diagnostics: list[Diagnostic] | None = None) -> DailyLog:
    fm: dict[str, object] = {"type": "episode_daily", "date": DAY.isoformat()}
    if deprecated:
        fm["deprecated_entries"] = deprecated
    for e in entries:
        e.deprecated_by = (deprecated or {}).get(e.id)
    return DailyLog("p.md", Kind.EPISODE, DAY, fm, list(entries), list(diagnostics or []))


def _stored(*entries: Entry, model: str = MODEL) -> dict[str, StoredEntry]:
    return {
        e.id: StoredEntry(e.content_hash, e.text_hash, e.deprecated_by, model) for e in entries
    }


def test_plan_new_entries_are_upserted_and_embedded() -> None:
    a, b = _entry(1), _entry(2)
    plan = plan_file_sync({}, _log(a, b), embed_model=MODEL)
    assert [e.id for e in plan.upserts] == [a.id, b.id]
    assert plan.embed == {a.id, b.id}
    assert plan.deletes == [] and plan.deprecations == {}


def test_plan_unchanged_file_is_empty() -> None:
    a, b = _entry(1), _entry(2)
    plan = plan_file_sync(_stored(a, b), _log(_entry(1), _entry(2)), embed_model=MODEL)
    assert plan.empty
    assert plan.embed == set()


def test_plan_metadata_edit_upserts_without_reembedding() -> None:
    a = _entry(1)
    edited = _entry(1, importance=7)
    plan = plan_file_sync(_stored(a), _log(edited), embed_model=MODEL)
    assert [e.id for e in plan.upserts] == [a.id]
    assert plan.embed == set()


def test_plan_text_edit_reembeds() -> None:
    plan = plan_file_sync(_stored(_entry(1)), _log(_entry(1, "new text")), embed_model=MODEL)
    assert plan.embed == {"ep_20261012_0001"}


def test_plan_model_change_reembeds_unchanged_entries() -> None:
    a = _entry(1)
    plan = plan_file_sync(_stored(a, model="old-model"), _log(_entry(1)), embed_model=MODEL)
    assert plan.embed == {a.id}
    assert [e.id for e in plan.upserts] == [a.id]


def test_plan_hand_deleted_entry_is_deleted() -> None:
    a, b = _entry(1), _entry(2)
    plan = plan_file_sync(_stored(a, b), _log(_entry(1)), embed_model=MODEL)
    assert plan.deletes == [b.id]
    assert plan.upserts == []


def test_plan_malformed_entry_leaves_the_index_and_is_reported() -> None:
    a, b = _entry(1), _entry(2)
    bad = Diagnostic("p.md", 12, "entry ep_20261012_0002: metadata is not YAML")
    plan = plan_file_sync(_stored(a, b), _log(_entry(1), diagnostics=[bad]), embed_model=MODEL)
    assert plan.deletes == [b.id]
    assert plan.problems == [bad]
    assert not plan.fatal


def test_plan_deprecation_changes_only_deprecated_by() -> None:
    a, b = _entry(1), _entry(2)
    plan = plan_file_sync(
        _stored(a, b),
        _log(_entry(1), _entry(2), deprecated={a.id: "ep_20261013_0001"}),
        embed_model=MODEL,
    )
    assert plan.deprecations == {a.id: "ep_20261013_0001"}
    assert plan.upserts == [] and plan.deletes == []


def test_plan_undeprecation_clears_deprecated_by() -> None:
    a = _entry(1)
    a.deprecated_by = "ep_20261013_0001"
    plan = plan_file_sync(_stored(a), _log(_entry(1)), embed_model=MODEL)
    assert plan.deprecations == {a.id: None}


def test_plan_fatal_file_drops_what_was_indexed_as_a_reindex_does() -> None:
    a = _entry(1)
    fatal = Diagnostic("p.md", 1, "frontmatter is not YAML", severity="fatal")
    broken = DailyLog("p.md", Kind.EPISODE, DAY, {}, [], [fatal])
    plan = plan_file_sync(_stored(a), broken, embed_model=MODEL)
    assert plan.fatal and plan.deletes == [a.id]
    assert not (plan.upserts or plan.deprecations)
    assert plan.problems == [fatal]


def test_plan_rejects_ids_that_belong_elsewhere_and_duplicates() -> None:
    a = _entry(1)
    other_day = Entry("ep_20261013_0001", Kind.EPISODE, dict(a.meta), dict(a.sections))
    fact = Entry("af_20261012_0001", Kind.ATOMIC_FACT, dict(a.meta), {"Fact": "x"})
    dup = _entry(1, "second copy")
    plan = plan_file_sync({}, _log(a, other_day, fact, dup), embed_model=MODEL)
    assert [e.id for e in plan.upserts] == [a.id]
    assert plan.upserts[0].content == "text"
    messages = [p.message for p in plan.problems]
    assert len(messages) == 3
    assert "2026-10-13" in messages[0]
    assert "not a episode id" in messages[1]
    assert "duplicate" in messages[2]


def test_plan_scan_is_stat_only() -> None:
    settled = 10 + 5 * JUST_WRITTEN_NS  # synced well after the file was last written
    stored = {
        "a.md": StoredFile(10, 100, "x", settled),
        "b.md": StoredFile(10, 100, "y", settled),
        "gone.md": StoredFile(10, 100, "z", settled),
    }
    disk = {"a.md": (10, 100), "b.md": (11, 100), "new.md": (5, 5)}
    assert plan_scan(stored, disk) == (["b.md", "new.md"], ["gone.md"])


def test_plan_scan_rechecks_files_synced_right_after_a_write() -> None:
    """Same (mtime, size) proves nothing when the write and the sync share a clock tick."""
    stored = {"a.md": StoredFile(10, 100, "x", synced_ns=10 + JUST_WRITTEN_NS // 2)}
    assert plan_scan(stored, {"a.md": (10, 100)}) == (["a.md"], [])


def test_plan_skips_entries_without_text() -> None:
    empty = Entry("ep_20261012_0001", Kind.EPISODE, {"owner_id": "u"}, {"Subject": " "})
    plan = plan_file_sync({}, _log(empty), embed_model=MODEL)
    assert plan.upserts == []
    assert "no text" in plan.problems[0].message


# --------------------------------------------------------------------------- the Indexer


class CountingEmbedder:
    """Wraps an embedder and counts the texts it was asked to embed (optionally renamed)."""

    def __init__(self, inner: HashEmbedder, name: str | None = None) -> None:
        self.inner = inner
        self.dim = inner.dim
        self.name = name or inner.name
        self.calls: list[int] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(len(texts))
        return self.inner.embed(texts)

    @property
    def texts(self) -> int:
        return sum(self.calls)


REF = UserRef.of("u_andrew")


def _runtime(root: Path, name: str | None = None) -> Runtime:
    return Runtime(root, Settings(), embedder=CountingEmbedder(HashEmbedder(32), name))


@pytest.fixture
def rt(tmp_path: Path) -> Iterator[Runtime]:
    runtime = _runtime(tmp_path)
    yield runtime
    runtime.close()


def _append(rt: Runtime, subject: str, content: str, day: date = DAY) -> Entry:
    return rt.store.append(
        REF,
        Kind.EPISODE,
        {"timestamp": f"{day.isoformat()}T10:00:00+00:00", "parent_type": "memcell"},
        {"Subject": subject, "Content": content},
        day=day,
    )


def _sql(rt: Runtime) -> dict[str, tuple[str, str | None]]:
    rows = rt.db().execute("SELECT id, content_hash, deprecated_by FROM entries")
    return {r["id"]: (r["content_hash"], r["deprecated_by"]) for r in rows}


def _lance(rt: Runtime) -> dict[str, tuple[str, str | None]]:
    rows = rt.vectors.rows(Kind.EPISODE)
    return {r["id"]: (r["content_hash"], r["deprecated_by"]) for r in rows}


def _path(rt: Runtime, day: date = DAY) -> Path:
    return rt.store.log_path(REF, Kind.EPISODE, day)


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_sync_path_indexes_appended_entries_in_sqlite_and_lancedb(rt: Runtime) -> None:
    a = _append(rt, "Dog", "Andrew adopted a dog named Toby.")
    b = _append(rt, "Cat", "Andrew considered a cat.")
    result = Indexer(rt).sync_path(_path(rt))
    assert (result.upserted, result.embedded, result.deleted) == (2, 2, 0)
    expected = {a.id: (a.content_hash, None), b.id: (b.content_hash, None)}
    assert _sql(rt) == expected
    assert _lance(rt) == expected
    row = rt.db().execute("SELECT * FROM entries WHERE id = ?", (a.id,)).fetchone()
    assert row["subject"] == "Dog" and row["text"] == "Andrew adopted a dog named Toby."
    assert row["embed_model"] == "hash:32" and row["parent_type"] == "memcell"


def test_unchanged_rescan_embeds_nothing_and_a_touch_only_refreshes_stats(rt: Runtime) -> None:
    _append(rt, "Dog", "Toby")
    _append(rt, "Dog", "Buddy", day=date(2026, 10, 13))
    indexer = Indexer(rt)
    first = indexer.scan()
    assert (first.files_synced, first.entries_embedded) == (2, 2)
    embedder = rt.embedder
    before = embedder.texts
    assert indexer.scan().entries_upserted == 0
    st = _path(rt).stat()
    os.utime(_path(rt), ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    report = indexer.scan()
    assert (report.entries_upserted, report.entries_embedded) == (0, 0)
    assert embedder.texts == before


def test_text_edit_reembeds_but_metadata_edit_keeps_the_vector(rt: Runtime) -> None:
    a = _append(rt, "Dog", "Andrew adopted Toby.")
    indexer = Indexer(rt)
    indexer.sync_path(_path(rt))
    old_vector = rt.vectors.get_vectors(Kind.EPISODE, REF, [a.id])[a.id]

    _edit(_path(rt), "parent_type: memcell", "parent_type: memcell\nimportance: 8")
    result = indexer.sync_path(_path(rt))
    assert (result.upserted, result.embedded) == (1, 0)
    assert np.array_equal(rt.vectors.get_vectors(Kind.EPISODE, REF, [a.id])[a.id], old_vector)

    _edit(_path(rt), "Andrew adopted Toby.", "Andrew adopted Toby and Buddy.")
    result = indexer.sync_path(_path(rt))
    assert (result.upserted, result.embedded) == (1, 1)
    new_vector = rt.vectors.get_vectors(Kind.EPISODE, REF, [a.id])[a.id]
    assert not np.array_equal(new_vector, old_vector)
    row = rt.db().execute("SELECT text FROM entries WHERE id = ?", (a.id,)).fetchone()
    assert row["text"] == "Andrew adopted Toby and Buddy."


def test_hand_deleted_entry_leaves_both_indexes(rt: Runtime) -> None:
    a = _append(rt, "Dog", "Toby")
    b = _append(rt, "Cat", "Misty")
    indexer = Indexer(rt)
    indexer.sync_path(_path(rt))
    _edit(_path(rt), b.raw, "")
    assert indexer.sync_path(_path(rt)).deleted == 1
    assert set(_sql(rt)) == set(_lance(rt)) == {a.id}


def test_deprecation_from_frontmatter_reaches_both_indexes_and_undo_clears_it(
    rt: Runtime,
) -> None:
    a = _append(rt, "Dog", "Toby")
    b = _append(rt, "Dogs", "Toby and Buddy")
    indexer = Indexer(rt)
    indexer.scan()
    rt.store.deprecate(REF, {a.id: b.id})
    report = indexer.scan()
    assert report.entries_embedded == 0
    assert _sql(rt)[a.id][1] == _lance(rt)[a.id][1] == b.id
    rt.store.undeprecate(REF, [a.id])
    indexer.scan()
    assert _sql(rt)[a.id][1] is None and _lance(rt)[a.id][1] is None


def test_broken_frontmatter_drops_its_entries_as_a_reindex_does_and_records_the_problem(
        rt: Runtime) -> None:
    # Kept, they stayed searchable and clustered while a rebuild of the same Markdown had
    # none of them: the index depended on its history.
    a = _append(rt, "Dog", "Toby")
    indexer = Indexer(rt)
    indexer.scan()
    good = _path(rt).read_text()
    _path(rt).write_text(good.replace("type: episode_daily", "type: [episode_daily", 1))
    report = indexer.scan()
    assert set(report.problems) == {rt.store.rel(_path(rt))}
    assert set(_sql(rt)) == set(_lance(rt)) == set()
    assert indexer.problems()[rt.store.rel(_path(rt))][0]["severity"] == "fatal"

    _path(rt).write_text(good)
    report = indexer.scan()
    assert report.problems == {} and indexer.problems() == {}
    assert set(_sql(rt)) == set(_lance(rt)) == {a.id}


def _dropped_while_broken(rt: Runtime, breaking: Callable[[str, Entry], str],
                          ) -> tuple[Entry, Entry, str, Indexer]:
    """Two entries indexed, the second broken by ``breaking`` (the log's text, the entry →
    the broken text) and mended: its row goes while it cannot be read, as a reindex has
    none, and comes back once mended."""
    a = _append(rt, "Dog", "Toby")
    b = _append(rt, "Cat", "Misty")
    indexer = Indexer(rt)
    indexer.scan()
    good = _path(rt).read_text()
    _path(rt).write_text(breaking(good, b))
    report = indexer.scan()
    assert report.entries_deleted == 1 and report.problems
    assert set(_sql(rt)) == set(_lance(rt)) == {a.id}

    _path(rt).write_text(good)
    report = indexer.scan()
    assert report.entries_upserted == 1 and not report.problems
    assert set(_sql(rt)) == set(_lance(rt)) == {a.id, b.id}
    return a, b, good, indexer


def _broken_yaml(text: str, entry: Entry) -> str:
    return text.replace(entry.raw, entry.raw.replace("owner_id: u_andrew",
                                                     "owner_id: [u_andrew"))


def test_a_corrupt_entry_has_no_row_until_fixed_as_in_a_reindex(rt: Runtime) -> None:
    """Still in its file, an entry whose metadata a hand edit broke kept its row (searchable,
    clustered) while a reindex had none. Deleted for real meanwhile, it stays gone."""
    a, b, good, indexer = _dropped_while_broken(rt, _broken_yaml)

    _path(rt).write_text(_broken_yaml(good, b))
    indexer.scan()
    _path(rt).write_text(good.replace(b.raw, ""))
    report = indexer.scan()
    assert report.entries_deleted == 0 and not report.problems
    assert set(_sql(rt)) == set(_lance(rt)) == {a.id}


def test_an_entry_whose_opening_marker_was_deleted_has_no_row_until_fixed(
        rt: Runtime) -> None:
    # Its text is still in the file, but a reindex reads no entry there.
    _dropped_while_broken(rt, lambda text, b: text.replace(f"<!-- entry:{b.id} -->\n", "",
                                                           1))


def test_a_log_saved_as_latin1_is_reported_at_its_line_and_drops_its_rows(rt: Runtime) -> None:
    # `status` (the index's problems) said line 0, "at byte 468"; lint said the line alone.
    a = _append(rt, "Dog", "Toby")
    b = _append(rt, "Cafe", "Andrew went to the cafe")
    indexer = Indexer(rt)
    indexer.scan()
    good = _path(rt).read_text()
    latin1 = good.replace("went to the cafe", "went to the caf\xe9").encode("latin-1")
    _path(rt).write_bytes(latin1)
    line = good[: good.index("went to the cafe")].count("\n") + 1
    message = ("file is not valid UTF-8: byte 0xe9 at column 23 (invalid continuation byte; "
               "save it as UTF-8)")
    indexer.scan()
    rel = rt.store.rel(_path(rt))
    assert [(p["line"], p["message"]) for p in indexer.problems()[rel]] == [(line, message)]
    assert [(d.line, d.message) for d in rt.store.read(_path(rt)).diagnostics] == [
        (line, message)]
    assert not {a.id, b.id} & set(_sql(rt))  # not read: none of it indexed, as in a reindex
    assert _path(rt).read_bytes() == latin1


def test_a_log_saved_as_utf16_is_named_so(rt: Runtime) -> None:
    # "byte 0xff at column 1 (invalid start byte)" said nothing of what happened: Windows
    # Notepad's "Unicode" and PowerShell's `>` write UTF-16 with a byte-order mark.
    a = _append(rt, "Dog", "Toby")
    indexer = Indexer(rt)
    indexer.scan()
    utf16 = _path(rt).read_text().encode("utf-16")
    _path(rt).write_bytes(utf16)
    indexer.scan()
    message = "file is UTF-16 text, not UTF-8 (save it as UTF-8)"
    rel = rt.store.rel(_path(rt))
    assert [(p["line"], p["message"]) for p in indexer.problems()[rel]] == [(1, message)]
    assert [(d.line, d.message) for d in rt.store.read(_path(rt)).diagnostics] == [(1, message)]
    assert a.id not in _sql(rt) and _path(rt).read_bytes() == utf16  # as in a reindex


def test_deleted_file_is_removed_by_the_next_scan(rt: Runtime) -> None:
    _append(rt, "Dog", "Toby")
    keep = _append(rt, "Cat", "Misty", day=date(2026, 10, 13))
    indexer = Indexer(rt)
    indexer.scan()
    _path(rt).unlink()
    report = indexer.scan()
    assert (report.files_removed, report.entries_deleted) == (1, 1)
    assert set(_sql(rt)) == set(_lance(rt)) == {keep.id}
    paths = [r[0] for r in rt.db().execute("SELECT path FROM files")]
    assert paths == [rt.store.rel(_path(rt, date(2026, 10, 13)))]


def test_embedder_change_forces_a_reembed_of_everything(tmp_path: Path) -> None:
    first = _runtime(tmp_path)
    _append(first, "Dog", "Toby")
    _append(first, "Cat", "Misty", day=date(2026, 10, 13))
    Indexer(first).scan()
    first.close()

    second = _runtime(tmp_path, name="another-model")
    report = Indexer(second).scan()
    assert report.entries_embedded == 2
    models = {r[0] for r in second.db().execute("SELECT embed_model FROM entries")}
    assert models == {"another-model"}
    assert {r["embed_model"] for r in second.vectors.rows(Kind.EPISODE)} == {"another-model"}
    assert Indexer(second).scan().entries_embedded == 0
    second.close()


def test_scan_embeds_across_files_in_one_batch(rt: Runtime) -> None:
    for n in range(5):
        _append(rt, "Day", f"entry {n}", day=date(2026, 10, 10 + n))
    report = Indexer(rt).scan()
    assert report.entries_embedded == 5
    assert rt.embedder.calls == [5]


def test_reindex_rebuilds_from_markdown_alone(rt: Runtime) -> None:
    a = _append(rt, "Dog", "Toby")
    b = _append(rt, "Cat", "Misty")
    indexer = Indexer(rt)
    indexer.scan()
    rt.store.deprecate(REF, {a.id: b.id})
    with transaction(rt.db()) as conn:
        conn.execute("UPDATE entries SET content_hash = 'garbage'")
    report = indexer.reindex()
    assert report.entries_upserted == 2
    expected = {a.id: (a.content_hash, b.id), b.id: (b.content_hash, None)}
    assert _sql(rt) == _lance(rt) == expected


def test_entry_with_only_a_subject_is_indexed(rt: Runtime) -> None:
    entry = rt.store.append(
        REF, Kind.EPISODE,
        {"timestamp": "2026-10-12T10:00:00+00:00", "parent_type": "memcell"},
        {"Subject": "Just a title"}, day=DAY,
    )
    result = Indexer(rt).sync_path(_path(rt))
    assert result.upserted == 1
    assert set(_sql(rt)) == set(_lance(rt)) == {entry.id}


def test_sync_paths_indexes_several_logs_with_one_embedding_call(rt: Runtime) -> None:
    other = date(2026, 10, 13)
    first = _append(rt, "Dog", "Andrew adopted Toby.")
    second = _append(rt, "Dog", "Andrew adopted Buddy.", other)
    embedder = rt.embedder
    assert isinstance(embedder, CountingEmbedder)

    results = Indexer(rt).sync_paths([_path(rt), _path(rt, other), _path(rt)])

    assert [r.upserted for r in results] == [1, 1]  # the repeated path is synced once
    assert embedder.calls == [2]
    assert set(_sql(rt)) == set(_lance(rt)) == {first.id, second.id}
