"""Blank lines (white space, a BOM) a person left before a daily log's frontmatter: read past
and kept as written, never a fatal "missing file frontmatter" for the whole day's entries."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from everos_reflect.markdown import writer
from everos_reflect.markdown.marks import foreign_marks
from everos_reflect.markdown.parser import parse_log
from everos_reflect.markdown.store import MarkdownStore
from everos_reflect.model import Kind, UserRef
from tests.test_markdown_parser import PATH, SPEC_EXAMPLE

REF = UserRef.of("u_andrew")
DAY = date(2026, 10, 12)
LEADS = ["\n", "\ufeff\n", "  \t\n\n", "\r\n", "\ufeff \r\n\n"]


@pytest.mark.parametrize("lead", LEADS)
def test_blank_lines_before_the_frontmatter_are_read_past(lead: str) -> None:
    plain = parse_log(SPEC_EXAMPLE, PATH)
    log = parse_log(lead + SPEC_EXAMPLE, PATH)
    assert log.ok and log.diagnostics == []
    assert log.frontmatter == plain.frontmatter
    assert [(e.id, e.meta, e.sections) for e in log.entries] == [
        (e.id, e.meta, e.sections) for e in plain.entries]
    assert log.entries[0].line == plain.entries[0].line + lead.count("\n")
    header = parse_log(lead + SPEC_EXAMPLE, PATH, entries=False)
    assert header.ok and header.frontmatter == plain.frontmatter


@pytest.mark.parametrize("lead", LEADS)
def test_an_archive_mark_is_added_after_them_and_they_are_kept(lead: str) -> None:
    text = lead + SPEC_EXAMPLE
    patched = writer.add_deprecations(text, {"ep_20261012_0001": "ep_20261012_0002"})
    assert patched == lead + SPEC_EXAMPLE.replace(
        "date: '2026-10-12'\n---\n",
        "date: '2026-10-12'\ndeprecated_entries:\n  ep_20261012_0001: ep_20261012_0002\n---\n")
    assert writer.remove_deprecations(patched, ["ep_20261012_0001"]) == text


def test_a_foreign_archive_mark_is_named_on_its_line_after_them() -> None:
    text = "\n\n" + SPEC_EXAMPLE.replace(
        "date: '2026-10-12'\n", "date: '2026-10-12'\ndeprecated_entries:\n"
                                "  ep_20261012_0009: ep_20261012_0001\n")
    [problem] = foreign_marks(parse_log(text, PATH))
    assert problem.line == 9  # its key's line, after two blank ones


def test_an_append_to_a_log_with_a_blank_first_line_keeps_it(root: Path) -> None:
    store = MarkdownStore(root)
    path = store.log_path(REF, Kind.EPISODE, DAY)
    path.parent.mkdir(parents=True)
    path.write_text("\n" + SPEC_EXAMPLE)
    entry = store.append(REF, Kind.EPISODE,
                         {"timestamp": datetime(2026, 10, 12, 9, tzinfo=UTC)},
                         {"Subject": "s", "Content": "c"}, day=DAY)
    assert entry.id == "ep_20261012_0002"
    text = path.read_text()
    assert text.startswith("\n" + SPEC_EXAMPLE)
    assert [e.id for e in store.read(path).entries] == ["ep_20261012_0001", "ep_20261012_0002"]


def test_text_before_the_frontmatter_is_still_fatal_and_named() -> None:
    log = parse_log("notes\n" + SPEC_EXAMPLE, PATH)
    assert not log.ok and log.entries == []
    assert [(d.line, d.severity) for d in log.diagnostics if d.severity == "fatal"] == [
        (1, "fatal")]


def test_too_many_blank_lines_before_anything_are_named() -> None:
    most = 100  # parser.MAX_LEAD_LINES
    log = parse_log("\n" * (most + 1) + SPEC_EXAMPLE, PATH)
    assert not log.ok
    [fatal] = [d for d in log.diagnostics if d.severity == "fatal"]
    assert f"more than {most} blank lines" in fatal.message
