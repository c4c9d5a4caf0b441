"""Sync: the pure planners, then the Indexer against real Markdown, SQLite and LanceDB."""

from __future__ import annotations

from datetime import date

from everos_reflect.index.sync import (
    StoredEntry,
    StoredFile,
    plan_file_sync,
    plan_scan,
)
from everos_reflect.model import DailyLog, Diagnostic, Entry, Kind

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


def test_plan_fatal_file_keeps_what_was_indexed() -> None:
    a = _entry(1)
    fatal = Diagnostic("p.md", 1, "frontmatter is not YAML", severity="fatal")
    broken = DailyLog("p.md", Kind.EPISODE, DAY, {}, [], [fatal])
    plan = plan_file_sync(_stored(a), broken, embed_model=MODEL)
    assert plan.fatal and plan.empty
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
    stored = {
        "a.md": StoredFile(10, 100, "x"),
        "b.md": StoredFile(10, 100, "y"),
        "gone.md": StoredFile(10, 100, "z"),
    }
    disk = {"a.md": (10, 100), "b.md": (11, 100), "new.md": (5, 5)}
    assert plan_scan(stored, disk) == (["b.md", "new.md"], ["gone.md"])


def test_plan_skips_entries_without_text() -> None:
    empty = Entry("ep_20261012_0001", Kind.EPISODE, {"owner_id": "u"}, {"Subject": " "})
    plan = plan_file_sync({}, _log(empty), embed_model=MODEL)
    assert plan.upserts == []
    assert "no text" in plan.problems[0].message
