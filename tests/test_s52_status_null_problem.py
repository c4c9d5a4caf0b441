"""A problem the index holds with a null message (a hand-edited or damaged index) is shown as
``status`` shows any value that is not there: "-" in its text, null in ``--json``. It was
the text "None" ("line 3: None", ``"3: None"``), a message nobody wrote."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from everos_reflect.cli.main import cli
from tests.status_fixtures import BAD_LOG, root_with_bad_log


@pytest.mark.parametrize(("cell", "line", "shown"), [
    ('[{"line": 3, "message": null}]', 3, "line 3: -"),
    ('[{"message": null, "severity": "error"}]', 0, "-"),
    ("[null]", 0, "-"),
])
def test_a_null_message_is_absent_not_the_text_none(
        tmp_path: Path, cell: str, line: int, shown: str) -> None:
    root, runner = root_with_bad_log(tmp_path, indexed=True)
    conn = sqlite3.connect(root / ".index/sqlite/system.db")
    with conn:
        assert conn.execute("UPDATE files SET problems = ? WHERE problems != '[]'",
                            (cell,)).rowcount == 1
    conn.close()

    as_json = runner.invoke(cli, ["status", "--root", str(root), "--json"])
    assert as_json.exit_code == 0, as_json.output
    [item] = json.loads(as_json.stdout)["files_with_problems"]
    assert item == {"file": BAD_LOG, "problems": [None], "lines": [line]}

    text = runner.invoke(cli, ["status", "--root", str(root)])
    assert text.exit_code == 0, text.output
    lines = text.stdout.splitlines()
    at = lines.index(f"  {BAD_LOG}")
    assert lines[at + 1] == f"    {shown}"
    assert "None" not in text.stdout


def test_a_message_that_is_text_is_shown_as_before(tmp_path: Path) -> None:
    root, runner = root_with_bad_log(tmp_path, indexed=True)
    result = runner.invoke(cli, ["status", "--root", str(root), "--json"])
    [item] = json.loads(result.stdout)["files_with_problems"]
    assert all(isinstance(p, str) and p for p in item["problems"])
