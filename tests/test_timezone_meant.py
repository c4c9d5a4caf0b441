"""``[scheduler] timezone`` written in the wrong case, with a space, or one letter off is told
the IANA zone meant: ``timezone = "utc"`` was "unknown time zone 'utc' (use an IANA name such
as 'UTC' or 'Europe/Paris')", the name it meant given as an example of another."""

from __future__ import annotations

import pytest

from everos_reflect.errors import ConfigError
from everos_reflect.settings import packaged_text, parse_settings


def _reason(zone: str, env: dict[str, str] | None = None) -> str:
    user = "" if env else f'[scheduler]\ntimezone = "{zone}"\n'
    with pytest.raises(ConfigError) as caught:
        parse_settings(packaged_text("default.toml"), user, env or {}, "everos.toml")
    [(_, key, reason)] = caught.value.problems
    assert key in ("scheduler.timezone", "EVEROS_SCHEDULER__TIMEZONE")
    return reason


@pytest.mark.parametrize(("zone", "meant"), [
    ("utc", "UTC"),
    ("europe/paris", "Europe/Paris"),
    ("Europe/Paris ", "Europe/Paris"),
    ("Europe/Pariss", "Europe/Paris"),
    ("America/NewYork", "America/New_York"),
])
def test_a_misspelt_zone_is_told_the_one_meant(zone: str, meant: str) -> None:
    assert _reason(zone) == f"unknown time zone '{zone}' (did you mean '{meant}'?)"


def test_the_environment_variable_is_told_the_one_meant_too() -> None:
    assert _reason("", {"EVEROS_SCHEDULER__TIMEZONE": "utc"}) == (
        "unknown time zone 'utc' (did you mean 'UTC'?)")


@pytest.mark.parametrize("zone", ["Mars/Olympus", "x" * 70])
def test_a_zone_close_to_none_keeps_the_examples(zone: str) -> None:
    assert _reason(zone).endswith(" (use an IANA name such as 'UTC' or 'Europe/Paris')")
