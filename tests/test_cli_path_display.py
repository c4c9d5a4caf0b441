"""One way to show a user's path in command output: as written, letters like é included, with
a tab, a line break or a line separator written as its escape (``\\t``, ``\\n``), so a path
stays one line and a tab is not taken for spaces. ``init`` used ``ascii()`` (``caf\\xe9``, in
quotes) while other commands left a tab raw."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli

NAME = "café\tnotes\nroot"
SHOWN = r"café\tnotes\nroot"


def test_init_shows_a_root_named_with_a_tab_a_line_break_and_accents_as_one_readable_line(
        tmp_path: Path) -> None:
    root = tmp_path / NAME
    result = CliRunner().invoke(cli, ["init", str(root)])
    assert result.exit_code == 0, result.output
    shown = f"{tmp_path}/{SHOWN}"
    assert result.stdout.splitlines() == [
        f"Initialized memory root {shown}",
        f"  settings:   {shown}/everos.toml (all keys commented out = defaults)",
        f"  strategies: {shown}/ome.toml (enable with: everos-reflect enable reflect_episodes "
        f"--root '{shown}')"]
    assert (root / "ome.toml").is_file()


@pytest.mark.usefixtures("no_everos_env")
def test_status_shows_such_a_root_as_init_does(tmp_path: Path) -> None:
    root = tmp_path / NAME
    assert CliRunner().invoke(cli, ["init", str(root)]).exit_code == 0
    result = CliRunner().invoke(cli, ["status", "--root", str(root)])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == f"root {tmp_path}/{SHOWN}  (counts from markdown)"


@pytest.mark.usefixtures("no_everos_env")
def test_an_error_naming_such_a_path_shows_it_as_output_does(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["status", "--root", str(tmp_path / NAME)])
    assert result.exit_code != 0
    (line,) = result.stderr.splitlines()
    assert f"{tmp_path}/{SHOWN}" in line, line
