"""How hand-edited daily logs are read: what a person may type into a log that the parser
must report (at its line) rather than pass silently or misread."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli import store_cmds
from everos_reflect.markdown.parser import MAX_HIDDEN_LINES, parse_log

PATH = "u1/episodes/episode-2026-10-12.md"
HEAD = """---
type: episode_daily
schema_version: 1
user_id: u1
date: '2026-10-12'
---
"""
META = "owner_id: u1\ntimestamp: 2026-10-12T09:00:00+00:00\nparent_type: memcell\n"


def entry(n: int, *, meta: str = META, content: str = "c") -> str:
    eid = f"ep_20261012_{n:04d}"
    return (f"<!-- entry:{eid} -->\n---\n{meta}---\n## Subject\ns\n\n## Content\n{content}\n"
            f"<!-- /entry:{eid} -->\n")


def write_root(tmp_path: Path, text: str) -> Path:
    log = tmp_path / "default_app/default_project/users/u1/episodes/episode-2026-10-12.md"
    log.parent.mkdir(parents=True)
    log.write_bytes(text.encode())
    return log


def lint(root: Path) -> tuple[int, list[dict[str, object]]]:
    result = CliRunner().invoke(store_cmds.lint_cmd, ["--root", str(root), "--json"])
    return result.exit_code, json.loads(result.stdout)["problems"]


# --- invisible characters ------------------------------------------------------------------


@pytest.mark.parametrize(("char", "name"), [
    ("\u202e", "U+202E (RIGHT-TO-LEFT OVERRIDE)"),
    ("\u2066", "U+2066 (LEFT-TO-RIGHT ISOLATE)"),
    ("\x07", "U+0007 (control)"),
    ("\x00", "U+0000 (control)"),
    ("\x1b", "U+001B (control)"),
    ("\x7f", "U+007F (control)"),
    ("\x9b", "U+009B (control)"),
    ("\r", "U+000D (control)"),
])
def test_lint_warns_of_an_invisible_character_naming_file_line_and_code_point(
        tmp_path: Path, char: str, name: str) -> None:
    text = HEAD + entry(1) + entry(2, content=f"pay {char}500 to Bob\nsecond line")
    log = write_root(tmp_path, text)

    code, problems = lint(tmp_path)

    assert code == 1
    (problem,) = problems
    assert problem["severity"] == "warning"
    assert problem["file"].endswith("episodes/episode-2026-10-12.md")
    assert problem["line"] == text.split("\n").index(f"pay {char}500 to Bob") + 1 == 29
    assert name in problem["message"] and "ep_20261012_0002" in problem["message"]
    # a warning: the entry is read, its text as written, and the file is not touched
    parsed = parse_log(log.read_bytes().decode(), PATH)
    assert parsed.entries[1].content == f"pay {char}500 to Bob\nsecond line"
    assert log.read_bytes() == text.encode()


def test_tabs_crlf_and_right_to_left_marks_are_not_invisible_characters(tmp_path: Path) -> None:
    text = HEAD + entry(1, content="a\tb \u200fשלום\u200e ok")
    write_root(tmp_path, text.replace("\n", "\r\n"))
    assert lint(tmp_path) == (0, [])


def test_many_lines_with_invisible_characters_give_a_bounded_number_of_warnings() -> None:
    text = HEAD + entry(1, content="\n".join(f"x\x01{i}" for i in range(1000)))
    warnings = parse_log(text, PATH).diagnostics
    assert len(warnings) == MAX_HIDDEN_LINES + 1
    assert [w.line for w in warnings[:3]] == [17, 18, 19]
    assert warnings[-1].message.endswith(f"invisible characters on {1000 - MAX_HIDDEN_LINES} "
                                         "more lines from here")
    assert warnings[-1].line == 17 + MAX_HIDDEN_LINES
