"""``fleet status`` says what a root's own ``status`` says of a strategy that cannot work
there (a tier that needs an LLM on a root with the offline provider: it showed "enabled"
alone), and a root named twice under two spellings (``a/``, a symlink to ``a``) is refused
naming both, where it was merged without a word."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.errors import ConfigError
from everos_reflect.fleet.config import parse_fleet, resolve_roots

NEEDS_LLM = ("update_worldview", "detect_contradictions", "reconcile")
STRATEGIES = (*NEEDS_LLM, "reflect_episodes", "reflect_insights", "revalidate_insights",
              "learn_lessons")


def _root(path: Path, *, enable: tuple[str, ...] = ()) -> Path:
    (path / ".index").mkdir(parents=True)
    (path / "ome.toml").write_text("".join(f"[strategies.{name}]\nenabled = true\n"
                                           for name in enable), "utf-8")
    return path


def test_fleet_status_says_a_strategy_needs_an_llm_as_status_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _root(tmp_path / "shard", enable=(*NEEDS_LLM, "reflect_episodes"))
    monkeypatch.setenv("EVEROS_ROOT", str(root))

    own = CliRunner().invoke(cli, ["status"], terminal_width=200)
    fleet = CliRunner().invoke(cli, ["fleet", "status", "--root", str(root)])

    assert own.exit_code == 0 and fleet.exit_code == 0, (own.output, fleet.output)
    notes = [line for line in own.stdout.splitlines() if line.startswith("[1] needs an LLM")]
    assert len(notes) == 1
    lines = fleet.stdout.splitlines()
    rows = {next(word for word in line.split() if word in STRATEGIES): line
            for line in lines[1:8]}
    for name in NEEDS_LLM:
        assert "enabled (needs an LLM [1])" in rows[name], fleet.stdout
    assert "enabled (" not in rows["reflect_episodes"]
    assert lines[8:] == notes  # the whole text once, below the table


def _spellings(tmp_path: Path) -> tuple[Path, list[str]]:
    root = _root(tmp_path / "shard")
    (tmp_path / "link").symlink_to(root)
    return root, [f"{root}/", str(tmp_path / "link"), str(tmp_path / "link" / ".." / "shard")]


def test_a_fleet_file_naming_one_root_twice_is_a_config_error_naming_both_spellings(
        tmp_path: Path) -> None:
    root, again = _spellings(tmp_path)
    listed = ", ".join(f'"{p}"' for p in [str(root), *again])
    config = parse_fleet(f"roots = [{listed}]\n", str(tmp_path / "fleet.toml"))

    with pytest.raises(ConfigError) as refused:
        resolve_roots(config)

    assert refused.value.problems == [
        (str(tmp_path / "fleet.toml"), f"roots[{i}]",
         f"{spelled!r} is the root {str(root)!r} (roots[0]) again: the same folder; name "
         "each root once") for i, spelled in enumerate(again, start=1)]


def test_a_glob_matching_a_root_a_path_names_runs_it_once(tmp_path: Path) -> None:
    root = _root(tmp_path / "shard-1")
    _root(tmp_path / "shard-2")
    config = parse_fleet(f'roots = ["shard-*", "{root}"]\n', str(tmp_path / "fleet.toml"))

    assert resolve_roots(config) == [root, tmp_path / "shard-2"]


def test_root_given_twice_under_two_spellings_is_one_line_naming_both(tmp_path: Path) -> None:
    root, again = _spellings(tmp_path)
    for spelled in again:
        result = CliRunner().invoke(cli, ["fleet", "status", "--root", str(root),
                                          "--root", spelled])

        assert result.exit_code == 1, result.output
        assert result.stderr == (f"error: --root {spelled!r} is the root {str(root)!r} (given "
                                 "before) again: the same folder; name each root once\n")
        assert os.path.realpath(spelled) == str(root)
