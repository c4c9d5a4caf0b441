"""A defect of the program met by a command (an exception no handler names) is one line on
stderr with exit 1, as every other error is (SPEC §8), saying what failed and that it is a
defect: it was a Python traceback. An error that says it all (a database's, a library's) is
said alone."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli


@pytest.mark.parametrize(("raised", "said"), [
    (KeyError("between"), "error: internal error (KeyError: 'between'); please report this "
                          "defect"),
    (sqlite3.OperationalError("database is locked"), "error: database is locked"),
])
def test_an_unexpected_error_is_one_line_not_a_traceback(
        root: Path, monkeypatch: pytest.MonkeyPatch, raised: Exception, said: str) -> None:
    def broken(*args: object, **kwargs: object) -> list[dict[str, object]]:
        raise raised

    monkeypatch.setattr("everos_reflect.engine.engine.list_runs", broken)
    result = CliRunner().invoke(cli, ["runs", "--root", str(root)])
    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit)
    assert result.stdout == ""
    assert result.stderr == said + "\n"


def test_a_usage_error_is_still_clicks(root: Path) -> None:
    result = CliRunner().invoke(cli, ["runs", "--limit", "0", "--root", str(root)])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: Invalid value for '--limit'")

