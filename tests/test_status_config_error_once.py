"""``status`` says an invalid strategy configuration once: ``status --json`` in
``config.strategies_error``, each strategy row pointing to it (``config_invalid``); the text in
the config problems above the table, each row saying "see above". Every row of
``status --json`` repeated the whole error (seven times over), and the text printed it twice,
in the config problems and again under the table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from everos_reflect.cli.main import cli
from everos_reflect.engine.registry import known_strategies

pytestmark = pytest.mark.usefixtures("no_everos_env")

BAD = '[strategies.reflect_episodes]\nenabled = true\nmax_clusters_per_run = "ten"\n'


def run(*args: str) -> Result:
    # wide enough that no table cell wraps (rich reads COLUMNS)
    return CliRunner().invoke(cli, list(args), env={"COLUMNS": "250"})


def test_status_json_says_the_config_error_once_and_each_row_points_to_it(root: Path) -> None:
    (root / "ome.toml").write_text(BAD)
    result = run("status", "--root", str(root), "--json")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    error = doc["config"]["strategies_error"]
    assert "strategies.reflect_episodes.max_clusters_per_run: must be" in error
    assert [r["name"] for r in doc["strategies"]] == known_strategies()
    for row in doc["strategies"]:
        assert "config_error" not in row
        assert row["config_invalid"] is True
    # the problem list (lint's) and the strategies' error: no copy per row
    assert result.stdout.count("max_clusters_per_run") == 2


def test_status_json_of_a_valid_config_has_no_strategies_error(root: Path) -> None:
    (root / "ome.toml").write_text("[strategies.reflect_episodes]\nenabled = true\n")
    doc = json.loads(run("status", "--root", str(root), "--json").stdout)
    assert "strategies_error" not in doc["config"]
    assert {r["config_invalid"] for r in doc["strategies"]} == {False}


def test_status_text_says_the_config_error_once(root: Path) -> None:
    (root / "ome.toml").write_text(BAD)
    result = run("status", "--root", str(root))
    assert result.exit_code == 1
    assert result.stdout.count("max_clusters_per_run") == 1, result.stdout
    assert result.stdout.count("ome.toml invalid (see above)") == len(known_strategies())


def test_status_text_says_a_fleet_pair_error_that_ome_toml_alone_does_not_have(
        root: Path, tmp_path: Path) -> None:
    # ome.toml alone is valid ("config ok" was printed above the table's footnote)
    (root / "ome.toml").write_text("[strategies.update_worldview]\nmax_records = 30\n")
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(f'roots = ["{root}"]\n[strategies.update_worldview]\nthreshold = 40\n')
    result = run("status", "--root", str(root), "--fleet", str(fleet))
    assert result.exit_code == 1
    assert "config ok" not in result.stdout
    assert result.stdout.count("must be at least threshold") == 1, result.stdout
