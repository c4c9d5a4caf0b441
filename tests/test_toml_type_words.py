"""A configuration value of the wrong type is named in TOML's words, with the value as TOML
writes it: a person wrote TOML, and "must be int, got str 'ten'" or "got dict {'a': 1}" are
Python's words and Python's repr of it (ome.toml, everos.toml and fleet.toml alike)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from everos_reflect.engine.registry import validate_ome
from everos_reflect.errors import ConfigError
from everos_reflect.fleet.config import parse_fleet
from everos_reflect.settings import packaged_text, parse_ome, parse_settings

#: Python's type names, as a refused value's type was worded
PYTHON_TYPES = re.compile(r"\b(int|str|float|bool|dict|list|NoneType|datetime)\b")


def ome_problems(text: str) -> dict[str, str]:
    with pytest.raises(ConfigError) as caught:
        validate_ome(parse_ome(text, "ome.toml"), "ome.toml")
    return {key: reason for _file, key, reason in caught.value.problems}


def everos_problems(user: str) -> dict[str, str]:
    """Key -> reason of what ``everos.toml`` text ``user`` is refused for."""
    with pytest.raises(ConfigError) as caught:
        parse_settings(packaged_text("default.toml"), user, {}, user_file="everos.toml")
    return {key: reason for _file, key, reason in caught.value.problems}


def fleet_problems(text: str) -> dict[str, str]:
    """Key -> reason of what ``fleet.toml`` text is refused for."""
    with pytest.raises(ConfigError) as caught:
        parse_fleet(text, "fleet.toml")
    return {key: reason for _file, key, reason in caught.value.problems}


@pytest.mark.parametrize(("value", "reason"), [
    ('"ten"', 'must be an integer, got a string: "ten"'),
    ("{a = 1, b = [1, 'x']}", 'must be an integer, got a table: {a = 1, b = [1, "x"]}'),
    ("[1, 2]", "must be an integer, got an array: [1, 2]"),
    ("true", "must be an integer, got a boolean: true"),
    ("1.5", "must be an integer, got a float: 1.5"),
    ("2026-01-02", "must be an integer, got a date: 2026-01-02"),
    ("2026-01-02T03:04:05Z", "must be an integer, got a date-time: 2026-01-02T03:04:05Z"),
])
def test_an_integer_key_of_another_type_is_named_in_tomls_words(value: str, reason: str) -> None:
    problems = ome_problems(f"[strategies.reflect_episodes]\nmax_clusters_per_run = {value}\n")
    assert problems == {"strategies.reflect_episodes.max_clusters_per_run": reason}


def test_a_string_a_number_and_an_array_key_say_what_they_take() -> None:
    problems = ome_problems("[strategies.reflect_episodes]\ncron = 5\n"
                            "retry_backoff_seconds = 'soon'\n"
                            "[strategies.update_worldview]\nkeys = 'identity'\n")
    assert problems == {
        "strategies.reflect_episodes.cron": "must be a string, got an integer: 5",
        "strategies.reflect_episodes.retry_backoff_seconds":
            'must be a number, got a string: "soon"',
        "strategies.update_worldview.keys": 'must be an array, got a string: "identity"',
    }


def test_a_long_value_is_cut_to_about_60_characters() -> None:
    items = ", ".join(str(n) for n in range(1000))
    (reason,) = ome_problems(
        f"[strategies.reflect_episodes]\nmax_clusters_per_run = [{items}]\n").values()
    assert reason.startswith("must be an integer, got an array: [0, 1, 2, 3,")
    shown = reason.removeprefix("must be an integer, got an array: ")
    assert shown.endswith(f"… ({len('[' + items + ']'):,} characters)")
    assert len(shown.split("…")[0]) == 60


def test_a_strategy_that_is_no_table_says_what_it_was() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_ome("[strategies]\nreflect_episodes = 'on'\n", "ome.toml")
    assert caught.value.problems == [
        ("ome.toml", "strategies.reflect_episodes",
         'must be a table [strategies.<name>], got a string: "on"')]


def test_everos_toml_names_types_in_tomls_words() -> None:
    user = ("[llm]\nmax_retries = true\nmodel = 3\n[embedding]\nbatch_size = 1.5\n"
            '[index]\nsearch_mode = ["x"]\n[server]\nport = "8000"\nhost = {a = 1}\n')
    assert everos_problems(user) == {
        "llm.max_retries": "must be an integer, got a boolean: true",
        "llm.model": "must be a string, got an integer: 3",
        "embedding.batch_size": "must be an integer, got a float: 1.5",
        "index.search_mode": 'must be a string, got an array: ["x"]',
        "server.port": 'must be an integer, got a string: "8000"',
        "server.host": "must be a string, got a table: {a = 1}",
    }


def test_a_secret_of_the_wrong_type_names_its_type_in_tomls_words_and_never_its_value() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_settings(packaged_text("default.toml"), "[llm]\napi_key = 987654321\n", {},
                       user_file="everos.toml")
    ((_file, _key, reason),) = caught.value.problems
    assert reason == "must be a string, got an integer (the value is not shown: it is a secret)"


def test_fleet_toml_names_types_in_tomls_words(tmp_path: Path) -> None:
    text = ('roots = "shards/*"\nnum_cpus = "4"\nprobe_work = 1\nray_address = 5\n'
            "[strategies]\nreflect_episodes = [1]\n")
    reasons = fleet_problems(text)
    assert reasons == {
        "roots": 'must be a non-empty array of paths or globs, got a string: "shards/*"',
        "num_cpus": 'must be an integer, got a string: "4"',
        "probe_work": "must be true or false, got an integer: 1",
        "ray_address": 'must be a string: "auto", "ray://host:port" or "" (a local Ray), '
                       "got an integer: 5",
        "strategies.reflect_episodes": "must be a table [strategies.<name>], got an array: [1]",
    }
    for reason in reasons.values():
        assert not PYTHON_TYPES.search(reason.split(", got ")[1]), reason


#: What a number past the largest float is called, after the text written
PAST = "(past the largest number, about 1.8e+308: TOML reads it as {}inf)"


def test_a_number_too_large_for_a_float_is_named_as_written_in_every_config_file() -> None:
    # TOML reads 1e400 as infinity: "max_retries: must be an integer, got a float: inf" named
    # a value nobody wrote, and an ome.toml float key's own bound said "got inf" too.
    assert everos_problems("[llm]\nmax_retries = 1e400\ntimeout_seconds = -1E+400\n"
                           "[clustering]\nthreshold = inf\n") == {
        "llm.max_retries": f"must be an integer, got a float: 1e400 {PAST.format('')}",
        "llm.timeout_seconds": f"must be a finite number, got -1E+400 {PAST.format('-')}",
        "clustering.threshold": "must be a finite number, got inf",  # as written
    }
    assert ome_problems("[strategies.reflect_episodes]\nmax_clusters_per_run = 1e400\n"
                        "min_fact_coverage = 1e400\n"
                        "[strategies.learn_lessons]\nmax_wall_seconds = 1_0e400\n") == {
        "strategies.reflect_episodes.min_fact_coverage":
            f"must be between 0 and 1, got 1e400 {PAST.format('')}",
        "strategies.reflect_episodes.max_clusters_per_run":
            f"must be an integer, got a float: 1e400 {PAST.format('')}",
        "strategies.learn_lessons.max_wall_seconds":  # its range, as for inf
            "must be greater than 0 and at most 31,536,000 (a year), got 1_0e400 "
            + PAST.format(""),
    }
    assert fleet_problems('roots = ["a"]\nnum_cpus = 1e400\npoll_seconds = 9e999\n') == {
        "num_cpus": f"must be an integer, got a float: 1e400 {PAST.format('')}",
        "poll_seconds": f"must be a number, got a float: 9e999 {PAST.format('')}",
    }


def test_a_long_number_too_large_for_a_float_is_cut_as_any_long_value() -> None:
    written = "1" + "0" * 500 + ".5"
    (reason,) = ome_problems(
        f"[strategies.reflect_episodes]\nmax_clusters_per_run = {written}\n").values()
    assert reason == (f"must be an integer, got a float: {written[:60]}… (503 characters) "
                      f"{PAST.format('')}")


#: What a nonzero number below the smallest float is called, after the text written
BELOW = "(below the smallest number above 0, about 4.9e-324: TOML reads it as 0.0)"


def test_a_number_too_small_for_a_float_is_named_as_written_in_every_config_file() -> None:
    # TOML reads 1e-400 as 0.0: "threshold: must be in (0, 1], got 0.0" named a value nobody
    # wrote, in everos.toml, ome.toml and fleet.toml alike
    assert everos_problems("[clustering]\nthreshold = 1e-400\n[llm]\ntimeout_seconds = 0.5e-400\n"
                           "max_retries = 1e-400\n") == {
        "clustering.threshold": f"must be in (0, 1], got 1e-400 {BELOW}",
        "llm.timeout_seconds": f"must be greater than 0, got 0.5e-400 {BELOW}",
        "llm.max_retries": f"must be an integer, got a float: 1e-400 {BELOW}",
    }
    assert ome_problems("[strategies.learn_lessons]\nmax_wall_seconds = 1e-400\n") == {
        "strategies.learn_lessons.max_wall_seconds":
            f"must be greater than 0 and at most 31,536,000 (a year), got 1e-400 {BELOW}"}
    with pytest.raises(ConfigError) as caught:
        parse_fleet('roots = ["a"]\npoll_seconds = 1e-400\n', "fleet.toml")
    assert caught.value.problems == [
        ("fleet.toml", "poll_seconds", f"must be greater than 0, got 1e-400 {BELOW}")]
    # a zero written as zero is as written
    assert ome_problems("[strategies.learn_lessons]\nmax_wall_seconds = 0.0e-400\n") == {
        "strategies.learn_lessons.max_wall_seconds":
            "must be greater than 0 and at most 31,536,000 (a year), got 0.0e-400"}
