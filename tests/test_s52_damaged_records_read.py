"""A record read back from the index or a log that is no value of its kind is shown in the
words of what was written, never as an internal error or as Python's words: a run's
``counts`` cell that is JSON but no object of whole numbers (``[1]``, ``5``) ended ``runs``
in "internal error (AttributeError: 'list' object has no attribute 'items')" and was answered
as it was by ``runs --json`` (``"counts": 5``); a log's ``importance:`` left empty was
"importance None", and ``schema_version: true`` "unsupported schema_version True"."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli


@pytest.mark.parametrize("cell", ["[1]", "5", '"x"', '{"merged": "b"}', '{"merged": null}',
                                  '{"merged": true}', "{bad"])
def test_a_run_whose_counts_cannot_be_read_is_listed_with_none(root: Path, cell: str) -> None:
    runner = CliRunner()
    assert runner.invoke(cli, ["trigger", "reflect_episodes", "--force", "--root",
                               str(root)]).exit_code == 0
    conn = sqlite3.connect(root / ".index/sqlite/system.db")
    with conn:
        assert conn.execute("UPDATE runs SET counts = ?", (cell,)).rowcount == 1
    conn.close()

    listed = runner.invoke(cli, ["runs", "--root", str(root)])
    assert listed.exit_code == 0, listed.output
    assert "reflect_episodes" in listed.stdout and "internal error" not in listed.output
    assert "None" not in listed.stdout
    as_json = runner.invoke(cli, ["runs", "--root", str(root), "--json"])
    assert as_json.exit_code == 0, as_json.output
    [run] = json.loads(as_json.stdout)["runs"]
    assert run["counts"] == {}


def test_whole_counts_are_listed_as_before(root: Path) -> None:
    runner = CliRunner()
    runner.invoke(cli, ["trigger", "reflect_episodes", "--force", "--root", str(root)])
    conn = sqlite3.connect(root / ".index/sqlite/system.db")
    with conn:
        conn.execute("UPDATE runs SET counts = ?", ('{"merged": 3, "failed": 0}',))
    conn.close()
    listed = runner.invoke(cli, ["runs", "--root", str(root)])
    assert "merged=3, failed=0" in listed.stdout, listed.stdout


LOG = "default_app/default_project/users/u1/episodes/episode-2026-10-12.md"


def _linted(root: Path, old: str, new: str) -> str:
    runner = CliRunner()
    assert runner.invoke(cli, ["add", "--root", str(root), "--user", "u1", "--subject", "s",
                               "--content", "c", "--timestamp",
                               "2026-10-12T09:00:00Z"]).exit_code == 0
    log = root / LOG
    text = log.read_text()
    assert old in text
    log.write_text(text.replace(old, new, 1))
    return runner.invoke(cli, ["lint", "--root", str(root)]).stdout


@pytest.mark.parametrize(("written", "shown"), [
    ("importance:", "importance null"), ("importance: true", "importance true"),
    ("importance: [3]", "importance [3]"), ("importance: 2.5", "importance 2.5"),
    ("importance: high", "importance 'high'")])
def test_an_importance_that_is_no_whole_number_is_named_in_yaml_s_words(
        root: Path, written: str, shown: str) -> None:
    said = _linted(root, "importance: ", f"{written}\nx_was: ")
    assert f"entry ep_20261012_0001: {shown} is not a whole number 1-10" in said, said


def test_a_schema_version_that_is_no_number_is_named_in_yaml_s_words(root: Path) -> None:
    said = _linted(root, "schema_version: 1", "schema_version: true")
    assert "unsupported schema_version true (this version reads 1)" in said, said
