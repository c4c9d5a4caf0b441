"""``Factory``, the tz database's name for "no zone set yet" (UTC shown as "-00"), is refused
as a time zone with that reason, by config validation (``lint``) and by the scheduler's
triggers alike: it loads as a zone and was accepted, and the schedule ran on UTC while the
config read as if a zone had been chosen."""

from __future__ import annotations

from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.engine.triggers import CronTrigger, time_zone
from everos_reflect.settings import is_iana_zone

REASON = ("'Factory' is the tz database's placeholder for a zone nobody set (its clock is UTC "
          "shown as \"-00\"), not a place's zone: use 'UTC' or a zone such as 'Europe/Paris'")


def test_it_loads_as_a_zone_so_only_a_check_of_our_own_refuses_it() -> None:
    ZoneInfo("Factory")  # what made it pass: the tz database has it
    assert not is_iana_zone("Factory")
    assert is_iana_zone("Europe/Paris") and is_iana_zone("UTC")


def test_lint_refuses_it_with_the_reason(root: Path) -> None:
    with (root / "everos.toml").open("a") as toml:
        toml.write('\n[scheduler]\ntimezone = "Factory"\n')
    result = CliRunner().invoke(cli, ["lint", "--root", str(root)])
    assert result.exit_code == 1, result.output
    assert f"everos.toml: scheduler.timezone: {REASON}" in result.output.splitlines()


def test_a_trigger_given_it_another_way_says_the_same(root: Path) -> None:
    with pytest.raises(ValueError) as caught:
        time_zone("Factory")
    assert str(caught.value) == REASON
    with pytest.raises(ValueError, match="placeholder for a zone nobody set"):
        CronTrigger("0 3 * * *", "Factory")
