"""Every whole-number key of ``ome.toml`` has an upper bound: TOML parsers take integers of any
size, and past 64 bits one reached SQLite and failed every run, naming no setting."""

from __future__ import annotations

import pytest

from everos_reflect.engine.registry import (
    MAX_SETTING_INT,
    get_strategy,
    known_strategies,
    validate_ome,
    validate_strategy_settings,
)
from everos_reflect.errors import ConfigError
from everos_reflect.problem_words import shown_number
from everos_reflect.settings import parse_ome

NUMBER_KEYS = [(name, key) for name in known_strategies()
               for key, spec in get_strategy(name).all_settings().items()
               if spec.type in (int, float)]


@pytest.mark.parametrize(("name", "key"), NUMBER_KEYS)
@pytest.mark.parametrize("value", [99999999999999999999, MAX_SETTING_INT + 1, 10**400])
def test_a_number_key_refuses_an_integer_past_the_bound_naming_it(
    name: str, key: str, value: int
) -> None:
    # a float key too: float(10**400) raised OverflowError out of the validation
    with pytest.raises(ConfigError) as caught:
        validate_strategy_settings(name, {key: value}, "ome.toml")
    [(file, where, reason)] = caught.value.problems
    assert (file, where) == ("ome.toml", f"strategies.{name}.{key}")
    # compactly past 15 digits, as typed below: all 20 (or 401) digits were printed
    assert reason == f"must be at most 1,000,000,000,000, got {shown_number(value)}", reason
    assert len(reason) < 60


def test_max_clusters_per_run_past_64_bits_in_ome_toml_is_a_config_error() -> None:
    text = ("[strategies.reflect_episodes]\nenabled = true\n"
            "max_clusters_per_run = 99999999999999999999\n")
    with pytest.raises(ConfigError) as caught:
        validate_ome(parse_ome(text, "/r/ome.toml"), "/r/ome.toml")
    assert str(caught.value) == (
        "invalid configuration: /r/ome.toml: strategies.reflect_episodes.max_clusters_per_run: "
        "must be at most 1,000,000,000,000, got 9.99e+19")


def test_the_bound_itself_is_accepted_where_a_key_has_no_tighter_one() -> None:
    values = validate_strategy_settings("reflect_episodes", {"max_llm_calls": 10**12,
                                                             "max_tokens": 10**12}, "ome.toml")
    assert values["max_llm_calls"] == values["max_tokens"] == 10**12
