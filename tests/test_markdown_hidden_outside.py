"""Characters an editor does not show, written outside every entry of a daily log (a note
between entries, text after the last one): not read, kept as written, and named by ``lint``
with their line. A NUL there made grep and git take the log for a binary file unsaid."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.lint import lint_report
from everos_reflect.markdown.parser import parse_log
from tests.test_markdown_parser import PATH, SPEC_EXAMPLE

BEFORE_FIRST = "date: '2026-10-12'\n---\n"


def warnings_of(text: str) -> list[tuple[int, str]]:
    log = parse_log(text, PATH)
    assert log.ok and [e.id for e in log.entries] == ["ep_20261012_0001"]
    return [(d.line, d.message) for d in log.diagnostics]


@pytest.mark.parametrize(("char", "shown"), [
    ("\x07", "U+0007 (control)"),
    ("\x1b", "U+001B (control)"),
    ("\x85", "U+0085 (control)"),
    ("\u202e", "U+202E (RIGHT-TO-LEFT OVERRIDE)"),
])
def test_a_hidden_character_after_the_last_entry_is_named_on_its_line(
        char: str, shown: str) -> None:
    [(line, message)] = warnings_of(SPEC_EXAMPLE + "a note\nthen " + char + " here\n")
    assert line == 23
    assert message.startswith(f"invisible character {shown} outside any entry (not read, "
                              "kept as written)")


def test_a_nul_between_frontmatter_and_entry_says_what_it_does() -> None:
    text = SPEC_EXAMPLE.replace(BEFORE_FIRST, BEFORE_FIRST + "note \x00 and \x1b[31m\n", 1)
    [(line, message)] = warnings_of(text)
    assert line == 7
    assert message == ("invisible characters U+0000 (control), U+001B (control) outside any "
                       "entry (not read, kept as written; a NUL makes grep and git take the "
                       "log for a binary file): remove it unless it is meant")


def test_plain_notes_and_crlf_line_ends_outside_entries_are_not_named() -> None:
    assert warnings_of(SPEC_EXAMPLE + "a note\twith a tab\n") == []
    assert warnings_of((SPEC_EXAMPLE + "a note\n").replace("\n", "\r\n")) == []


def test_lint_reports_it_and_the_file_keeps_it(root: Path) -> None:
    folder = root / "default_app" / "default_project" / "users" / "u_andrew" / "episodes"
    folder.mkdir(parents=True)
    path = folder / "episode-2026-10-12.md"
    text = SPEC_EXAMPLE + "note \x00\n"
    path.write_text(text)
    report = lint_report(root)
    assert not report["ok"]
    [problem] = report["problems"]
    assert problem["line"] == 22
    assert problem["message"].startswith("invisible character U+0000 (control) outside any")
    assert path.read_text() == text


def test_a_character_yaml_refuses_is_named_on_its_own_line() -> None:
    # YAML gives no line for a NUL or an ESC, only its offset: the problem was put on the
    # block's first line, and a person looked for it there
    in_header = SPEC_EXAMPLE.replace("user_id: u_andrew", "user_id: u_andrew\x00")
    [fatal] = parse_log(in_header, PATH).diagnostics
    assert (fatal.line, fatal.severity) == (4, "fatal")
    assert "unacceptable character #x0000" in fatal.message
    in_entry = SPEC_EXAMPLE.replace("parent_type: cluster", "parent_type: clu\x1bster")
    [error] = parse_log(in_entry, PATH).diagnostics
    assert (error.line, error.severity) == (11, "error")
    assert "unacceptable character #x001b" in error.message
