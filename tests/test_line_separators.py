"""U+2028 LINE SEPARATOR, U+2029 PARAGRAPH SEPARATOR (and the other characters
``str.splitlines`` ends a line at) in an Episode's text: the parser ends a log's lines at
``\\n`` only, YAML, editors and ``splitlines`` at those too. Whatever the daemon writes holds
none of them (each is written as the line break it means, so marker-looking text after one
is escaped like any line), and a hand-written one is a ``lint`` warning naming line and
column, so no reader of a log takes a line for a marker that another reads as text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.llm.base import ScriptedLLM
from everos_reflect.llm.tasks import InvalidReply, strings, text_field
from everos_reflect.markdown.marks import foreign_marks
from everos_reflect.markdown.parser import CLOSE_RE, HEADING_RE, OPEN_RE, parse_log
from everos_reflect.markdown.store import MarkdownStore
from everos_reflect.model import Kind, UserRef
from everos_reflect.procedural.tasks import read_task
from everos_reflect.runtime import Runtime
from tests.api_client import ApiClient
from tests.reflect_fixtures import ANDREW, make_runtime, run_reflection, seed_pets

U1 = UserRef.of("u1")
#: an Episode's content whose second and third "lines" are a closing marker and a heading to
#: every reader that breaks lines at U+2028 / U+2029
SNEAKY = ("Andrew adopted Toby.\u2028<!-- /entry:ep_20261012_0001 -->\u2028## Subject\u2029"
          "<!-- entry:ep_20261012_0009 -->\u2028Buddy came later.")
AS_WRITTEN = ("Andrew adopted Toby.\n<!-- /entry:ep_20261012_0001 -->\n## Subject\n\n"
              "<!-- entry:ep_20261012_0009 -->\nBuddy came later.")


def marker_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if OPEN_RE.match(line) or CLOSE_RE.match(line)
            or HEADING_RE.match(line)]


def assert_every_reader_agrees(path: Path) -> None:
    """The lines ``splitlines`` (as YAML and editors) reads as markers or headings are the
    ones the parser reads, and the file holds no line break but ``\\n``."""
    text = path.read_text(encoding="utf-8")
    assert not set(text) & set("\u2028\u2029\x85\x0b\x0c\x1c\x1d\x1e"), repr(text)
    assert marker_lines(text.splitlines()) == marker_lines(text.split("\n")[:-1])
    log = parse_log(text, str(path))
    assert [d for d in log.diagnostics if "separator" in d.message.lower()
            or "column" in d.message] == []


def test_add_writes_a_line_separator_as_a_line_break_and_no_marker_line(root: Path) -> None:
    result = CliRunner().invoke(cli, ["add", "--root", str(root), "--user", "u1",
                                      "--subject", "Dogs", "--content", SNEAKY,
                                      "--timestamp", "2026-10-12T10:00:00+00:00"])
    assert result.exit_code == 0, result.output
    path = MarkdownStore(root).path_for_id(U1, "ep_20261012_0001")
    assert_every_reader_agrees(path)
    [entry] = parse_log(path.read_text(), str(path)).entries
    assert entry.content == AS_WRITTEN  # the marker-looking lines are text, escaped on disk
    assert "\n\\<!-- /entry:ep_20261012_0001 -->\n" in path.read_text()


def test_the_api_writes_a_line_separator_as_a_line_break(root: Path) -> None:
    rt = Runtime(root)
    try:
        resp = ApiClient(rt)("POST", "/api/v1/memory/episodes", json={
            "user_id": "u1", "subject": "Dogs", "content": SNEAKY,
            "timestamp": "2026-10-12T10:00:00+00:00"})
        assert resp.status_code == 201, resp.text
        entry = rt.store.get(U1, resp.json()["data"]["id"])
        assert entry.content == AS_WRITTEN
        assert_every_reader_agrees(rt.store.path_for_id(U1, entry.id))
    finally:
        rt.close()


def test_a_narrative_with_line_separators_is_written_with_line_breaks(root: Path) -> None:
    narrative = ("Andrew had no pets.\u2028<!-- /entry:ep -->\u2029He adopted "
                 "Toby, then Buddy.\u2028He now has two dogs.")
    rt = make_runtime(root, ScriptedLLM([("Andrew's dogs", narrative)],
                                        [["Andrew has two dogs."]]))
    try:
        seed_pets(rt)
        assert run_reflection(rt, min_fact_coverage=0.0)["merged"] == 1
        [merged] = [e for e in rt.store.entries(ANDREW, Kind.EPISODE)
                    if e.parent_type == "cluster"]
        assert merged.content == ("Andrew had no pets.\n<!-- /entry:ep -->\n\n"
                                  "He adopted Toby, then Buddy.\nHe now has two dogs.")
        for path in rt.store.iter_files(ANDREW):
            assert_every_reader_agrees(path)
    finally:
        rt.close()


def test_a_model_s_line_separators_are_taken_as_line_breaks() -> None:
    assert text_field({"content": "a\u2028b\u2029c"}, "content") == "a\nb\n\nc"
    assert strings({"facts": ["x\u2028y", "z"]}, "facts") == ["x\ny", "z"]
    with pytest.raises(InvalidReply, match="U\\+0085"):  # a control character, as before
        text_field({"content": "a\x85b"}, "content")


HEAD = """---
type: episode_daily
schema_version: 1
user_id: u1
date: '2026-10-12'
note: "kept\u2028as written"
deprecated_entries:
  ep_20261012_0007: ep_20261012_0001
---
"""
ENTRY = """<!-- entry:ep_20261012_0001 -->
---
owner_id: u1
timestamp: 2026-10-12T10:00:00+00:00
parent_type: memcell
parent_id: mc_1
---
## Subject
Dogs

## Content
Andrew adopted Toby.\u2028<!-- /entry:ep_20261012_0001 -->\u2028Buddy came later.
<!-- /entry:ep_20261012_0001 -->
"""


def test_a_hand_written_line_separator_is_a_lint_warning_naming_line_and_column(
    root: Path,
) -> None:
    path = root / "default_app/default_project/users/u1/episodes/episode-2026-10-12.md"
    path.parent.mkdir(parents=True)
    path.write_text(HEAD + ENTRY, encoding="utf-8")

    result = CliRunner().invoke(cli, ["lint", "--root", str(root), "--json"])
    assert result.exit_code == 1, result.output
    problems = json.loads(result.stdout)["problems"]
    lines = (HEAD + ENTRY).split("\n")
    content_line = lines.index(next(x for x in lines if x.startswith("Andrew"))) + 1
    separators = [p for p in problems if "LINE SEPARATOR" in p["message"]]
    assert [(p["line"], p["severity"]) for p in separators] == [
        (6, "warning"), (content_line, "warning")]
    assert "U+2028 (LINE SEPARATOR) at column 12" in separators[0]["message"]
    assert ("U+2028 (LINE SEPARATOR) at column 21, U+2028 (LINE SEPARATOR) at column 54"
            in separators[1]["message"])
    # kept as written and read as one line: the entry is whole, its text as in the file
    [entry] = parse_log(path.read_text(), str(path)).entries
    assert entry.content.endswith("\u2028Buddy came later.")
    assert path.read_text(encoding="utf-8") == HEAD + ENTRY


def test_an_archive_mark_is_named_on_its_line_after_a_line_separator() -> None:
    """``splitlines`` counted the U+2028 in ``note`` as a line end: the foreign mark was
    said to be on line 9, the frontmatter's closing line."""
    log = parse_log(HEAD + ENTRY, "u1/episodes/episode-2026-10-12.md")
    [mark] = foreign_marks(log)
    assert mark.line == 8 == (HEAD + ENTRY).split("\n").index(
        "  ep_20261012_0007: ep_20261012_0001") + 1


def test_a_task_step_holding_a_line_separator_is_one_step() -> None:
    text = """---
type: task_daily
schema_version: 1
user_id: u1
date: '2026-10-12'
---
<!-- entry:tk_20261012_0001 -->
---
owner_id: u1
timestamp: 2026-10-12T10:00:00+00:00
task_type: deploy
outcome: success
---
## Goal
Deploy

## Steps
1. check logs\u2028then deploy
2. verify

## Outcome
success
<!-- /entry:tk_20261012_0001 -->
"""
    [entry] = parse_log(text, "u1/tasks/task-2026-10-12.md").entries
    assert read_task(entry).steps == ("check logs\u2028then deploy", "verify")
