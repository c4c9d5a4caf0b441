"""A command the CLI prints for the user to paste names the root quoted for a shell, so a root
whose path holds a space or a quote is one word when pasted. ``init`` printed ``enable
reflect_episodes --root /tmp/my notes``, which a shell reads as ``--root /tmp/my`` and a stray
``notes``; ``demo --keep`` and the "create one with `everos-reflect init …`" error did too."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from everos_reflect.cli import demo_cmds
from everos_reflect.cli.main import cli

pytestmark = pytest.mark.usefixtures("no_everos_env")
NAME = "my notes's root"


def pasted(line: str) -> list[str]:
    """The words a shell makes of the command between ``everos-reflect`` and the line's end
    (or a closing parenthesis or backquote)."""
    command = re.search(r"everos-reflect (.*?)\)?`?$", line)
    assert command, line
    return shlex.split(command.group(1))


def test_init_hint_pasted_enables_the_strategy_in_a_root_named_with_a_space_and_a_quote(
        tmp_path: Path) -> None:
    root = tmp_path / NAME
    result = CliRunner().invoke(cli, ["init", str(root)])
    assert result.exit_code == 0, result.output
    hint = result.stdout.splitlines()[-1]
    words = pasted(hint)
    assert words == ["enable", "reflect_episodes", "--root", str(root)], hint
    enabled = CliRunner().invoke(cli, words)
    assert enabled.exit_code == 0, enabled.output


def test_demo_keep_lines_name_the_root_as_one_word(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    def stand_in(root: Path, show: Any = None) -> dict[str, Any]:
        return {}

    monkeypatch.setattr(demo_cmds, "run_demo", stand_in)
    target = tmp_path / NAME
    result = CliRunner().invoke(cli, ["demo", "--root", str(target)])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if "everos-reflect " in line]
    assert [pasted(line)[-2:] for line in lines] == [["--root", str(target)]] * 2, lines


def test_no_root_error_names_the_init_command_to_paste(tmp_path: Path) -> None:
    missing = tmp_path / NAME
    result = CliRunner().invoke(cli, ["status", "--root", str(missing)])
    assert result.exit_code != 0
    (line,) = result.stderr.splitlines()
    assert pasted(line) == ["init", str(missing)], line
    assert not missing.exists()
