"""An unknown key in a config file with no close match is said briefly: the keys of its
section or table when they are few, else where they are listed (``everos-reflect settings
NAME``, which lists a strategy's keys with their values, defaults and use); "did you mean" is
kept when one is close. A typo in ``ome.toml`` listed all 22 keys of ``reflect_episodes``,
and an unknown ``everos.toml`` or ``fleet.toml`` key said "unknown key" alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.engine.registry import get_strategy, validate_ome
from everos_reflect.errors import ConfigError
from everos_reflect.settings import load_settings, parse_ome

OME = "/r/ome.toml"
LISTED = ("unknown setting (reflect_episodes takes 22: `everos-reflect settings "
          "reflect_episodes` lists them)")


def _ome_problems(text: str) -> list[tuple[str, str, str]]:
    with pytest.raises(ConfigError) as caught:
        validate_ome(parse_ome(text, OME), OME)
    return caught.value.problems


def test_a_strategy_key_nothing_is_close_to_points_at_the_settings_command() -> None:
    [(_, where, reason)] = _ome_problems("[strategies.reflect_episodes]\nzzz = 1\n")
    assert (where, reason) == ("strategies.reflect_episodes.zzz", LISTED)


def test_a_close_strategy_key_is_still_named() -> None:
    [(_, _, reason)] = _ome_problems("[strategies.reflect_episodes]\nmax_retry = 1\n")
    assert reason == "unknown setting (did you mean 'max_retries'?)"


def test_an_unknown_strategy_lists_the_few_there_are() -> None:
    [(_, where, reason)] = _ome_problems("[strategies.zzz]\nenabled = true\n")
    assert where == "strategies.zzz"
    assert reason == ("unknown strategy (known: detect_contradictions, learn_lessons, "
                      "reconcile, reflect_episodes, reflect_insights, revalidate_insights, "
                      "update_worldview)")


def test_an_everos_toml_key_nothing_is_close_to_lists_the_sections_keys(root: Path) -> None:
    (root / "everos.toml").write_text("[server]\nzzz = 1\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(root, env={})
    [(_, where, reason)] = caught.value.problems
    assert (where, reason) == ("server.zzz", "unknown key (known: host, port, token)")


def test_an_environment_key_nothing_is_close_to_lists_the_sections_keys(root: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(root, env={"EVEROS_SERVER__ZZZ": "1"})
    [(_, where, reason)] = caught.value.problems
    assert (where, reason) == ("EVEROS_SERVER__ZZZ",
                               "unknown key server.zzz (known: host, port, token)")


def test_the_settings_command_lists_every_key_with_its_value_in_force(root: Path) -> None:
    (root / "ome.toml").write_text("[strategies.reflect_episodes]\nmax_clusters_per_run = 3\n")
    result = CliRunner().invoke(cli, ["settings", "reflect_episodes", "--json", "--root",
                                      str(root)])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["strategies"]["reflect_episodes"]
    specs = get_strategy("reflect_episodes").all_settings()
    assert [r["key"] for r in rows] == list(specs)
    by_key = {r["key"]: r for r in rows}
    assert by_key["max_clusters_per_run"] == {
        "key": "max_clusters_per_run", "takes": "an integer", "default": 10, "value": 3,
        "help": specs["max_clusters_per_run"].help}
    text = CliRunner().invoke(cli, ["settings", "reflect_episodes", "--root", str(root)])
    assert text.exit_code == 0, text.output
    assert "  max_clusters_per_run = 3  (an integer; default 10)\n" in text.stdout


def test_the_settings_command_shows_the_defaults_while_ome_toml_is_invalid(root: Path) -> None:
    (root / "ome.toml").write_text("[strategies.reflect_episodes]\nzzz = 1\n")
    result = CliRunner().invoke(cli, ["settings", "reflect_episodes", "--root", str(root)])
    assert result.exit_code == 0, result.output
    assert "  max_clusters_per_run = 10  (an integer)\n" in result.stdout
    assert result.stderr == (f"note: invalid ome.toml: strategies.reflect_episodes.zzz: "
                             f"{LISTED}; the defaults are shown\n")


def test_the_settings_command_refuses_an_unknown_strategy(root: Path) -> None:
    result = CliRunner().invoke(cli, ["settings", "zzz", "--root", str(root)])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: no section or strategy 'zzz' (everos.toml "
                                    "sections: llm, embedding, clustering, server, ")


def test_a_fleet_toml_key_nothing_is_close_to_lists_the_few_there_are() -> None:
    from everos_reflect.fleet.config import _KEYS, parse_fleet

    with pytest.raises(ConfigError) as caught:
        parse_fleet('roots = ["/r"]\nzzz = 1\n', "fleet.toml")
    [(_, where, reason)] = caught.value.problems
    assert (where, reason) == ("zzz", f"unknown key (known: {', '.join(sorted(_KEYS))})")


def test_lint_names_a_misspelt_strategy_as_the_engine_does(root: Path) -> None:
    # lint listed all seven strategies where `strategies` (the engine) said which was meant
    (root / "ome.toml").write_text("[strategies.reflect_episode]\nenabled = true\n")
    result = CliRunner().invoke(cli, ["lint", "--root", str(root)])
    assert result.exit_code == 1, result.output
    assert result.stdout.splitlines()[0] == (
        "ome.toml: strategies.reflect_episode: unknown strategy (did you mean "
        "'reflect_episodes'?)")
    [(_, _, engine_said)] = _ome_problems("[strategies.reflect_episode]\nenabled = true\n")
    assert result.stdout.splitlines()[0].endswith(engine_said)
