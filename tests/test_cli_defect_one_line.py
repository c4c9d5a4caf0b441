"""A defect of the program met by a command (an exception no handler names) is one line on
stderr with exit 1, as every other error is (SPEC §8), saying what failed and that it is a
defect: it was a Python traceback. An error that says it all (a database's, a library's) is
said alone."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from everos_reflect.cli.main import cli


def runs_raising(root: Path, monkeypatch: pytest.MonkeyPatch, raised: Exception) -> Result:
    """``runs`` where listing the runs raises ``raised``."""
    def broken(*args: object, **kwargs: object) -> list[dict[str, object]]:
        raise raised

    monkeypatch.setattr("everos_reflect.engine.engine.list_runs", broken)
    return CliRunner().invoke(cli, ["runs", "--root", str(root)])


@pytest.mark.parametrize(("raised", "said"), [
    (KeyError("between"), "error: internal error (KeyError: 'between'); please report this "
                          "defect (EVEROS_TRACEBACK=1 prints where it happened)"),
    (sqlite3.OperationalError("database is locked"), "error: database is locked"),
])
def test_an_unexpected_error_is_one_line_not_a_traceback(
        root: Path, monkeypatch: pytest.MonkeyPatch, raised: Exception, said: str) -> None:
    monkeypatch.delenv("EVEROS_TRACEBACK", raising=False)
    result = runs_raising(root, monkeypatch, raised)
    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit)
    assert result.stdout == ""
    assert result.stderr == said + "\n"


def test_a_usage_error_is_still_clicks(root: Path) -> None:
    result = CliRunner().invoke(cli, ["runs", "--limit", "0", "--root", str(root)])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: Invalid value for '--limit'")



@pytest.mark.parametrize("setting", ["1", "yes"])
def test_everos_traceback_prints_where_a_defect_happened_before_its_line(
        root: Path, monkeypatch: pytest.MonkeyPatch, setting: str) -> None:
    """The one line leaves out what a defect report needs: where it happened."""
    monkeypatch.setenv("EVEROS_TRACEBACK", setting)
    result = runs_raising(root, monkeypatch, KeyError("between"))
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert "in broken" in result.stderr and lines[-2] == "KeyError: 'between'"
    assert lines[-1].startswith("error: internal error (KeyError: 'between'); please report")


@pytest.mark.parametrize("setting", ["0", ""])
def test_everos_traceback_0_or_empty_keeps_the_one_line(
        root: Path, monkeypatch: pytest.MonkeyPatch, setting: str) -> None:
    monkeypatch.setenv("EVEROS_TRACEBACK", setting)
    result = runs_raising(root, monkeypatch, KeyError("between"))
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("error: internal error")


def test_everos_traceback_leaves_an_error_of_the_input_one_line(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a defect has a traceback worth reading; a database's own error says it all."""
    monkeypatch.setenv("EVEROS_TRACEBACK", "1")
    result = runs_raising(root, monkeypatch, sqlite3.OperationalError("database is locked"))
    assert result.stderr == "error: database is locked\n"
