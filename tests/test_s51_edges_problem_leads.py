"""What ``status`` shows of a problem: a table cell's lead cut where the format cuts it, and a
file's problem on the line ``status --json`` says, never one read out of its text.

``problem_cell`` cut a long problem at its first ":", so a problem leading with a path that
holds a colon was shown "C" (or a log's path without its line), one leading with a URL
"http". The renderer split each file's problem "N: message" at its first ": ", so a problem
of the whole file whose message led with a number and ": " was shown on that line.
"""

from __future__ import annotations

import json
from pathlib import Path

from everos_reflect.cli.common import problem_cell
from everos_reflect.cli.main import cli
from everos_reflect.cli.store_cmds import _render_status
from everos_reflect.errors import MarkdownError, NeverIndexed
from tests.status_fixtures import root_with_bad_log

LOG = "a/p/users/u1/episodes/episode-2026-10-12.md"


def test_a_lead_holding_a_colon_is_cut_at_the_format_s_separator() -> None:
    notes: dict[str, int] = {}
    never = str(NeverIndexed("C:\\memory"))  # a root named as on Windows, or a mount "C:"
    assert problem_cell(never, notes) == "C:\\memory is read-only here and… [1]"
    at_line = str(MarkdownError(LOG, 12, "the frontmatter is not valid YAML: mapping "
                                         "values are not allowed here"))
    assert problem_cell(at_line, notes) == "a/p/users/u1/episodes/episode-2… [2]"
    short = str(MarkdownError("x.md", 12, "the frontmatter is not valid YAML: mapping values "
                                          "are not allowed here"))
    assert problem_cell(short, notes) == "x.md:12 [3]"
    url = "http://127.0.0.1:9/v1 answered 503: the model is loading, try again later"
    assert problem_cell(url, notes) == "http://127.0.0.1:9/v1 answered … [4]"
    needs = ("needs an LLM: convictions, contradictions and reconciliations are written by "
             "a language model")
    assert problem_cell(needs, notes) == "needs an LLM [5]"
    assert list(notes) == [never, at_line, short, url, needs]


def test_status_json_carries_each_problem_s_line(tmp_path: Path) -> None:
    root, runner = root_with_bad_log(tmp_path)
    result = runner.invoke(cli, ["status", "--root", str(root), "--json"])
    [item] = json.loads(result.stdout)["files_with_problems"]
    assert len(item["lines"]) == len(item["problems"]) >= 1 and any(item["lines"])
    for line, problem in zip(item["lines"], item["problems"], strict=True):
        assert isinstance(line, int)
        assert problem.startswith(f"{line}: ") if line else not problem[:1].isdigit()


def test_a_message_of_the_whole_file_that_leads_with_a_number_is_shown_whole(
        capsys: object) -> None:
    doc = {"root": "/r", "counts_from": "index", "users": [],
           "files_with_problems": [{"file": LOG, "lines": [0, 7],
                                    "problems": ["2026: a year is no folder name here",
                                                 "7: an entry without its marker"]}],
           "files_with_warnings": [], "config": {"ok": True, "problems": []},
           "strategies": [], "index": None, "merges": None, "insights": None}
    _render_status(doc)
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert "    2026: a year is no folder name here\n" in out
    assert "    line 7: an entry without its marker\n" in out
    assert "line 2026" not in out


def test_a_document_without_lines_shows_each_problem_as_written(capsys: object) -> None:
    """A daemon of an earlier version answers ``status`` without ``lines``."""
    doc = {"root": "/r", "counts_from": "index", "users": [],
           "files_with_problems": [{"file": LOG, "problems": ["7: an entry without marker"]}],
           "files_with_warnings": [], "config": {"ok": True, "problems": []},
           "strategies": [], "index": None, "merges": None, "insights": None}
    _render_status(doc)
    assert "    7: an entry without marker\n" in capsys.readouterr().out  # type: ignore[attr-defined]
