"""Invisible formatting characters already in a daily log -- a zero-width space, a BOM in
the middle of the text, a bidi isolate, a tag character, written by hand or restated by a
narrative -- are named by ``lint`` (file, line, column, code point) and counted by
``status``; the entry stays read and indexed as written (the Markdown is the truth). New text
refuses them (``tests/test_hidden_format_text.py``); only controls and bidi overrides were
named in a log before."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.index.sync import Indexer
from everos_reflect.markdown.parser import parse_log
from everos_reflect.model import HIDDEN_FORMAT_CLASS, hidden_format
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from everos_reflect.status import status_document
from tests.test_hand_edit_reading import HEAD, PATH, entry, lint, write_root

HIDDEN = [("\u200b", "U+200B (ZERO WIDTH SPACE)"),
          ("\ufeff", "U+FEFF (ZERO WIDTH NO-BREAK SPACE)"),
          ("\u2060", "U+2060 (WORD JOINER)"),
          ("\u2069", "U+2069 (POP DIRECTIONAL ISOLATE)"),
          ("\U000e0041", "U+E0041 (TAG LATIN CAPITAL LETTER A)")]


@pytest.mark.parametrize(("char", "name"), HIDDEN, ids=[n for _, n in HIDDEN])
def test_lint_names_file_line_column_and_code_point_and_the_entry_is_read_as_written(
        tmp_path: Path, char: str, name: str) -> None:
    text = HEAD + entry(1) + entry(2, content=f"pay 10{char}0 EUR to Bob\nsecond line")
    log = write_root(tmp_path, text)

    code, problems = lint(tmp_path)

    assert code == 1
    (problem,) = problems
    assert problem["severity"] == "warning"
    assert problem["file"].endswith("users/u1/episodes/episode-2026-10-12.md")
    assert problem["line"] == text.split("\n").index(f"pay 10{char}0 EUR to Bob") + 1
    assert f"{name} at column 7" in problem["message"]
    assert "ep_20261012_0002" in problem["message"]
    parsed = parse_log(log.read_bytes().decode(), PATH)
    assert [e.id for e in parsed.entries] == ["ep_20261012_0001", "ep_20261012_0002"]
    assert parsed.entries[1].content == f"pay 10{char}0 EUR to Bob\nsecond line"
    assert log.read_bytes() == text.encode()


def test_outside_every_entry_it_is_named_too(tmp_path: Path) -> None:
    text = HEAD + entry(1) + "a note\u200b here\n"
    write_root(tmp_path, text)
    code, problems = lint(tmp_path)
    assert code == 1
    assert [(p["line"], p["message"].split(" outside")[0]) for p in problems] == [
        (len(text.split("\n")) - 1, "invisible character U+200B (ZERO WIDTH SPACE)")]


def test_several_on_a_line_are_each_named_where_they_first_stand(tmp_path: Path) -> None:
    write_root(tmp_path, HEAD + entry(1, content="a\u200bb\u200bc\u2066d"))
    (problem,) = lint(tmp_path)[1]
    assert ("U+200B (ZERO WIDTH SPACE) at column 2, U+2066 (LEFT-TO-RIGHT ISOLATE) at "
            "column 6") in problem["message"]


def test_a_bom_starting_the_file_joiners_and_soft_hyphens_are_not_named(
        tmp_path: Path) -> None:
    text = "\ufeff" + HEAD + entry(1, content=(
        "family \U0001f468\u200d\U0001f469, \u0645\u06cc\u200c\u0634 co\u00adop \u200fok"))
    write_root(tmp_path, text)
    assert lint(tmp_path) == (0, [])


def test_status_counts_the_warning_of_an_indexed_log_whose_entry_is_indexed(
        tmp_path: Path) -> None:
    write_root(tmp_path, HEAD + entry(1, content="adopted To\u200bby the dog"))
    rt = Runtime(tmp_path, Settings(), embedder=HashEmbedder(32))
    try:
        Indexer(rt).scan()
        doc = status_document(rt)
        ids = [r[0] for r in rt.db().execute("SELECT id FROM entries").fetchall()]
    finally:
        rt.close()
    assert doc["counts_from"] == "index"
    assert doc["files_with_warnings"] == [
        {"file": "default_app/default_project/users/u1/episodes/episode-2026-10-12.md",
         "warnings": 1}]
    assert doc["totals"]["episode"] == {"live": 1, "deprecated": 0}
    assert ids == ["ep_20261012_0001"]


def test_the_class_holds_exactly_the_characters_new_text_refuses() -> None:
    pattern = re.compile(f"[{HIDDEN_FORMAT_CLASS}]")
    listed = {c for c in range(sys.maxunicode + 1) if pattern.match(chr(c))}
    assert listed == {c for c in range(sys.maxunicode + 1) if hidden_format(chr(c))}


def test_in_the_file_frontmatter_it_is_named_with_its_line_and_column(tmp_path: Path) -> None:
    head = HEAD.replace("date: '2026-10-12'\n", "date: '2026-10-12'\nnote: see\u202e ep_1\n")
    text = head + entry(1)
    write_root(tmp_path, text)
    code, problems = lint(tmp_path)
    assert code == 1
    assert [(p["line"], p["severity"], p["message"].split(" (kept")[0]) for p in problems] == [
        (6, "warning", "file frontmatter: invisible character U+202E (RIGHT-TO-LEFT OVERRIDE) "
                       "at column 10")]
    assert [e.id for e in parse_log(text, PATH).entries] == ["ep_20261012_0001"]
