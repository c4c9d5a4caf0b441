"""``[scheduler] timezone`` names an IANA zone (SPEC §4). ``localtime`` was accepted (a file
``ZoneInfo`` can load: a link to the host's own zone), so the schedule followed whatever zone
the machine was set to; ``posix/…`` and ``right/…`` copies (the latter counting leap
seconds) were taken too. Each is a configuration error naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.engine.triggers import CronTrigger
from everos_reflect.errors import ConfigError
from everos_reflect.settings import packaged_text, parse_settings

NOT_IANA = ["localtime", "posix/Europe/Paris", "right/UTC"]


def _defaults() -> str:
    return packaged_text("default.toml")


@pytest.mark.parametrize("name", NOT_IANA)
def test_a_zone_file_that_is_no_iana_name_is_a_config_error_naming_the_key(name: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_settings(_defaults(), f'[scheduler]\ntimezone = "{name}"\n', {},
                       "root/everos.toml")
    [(file, key, reason)] = info.value.problems
    assert (file, key) == ("root/everos.toml", "scheduler.timezone")
    # "unknown time zone" on a host with no such file at all
    assert reason == (f"'{name}' is not an IANA time zone name (use one such as 'UTC' or "
                      "'Europe/Paris')") or reason.startswith(f"unknown time zone '{name}' (")


@pytest.mark.parametrize("name", ["UTC", "Europe/Paris", "America/Argentina/Buenos_Aires",
                                  "Etc/GMT+5"])
def test_iana_names_are_accepted(name: str) -> None:
    settings = parse_settings(_defaults(), f'[scheduler]\ntimezone = "{name}"\n', {},
                              "root/everos.toml")
    assert settings.scheduler.timezone == name


def test_a_command_refuses_localtime_in_one_line(tmp_path: Path) -> None:
    root = tmp_path / "root"
    assert CliRunner().invoke(cli, ["init", str(root)]).exit_code == 0
    (root / "everos.toml").write_text('[scheduler]\ntimezone = "localtime"\n', "utf-8")
    result = CliRunner().invoke(cli, ["status", "--root", str(root)])
    assert result.exit_code != 0
    [line] = result.stderr.splitlines()
    assert "scheduler.timezone" in line and "'localtime'" in line


@pytest.mark.parametrize("name", NOT_IANA)
def test_a_cron_trigger_refuses_a_zone_that_is_no_iana_name(name: str) -> None:
    with pytest.raises(ValueError, match=r"is not an IANA timezone name|unknown timezone"):
        CronTrigger("0 2 * * 1", name)
