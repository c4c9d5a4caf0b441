"""A record written into a daily log parses that log once, not once per step of the write.

A verdict (``update_meta``) parsed the whole log six times: its edit, the writer's check
before and after, the entry read back, the index's sync and the provenance check after it;
300 verdicts into one day's log spent 317 s of 380 s parsing. The parse of a text is now
shared by every step that read that very text; a text that differs is parsed again.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest

import everos_reflect.markdown.parser as parser_module
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.index.sync import Indexer
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime

REF = UserRef.of("ada")
DAY = date(2026, 10, 12)


@pytest.fixture
def full_parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts every full parse of a log (entries read: the costly kind)."""
    made = [0]
    real = parser_module._Parser.parse

    def counted(self: Any, *, entries: bool = True) -> Any:
        made[0] += entries
        return real(self, entries=entries)

    monkeypatch.setattr(parser_module._Parser, "parse", counted)
    return made


@pytest.fixture
def rt(root: Path) -> Iterator[Runtime]:
    runtime = Runtime(root, embedder=HashEmbedder(32))
    yield runtime
    runtime.close()


def _insights(rt: Runtime, count: int) -> list[str]:
    ids = []
    for n in range(count):
        ids.append(rt.store.append(REF, Kind.INSIGHT, {
            "status": "active", "depth": 1, "question": f"question {n}?"},
            {"Insight": f"insight number {n}"}, day=DAY).id)
    Indexer(rt, notify_clusters=False).sync_paths([rt.store.log_path(REF, Kind.INSIGHT, DAY)])
    return ids


def test_a_verdict_written_and_synced_parses_the_log_once(
        rt: Runtime, full_parses: list[int]) -> None:
    ids = _insights(rt, 5)
    path = rt.store.log_path(REF, Kind.INSIGHT, DAY)
    indexer = Indexer(rt, notify_clusters=False)
    full_parses[0] = 0

    written = rt.store.update_meta(REF, ids[2], {"status": "retired"})
    indexer.sync_paths([path])

    assert written.meta["status"] == "retired"
    # the write's check of what it wrote; the edit, the read-back and the sync reuse parses
    assert full_parses[0] == 1
    row = rt.db().execute("SELECT content_hash FROM entries WHERE id = ?", (ids[2],)).fetchone()
    assert row[0] == written.content_hash == rt.store.get(REF, ids[2]).content_hash


def test_an_archive_mark_written_and_synced_parses_the_log_once(
        rt: Runtime, full_parses: list[int]) -> None:
    ids = _insights(rt, 5)
    path = rt.store.log_path(REF, Kind.INSIGHT, DAY)
    full_parses[0] = 0

    rt.store.deprecate(REF, {ids[0]: ids[1]})
    Indexer(rt, notify_clusters=False).sync_paths([path])

    assert full_parses[0] == 1  # the sync's, of the text the mark made
    assert rt.store.get(REF, ids[0]).deprecated_by == ids[1]


def test_a_hand_edit_between_two_reads_is_read_not_the_parse_before_it(
        rt: Runtime) -> None:
    ids = _insights(rt, 2)
    path = rt.store.log_path(REF, Kind.INSIGHT, DAY)
    assert rt.store.get(REF, ids[0]).content == "insight number 0"
    text = path.read_text("utf-8")
    # same length, same mtime as far as a coarse clock goes: only the bytes differ
    path.write_text(text.replace("insight number 0", "insight number 7"), "utf-8")
    assert rt.store.get(REF, ids[0]).content == "insight number 7"


def test_what_one_reader_changes_in_a_log_it_was_given_no_other_reader_sees(
        rt: Runtime) -> None:
    ids = _insights(rt, 2)
    path = rt.store.log_path(REF, Kind.INSIGHT, DAY)
    first = rt.store.read(path)
    first.entries[0].meta["status"] = "changed by a caller"
    first.entries[0].sections["Insight"] = "changed too"
    first.entries.pop()
    first.frontmatter["user_id"] = "someone else"
    again = rt.store.read(path)
    assert [e.id for e in again.entries] == ids
    assert again.entries[0].meta["status"] == "active"
    assert again.entries[0].content == "insight number 0"
    assert again.frontmatter["user_id"] == "ada"


def test_many_records_updated_in_one_log_at_once_parse_it_once(
        rt: Runtime, full_parses: list[int]) -> None:
    """A lessons run confirming a hundred lessons of one log updated them one by one in one
    write: each update's check parsed the whole log again (a hundred parses)."""
    ids = _insights(rt, 12)
    path = rt.store.log_path(REF, Kind.INSIGHT, DAY)
    before = path.read_text("utf-8")
    full_parses[0] = 0

    rt.store.update_metas(REF, {i: {"status": "retired", "depth": None} for i in ids[2:10]})
    Indexer(rt, notify_clusters=False).sync_paths([path])

    assert full_parses[0] == 1
    after = {e.id: e for e in rt.store.entries(REF, Kind.INSIGHT)}
    assert [after[i].meta["status"] for i in ids] == ["active"] * 2 + ["retired"] * 8 + [
        "active"] * 2
    assert all("depth" not in after[i].meta for i in ids[2:10])
    assert all(after[i].meta["depth"] == 1 for i in ids[:2] + ids[10:])
    assert [after[i].content for i in ids] == [f"insight number {n}" for n in range(12)]
    text = path.read_text("utf-8")  # the first two entries' bytes, and the last two's, kept
    assert text[:text.index(f"<!-- entry:{ids[2]} -->")] == before[
        :before.index(f"<!-- entry:{ids[2]} -->")]
    assert text[text.index(f"<!-- entry:{ids[10]} -->"):] == before[
        before.index(f"<!-- entry:{ids[10]} -->"):]
