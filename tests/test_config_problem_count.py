"""However many problems a configuration has, the messages that carry them stay short: an
``ome.toml`` of 20,000 misspelt keys (170 KB) made ``status --json`` print 75 MB (the whole
error repeated in every strategy's row) and every command an error line of 9 MB. Each message
names the first problems and counts the rest; ``lint`` lists every one."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from everos_reflect.cli import store_cmds
from everos_reflect.errors import MAX_PROBLEMS_SHOWN, ConfigError

pytestmark = pytest.mark.usefixtures("no_everos_env")

KEYS = 20_000


@click.group()
def cli() -> None:
    """Only the store commands (status, lint)."""


for _command in store_cmds.COMMANDS:
    cli.add_command(_command)


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    assert run("init", str(path)).exit_code == 0
    (path / "ome.toml").write_text("[strategies.reflect_episodes]\n" + "".join(
        f"k{i} = 1\n" for i in range(KEYS)))
    return path


def test_a_config_error_names_the_first_problems_and_counts_the_rest() -> None:
    problems = [("ome.toml", f"strategies.x.k{i}", "unknown setting") for i in range(KEYS)]
    error = ConfigError(problems)
    assert error.problems == problems  # every one is kept for lint
    shown = [f"ome.toml: strategies.x.k{i}: unknown setting" for i in range(MAX_PROBLEMS_SHOWN)]
    assert str(error) == ("invalid configuration: " + "; ".join(shown)
                          + f"; and {KEYS - MAX_PROBLEMS_SHOWN:,} more problems")


def test_a_config_error_of_few_problems_names_them_all() -> None:
    problems = [("f", f"k{i}", "bad") for i in range(MAX_PROBLEMS_SHOWN)]
    assert str(ConfigError(problems)) == "invalid configuration: " + "; ".join(
        f"f: k{i}: bad" for i in range(MAX_PROBLEMS_SHOWN))


def test_status_json_of_a_root_with_20000_config_problems_stays_small(root: Path) -> None:
    result = run("status", "--root", str(root), "--json")
    assert len(result.stdout) < 100_000, len(result.stdout)
    doc = json.loads(result.stdout)
    config = doc["config"]
    assert config["ok"] is False
    assert len(config["problems"]) == MAX_PROBLEMS_SHOWN
    assert config["problems_not_shown"] == KEYS - MAX_PROBLEMS_SHOWN
    assert config["problems"][0]["message"].startswith("strategies.reflect_episodes.k0: "
                                                       "unknown setting")
    assert config["strategies_error"].endswith(
        f"and {KEYS - MAX_PROBLEMS_SHOWN:,} more problems")
    assert {row["config_invalid"] for row in doc["strategies"]} == {True}


def test_lint_still_lists_every_problem(root: Path) -> None:
    result = run("lint", "--root", str(root))
    assert result.exit_code != 0
    assert sum("unknown setting" in line for line in result.stdout.splitlines()) == KEYS


def test_enable_on_a_file_of_many_problems_still_says_nothing_was_changed(root: Path) -> None:
    # the note came after every problem, so the message's cut left it out
    before = (root / "ome.toml").read_bytes()
    result = run("enable", "reflect_episodes", "--root", str(root))
    assert result.exit_code != 0
    [line] = result.stderr.strip().splitlines()
    assert "(not changed): fix this file first" in line
    assert line.endswith(f"and {KEYS + 1 - MAX_PROBLEMS_SHOWN:,} more problems")
    assert (root / "ome.toml").read_bytes() == before
