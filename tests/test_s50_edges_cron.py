"""A cron value crontab would not take is refused naming the key, the field, what the field
holds and what it takes.

APScheduler's own words reached the user before: "Error validating expression '61': the last
value (61) is higher than the maximum value (59)" and "Increment must be higher than 0" named
no field (minute, hour, ...), and the second not even the value."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.engine.triggers import CronTrigger


@pytest.mark.parametrize(("expr", "says"), [
    ("61 * * * *", "the minute field holds 61, out of range (it takes 0-59,"),
    ("*/0 * * * *", "the minute field holds '*/0', a step of '0': a step is a whole number "
                    "of 1 or more"),
    ("0 24 * * *", "the hour field holds 24, out of range (it takes 0-23,"),
    ("0 2 0 * *", "the day field holds 0, out of range (it takes 1-31,"),
    ("0 2 32 * *", "the day field holds 32, out of range (it takes 1-31,"),
    ("0 2 * 13 *", "the month field holds 13, out of range (it takes 1-12 or jan-dec,"),
    ("0-70 * * * *", "the minute field '0-70' holds 70, out of range (it takes 0-59,"),
    ("1,99 2 * * *", "the minute field '1,99' holds 99, out of range"),
    ("40-10 2 * * *", "the minute field holds the range '40-10', which runs backwards"),
    ("0 */0 * * *", "the hour field holds '*/0', a step of '0'"),
    ("0 2 L * *", "the day field holds 'L', which is not a day (it takes 1-31,"),
    ("0 2 * foo *", "the month field holds 'foo', which is not a month"),
    ("1,,2 * * * *", "the minute field '1,,2' holds '', which is not a value, a range or a step"),
    ("0 2 * * 1/0", "invalid step '0' in the day-of-week field '1/0'"),
])
def test_an_invalid_cron_field_is_named_with_what_it_holds_and_takes(
        expr: str, says: str) -> None:
    with pytest.raises(ValueError) as info:
        CronTrigger(expr)
    message = str(info.value)
    assert message.startswith(f"invalid cron '{expr}'") or "day-of-week" in message, message
    assert says in message, message
    assert "Error validating" not in message and "Increment" not in message


@pytest.mark.parametrize("expr", ["0 2 last * *", "0 2 * jan-mar/2 *", "5/15 2 * * *",
                                  "0,30 */4 1-15 * mon-fri", "@hourly", "59 23 31 12 7"])
def test_valid_crons_still_pass(expr: str) -> None:
    CronTrigger(expr)


def test_lint_names_the_key_and_the_field_of_a_bad_cron_in_ome_toml(root: Path) -> None:
    (root / "ome.toml").write_text('[strategies.reflect_episodes]\ncron = "61 * * * *"\n'
                                   '[strategies.revalidate_insights]\ncron = "*/0 * * * *"\n')
    done = CliRunner().invoke(cli, ["lint", "--root", str(root)], prog_name="everos-reflect")
    assert done.exit_code == 1, done.output
    assert ("ome.toml: strategies.reflect_episodes.cron: invalid cron '61 * * * *': the minute "
            "field holds 61, out of range (it takes 0-59") in done.output
    assert ("ome.toml: strategies.revalidate_insights.cron: invalid cron '*/0 * * * *': the "
            "minute field holds '*/0', a step of '0'") in done.output


@pytest.mark.parametrize(("expr", "says"), [
    ("@reboot", "invalid cron '@reboot': no such shorthand here (use @yearly, @annually, "
                "@monthly, @weekly, @daily, @midnight, @hourly, or 5 fields"),
    ("@every 5m", "invalid cron '@every 5m': no such shorthand here"),
    ("0 0 2 * * 1", "got 6 (no seconds or year field: 5 fields only)"),
    ("0 0 2 * * 1 2026", "got 7 (no seconds or year field: 5 fields only)"),
])
def test_a_shorthand_or_a_field_count_cron_does_not_take_is_named(expr: str, says: str) -> None:
    # "@reboot" and "@every 5m" said "expected 5 fields, got 1" (and 2), as if a field were
    # missing; a seconds or year field (Quartz, some crons) said "got 6" and no more
    with pytest.raises(ValueError) as info:
        CronTrigger(expr)
    assert says in str(info.value)
