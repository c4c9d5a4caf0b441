"""An option that takes one value, given twice, is refused naming it, as the API refuses a
query parameter given twice: the last value was taken without a word (``task add --outcome
success --outcome failure`` recorded a failure). Flags and options meant to be repeated
(``--step``, ``--kind``) may be."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli

TASK = ["task", "add", "--user", "u", "--type", "deploy", "--goal", "Ship it",
        "--step", "build", "--step", "push"]


@pytest.mark.parametrize(("args", "option", "command"), [
    ([*TASK, "--outcome", "success", "--outcome", "failure"], "--outcome", "task add"),
    (["search", "dog", "--user", "u", "--user", "v"], "--user", "search"),
    (["reports", "--limit", "1", "--limit=2"], "--limit", "reports"),
])
def test_an_option_given_twice_is_refused_naming_it(root: Path, args: list[str], option: str,
                                                    command: str) -> None:
    result = CliRunner().invoke(cli, [*args, "--root", str(root)])
    assert result.exit_code == 2
    assert result.output == (f"error: option given more than once: {option}; give each once "
                             f"(see 'cli {command} --help')\n")
    assert not list(root.glob("*/*/users/u/tasks/*.md"))  # nothing recorded


def test_repeatable_options_and_flags_may_be_repeated(root: Path) -> None:
    result = CliRunner().invoke(cli, [*TASK, "--outcome", "success", "--json", "--json",
                                      "--root", str(root)])
    assert result.exit_code == 0, result.output
    assert len(list(root.glob("*/*/users/u/tasks/*.md"))) == 1
