"""The fleet commands' edges that need no Ray session: the missing-Ray hint, bad fleet files,
``fleet status``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.fleet.work import run_root
from tests.fleet_support import build_root, open_test_root


def _fleet(tmp_path: Path, text: str = 'roots = ["shard-*"]\n') -> str:
    (tmp_path / "fleet.toml").write_text(text, "utf-8")
    return str(tmp_path / "fleet.toml")


@pytest.mark.parametrize("command", [["run", "reflect_episodes"], ["serve"]])
def test_without_ray_the_fleet_commands_say_how_to_get_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    result = CliRunner().invoke(cli, ["fleet", *command, "--fleet", _fleet(tmp_path)])
    assert result.exit_code == 1
    assert result.stderr.strip() == \
        "error: fleet commands need Ray: pip install 'everos-reflect[ray]'"


def test_a_bad_fleet_file_is_one_line_naming_every_problem(tmp_path: Path) -> None:
    fleet = _fleet(tmp_path, 'roots = ["nowhere-*"]\nray_adress = "auto"\n')
    result = CliRunner().invoke(cli, ["fleet", "status", "--fleet", fleet])
    assert result.exit_code == 1 and len(result.stderr.strip().splitlines()) == 1
    assert "ray_adress: unknown key (did you mean 'ray_address'?)" in result.stderr
    fleet = _fleet(tmp_path, 'roots = ["nowhere-*"]\n')
    result = CliRunner().invoke(cli, ["fleet", "status", "--fleet", fleet])
    assert "roots[0]: 'nowhere-*' matches no folder" in result.stderr


def test_fleet_status_json_has_every_root_last_run_next_run_and_lag(tmp_path: Path) -> None:
    for name in ("shard-a", "shard-b"):
        build_root(tmp_path / name)
    run_root(str(tmp_path / "shard-a"), "reflect_episodes", force=True, opener=open_test_root)
    (tmp_path / "shard-b" / "default_app" / "default_project" / "users" / "u_00" / "episodes"
     / "episode-2026-08-02.md").write_text("edited by hand\n", "utf-8")
    fleet = _fleet(tmp_path, 'roots = ["shard-*"]\n[strategies.reflect_episodes]\n'
                             'enabled = true\ncron = "0 3 * * *"\n')
    result = CliRunner().invoke(cli, ["fleet", "status", "--fleet", fleet, "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    a, b = doc["roots"]
    assert a["root"].endswith("shard-a") and b["root"].endswith("shard-b")
    row = next(r for r in a["strategies"] if r["name"] == "reflect_episodes")
    assert row["last_run"]["status"] == "ok" and row["next_run"].endswith("03:00:00+00:00")
    assert a["index"]["files_changed"] == 0 and b["index"]["files_changed"] == 1
    text = CliRunner().invoke(cli, ["fleet", "status", "--fleet", fleet])
    assert text.exit_code == 0
    assert "1 log(s)" in text.stdout and "up to date" in text.stdout


def test_fleet_status_exits_1_when_a_root_cannot_be_read_with_or_without_json(
        tmp_path: Path) -> None:
    build_root(tmp_path / "shard-a")
    (tmp_path / "shard-b").mkdir()
    (tmp_path / "shard-b" / "everos.toml").write_text("broken = [\n", "utf-8")
    fleet = _fleet(tmp_path)

    as_json = CliRunner().invoke(cli, ["fleet", "status", "--fleet", fleet, "--json"])
    text = CliRunner().invoke(cli, ["fleet", "status", "--fleet", fleet])

    assert as_json.exit_code == text.exit_code == 1
    doc = json.loads(as_json.stdout)  # still the whole document, and nothing else on stdout
    assert [("error" in r) for r in doc["roots"]] == [False, True]
    assert "shard-b/everos.toml" in doc["roots"][1]["error"]
    assert text.stderr.strip() == "error: some roots could not be read (see above)"
