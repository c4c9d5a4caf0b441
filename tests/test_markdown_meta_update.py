"""Writing several entries at once and updating the metadata of a daemon-written entry."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.errors import MarkdownError, UnknownEntry
from everos_reflect.markdown.store import MarkdownStore
from everos_reflect.markdown.writer import set_entry_meta
from everos_reflect.model import Kind, UserRef

REF = UserRef.of("ada")


def test_append_many_writes_consecutive_ids_in_one_file(root: Path) -> None:
    store = MarkdownStore(root)
    made = store.append_many(REF, Kind.CONVICTION, [
        ({"key": "strategy", "timestamp": "2026-10-12T09:00:00+00:00"},
         {"Conviction": "Self-serve first."}),
        ({"key": "commitments", "timestamp": "2026-10-12T09:00:00+00:00"},
         {"Conviction": "Deliver SSO."}),
    ])
    assert [e.id.rsplit("_", 1)[1] for e in made] == ["0001", "0002"]
    entries = store.entries(REF, Kind.CONVICTION)
    assert [(e.meta["key"], e.content) for e in entries] == [
        ("strategy", "Self-serve first."), ("commitments", "Deliver SSO.")]


def test_update_meta_changes_only_that_entrys_metadata(root: Path) -> None:
    store = MarkdownStore(root)
    a, b = store.append_many(REF, Kind.RELATION, [
        ({"status": "active", "between": ["wv_20261012_0001", "wv_20261012_0002"]},
         {"Relation": "A contradicts B."}),
        ({"status": "active", "custom": "kept"}, {"Relation": "Other."}),
    ])
    path = store.path_for_id(REF, a.id)
    before = path.read_text()
    updated = store.update_meta(REF, a.id, {"status": "resolved", "resolution": "fixed"})
    assert updated.meta["status"] == "resolved" and updated.meta["resolution"] == "fixed"
    assert updated.meta["between"] == ["wv_20261012_0001", "wv_20261012_0002"]
    assert list(updated.meta)[:3] == list(a.meta)[:3]  # keys keep their places
    after = path.read_text()
    # the other entry and the sections are byte for byte what they were
    assert b.raw in after and "## Relation\nA contradicts B.\n" in after
    assert after.split(f"<!-- entry:{b.id}")[0].count("\n") >= before.split(
        f"<!-- entry:{b.id}")[0].count("\n")
    removed = store.update_meta(REF, a.id, {"resolution": None})
    assert "resolution" not in removed.meta


def test_update_meta_of_a_missing_entry_is_unknown(root: Path) -> None:
    store = MarkdownStore(root)
    (made,) = store.append_many(REF, Kind.RELATION, [({"status": "active"}, {"Relation": "x"})])
    with pytest.raises(UnknownEntry):
        store.update_meta(REF, made.id.replace("0001", "0009"), {"status": "resolved"})


def test_set_entry_meta_refuses_an_unknown_id() -> None:
    with pytest.raises(MarkdownError):
        set_entry_meta("---\ntype: relation_daily\n---\n", "rel_20261012_0001", {"a": 1})
