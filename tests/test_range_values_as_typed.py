"""A number refused by a range check is shown as it was typed, or compactly.

``everos.toml``, ``ome.toml``, ``fleet.toml`` and the environment showed a refused number as
Python writes it: ``1e21`` as ``1e+21``, a whole ``31536001`` of a float key as
``31536001.0``, ``0.1000000000000000055511`` as ``0.1``, a 22-digit integer whole, and a
401-digit one of a float key was an "internal error" (``OverflowError``) of ``status``.
"""

from __future__ import annotations

import pytest

from everos_reflect.engine.registry import validate_strategy_settings
from everos_reflect.errors import ConfigError
from everos_reflect.fleet.config import parse_fleet
from everos_reflect.settings import packaged_text, parse_settings

DEFAULTS = packaged_text("default.toml")
DEBOUNCE = "must be 0 to 3600 (an hour), got "
INTERVAL = "must be 1 to 604,800 (seconds; a week), got "


def _problems(user_text: str | None, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_settings(DEFAULTS, user_text, env or {}, "root/everos.toml")
    return [reason for _, _, reason in caught.value.problems]


@pytest.mark.parametrize(("written", "shown"), [
    ("1e21", "1e21"), ("0.30000000000000004e300", "0.30000000000000004e300"),
    ("4000", "4000"), ("1000000000000000000000", "1.00e+21"),
])
def test_everos_toml_shows_a_refused_number_as_typed(written: str, shown: str) -> None:
    assert _problems(f"[index]\nwatch_debounce_seconds = {written}\n") == [DEBOUNCE + shown]


def test_a_huge_integer_key_is_shown_compactly() -> None:
    assert _problems("[llm]\nmax_retries = 1000000000000000000000\n") == [
        "must be 0 to 100, got 1.00e+21"]


def test_a_whole_number_past_the_largest_float_is_a_problem_not_an_internal_error() -> None:
    [reason] = _problems(f"[index]\nreconcile_interval_seconds = 1{'0' * 400}\n")
    assert reason.startswith("must be a finite number, got 1.00e+400 (past the largest"), reason


def test_the_environment_is_shown_as_typed() -> None:
    assert _problems(None, {"EVEROS_INDEX__RECONCILE_INTERVAL_SECONDS": "0.10000000000000000555",
                            "EVEROS_INDEX__WATCH_DEBOUNCE_SECONDS": "100000000000000000000"}) == [
        DEBOUNCE + "1.00e+20", INTERVAL + "0.10000000000000000555"]


def test_ome_and_fleet_toml_show_it_as_typed_too() -> None:
    with pytest.raises(ConfigError) as caught:
        validate_strategy_settings("reflect_insights", {"threshold": 100001}, "ome.toml")
    assert caught.value.problems[0][2].endswith(", got 100001")
    with pytest.raises(ConfigError) as caught:
        parse_fleet('roots = ["a"]\ntask_cpus = 0.00009\n', "fleet.toml")
    assert caught.value.problems == [
        ("fleet.toml", "task_cpus", "must be 0.0001 to 100,000, got 0.00009")]
