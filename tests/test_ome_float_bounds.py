"""Every number key of ``ome.toml`` refuses what TOML lets one write but no clock, count or
score can mean: ``inf``, ``-inf``, ``nan`` and floats such as ``1e300``. ``max_wall_seconds =
inf`` and the insight tier's ``threshold = 1e300`` were accepted, and ``lint`` called them
fine."""

from __future__ import annotations

import math

import pytest

from everos_reflect.engine.registry import (
    get_strategy,
    known_strategies,
    validate_ome,
    validate_strategy_settings,
)
from everos_reflect.errors import ConfigError
from everos_reflect.settings import parse_ome

FLOAT_KEYS = [(name, key) for name in known_strategies()
              for key, spec in get_strategy(name).all_settings().items()
              if spec.type is float]


def only_problem(name: str, key: str, value: float) -> str:
    with pytest.raises(ConfigError) as caught:
        validate_strategy_settings(name, {key: value}, "ome.toml")
    [(file, where, reason)] = caught.value.problems
    assert (file, where) == ("ome.toml", f"strategies.{name}.{key}")
    return reason


@pytest.mark.parametrize(("name", "key"), FLOAT_KEYS)
@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_a_float_key_refuses_a_value_that_is_not_finite(name: str, key: str,
                                                        value: float) -> None:
    # the key's own range when it names one, else that the number must be finite
    reason = only_problem(name, key, value)
    assert reason.endswith(f"got {value}"), reason


@pytest.mark.parametrize(("name", "key"), FLOAT_KEYS)
@pytest.mark.parametrize("value", [1e300, 1e13])
def test_a_float_key_refuses_a_huge_value_naming_its_bound(name: str, key: str,
                                                            value: float) -> None:
    reason = only_problem(name, key, value)
    assert "at most" in reason or "between 0 and" in reason or "in (0, 1]" in reason, reason
    assert ", got " in reason, reason


@pytest.mark.parametrize("name", known_strategies())
def test_max_wall_seconds_is_more_than_0_and_at_most_a_year(name: str) -> None:
    message = "must be greater than 0 and at most 31,536,000 (a year), got "
    assert only_problem(name, "max_wall_seconds", 1e300) == message + "1e+300"
    assert only_problem(name, "max_wall_seconds", 0) == message + "0"  # as typed
    assert only_problem(name, "max_wall_seconds", 31_536_001) == message + "31536001"
    values = validate_strategy_settings(name, {"max_wall_seconds": 31_536_000}, "ome.toml")
    assert values["max_wall_seconds"] == 31_536_000.0


def test_the_insight_threshold_names_its_range() -> None:
    message = ("must be greater than 0 and at most 100,000 (summed importance: 10,000 "
               "Episodes of importance 10), got ")
    assert only_problem("reflect_insights", "threshold", 1e300) == message + "1e+300"
    assert only_problem("reflect_insights", "threshold", -1.0) == message + "-1.0"
    values = validate_strategy_settings("reflect_insights", {"threshold": 1e5}, "ome.toml")
    assert values["threshold"] == 1e5


def test_inf_and_nan_in_ome_toml_are_one_config_error_naming_file_and_keys() -> None:
    text = ("[strategies.reflect_episodes]\nenabled = true\nmax_wall_seconds = inf\n"
            "[strategies.reflect_insights]\nthreshold = nan\n")
    with pytest.raises(ConfigError) as caught:
        validate_ome(parse_ome(text, "/r/ome.toml"), "/r/ome.toml")
    assert sorted(caught.value.problems) == [
        ("/r/ome.toml", "strategies.reflect_episodes.max_wall_seconds",
         "must be greater than 0 and at most 31,536,000 (a year), got inf"),
        ("/r/ome.toml", "strategies.reflect_insights.threshold",
         "must be greater than 0 and at most 100,000 (summed importance: 10,000 Episodes "
         "of importance 10), got nan"),
    ]


def test_a_float_key_with_a_one_sided_check_refuses_inf_as_not_finite() -> None:
    from everos_reflect.engine.registry import SettingSpec, _coerce

    spec = SettingSpec("weight", float, 1.0, check=lambda v: None if v >= 0 else "must be >= 0")
    assert _coerce(spec, math.inf) == (math.inf, "must be a finite number, got inf")
    assert _coerce(spec, 1e300)[1] == "must be at most 1,000,000,000,000, got 1e+300"
