"""Triggers are pure: crontab semantics, catch-up once, and the data-driven kinds."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from everos_reflect.engine.triggers import (
    AccumulatorTrigger,
    CensusTrigger,
    CountTrigger,
    CronTrigger,
    OnWriteTrigger,
)

WED = datetime(2026, 10, 7, 12, 0, tzinfo=UTC)  # a Wednesday


def fires(trigger: CronTrigger, after: datetime, n: int) -> list[datetime]:
    out = []
    for _ in range(n):
        after = trigger.next_fire(after)
        out.append(after)
    return out


def test_default_reflection_cron_fires_mondays_at_two() -> None:
    times = fires(CronTrigger("0 2 * * 1"), WED, 3)
    assert [t.isoformat() for t in times] == [
        "2026-10-12T02:00:00+00:00",
        "2026-10-19T02:00:00+00:00",
        "2026-10-26T02:00:00+00:00",
    ]
    assert {t.strftime("%A") for t in times} == {"Monday"}


@pytest.mark.parametrize("expr", ["0 3 * * 0", "0 3 * * 7", "0 3 * * sun", "0 3 * * SUN"])
def test_sunday_is_zero_or_seven_or_name(expr: str) -> None:
    assert CronTrigger(expr).next_fire(WED).isoformat() == "2026-10-11T03:00:00+00:00"


def test_weekday_ranges_lists_and_steps_use_crontab_numbering() -> None:
    days = {t.strftime("%a") for t in fires(CronTrigger("0 9 * * 1-5"), WED, 10)}
    assert days == {"Mon", "Tue", "Wed", "Thu", "Fri"}
    days = {t.strftime("%a") for t in fires(CronTrigger("0 9 * * 0,6"), WED, 6)}
    assert days == {"Sat", "Sun"}
    days = {t.strftime("%a") for t in fires(CronTrigger("0 9 * * */2"), WED, 12)}
    assert days == {"Sun", "Tue", "Thu", "Sat"}


def test_day_of_month_and_weekday_together_fire_on_either() -> None:
    # crontab(5): "0 0 13 * 5" is every 13th *and* every Friday.
    times = fires(CronTrigger("0 0 13 * 5"), datetime(2026, 2, 1, tzinfo=UTC), 4)
    assert [t.date().isoformat() for t in times] == [
        "2026-02-06", "2026-02-13", "2026-02-20", "2026-02-27",
    ]
    times = fires(CronTrigger("0 0 13 * 1"), datetime(2026, 2, 10, tzinfo=UTC), 3)
    assert [t.date().isoformat() for t in times] == ["2026-02-13", "2026-02-16", "2026-02-23"]


def test_cron_runs_in_the_configured_timezone() -> None:
    t = CronTrigger("0 2 * * 1", "America/New_York").next_fire(WED)
    assert t.utcoffset() == timedelta(hours=-4)
    assert t.astimezone(UTC).isoformat() == "2026-10-12T06:00:00+00:00"


def test_dst_spring_forward_fires_once_on_the_short_day() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    cron = CronTrigger("30 2 * * *", "Europe/Berlin")
    times = fires(cron, datetime(2026, 3, 27, 12, tzinfo=UTC), 4)
    days = [t.astimezone(berlin).date().isoformat() for t in times]
    assert days == ["2026-03-28", "2026-03-29", "2026-03-30", "2026-03-31"]
    assert all(b > a for a, b in itertools.pairwise(times))


def test_dst_fall_back_fires_a_fixed_time_once_not_twice() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    cron = CronTrigger("30 2 * * *", "Europe/Berlin")
    times = fires(cron, datetime(2026, 10, 24, 12, tzinfo=UTC), 3)
    assert [t.astimezone(berlin).date().isoformat() for t in times] == [
        "2026-10-25", "2026-10-26", "2026-10-27",
    ]


# Zones whose clocks change at midnight (Chile, the Azores, Cuba, Lebanon), at 02:00 or 03:00
# (New York, Berlin, Sydney), by half an hour (Lord Howe) and by two hours (Troll).
DST_ZONES = ("America/Santiago", "Atlantic/Azores", "America/Havana", "Asia/Beirut",
             "America/New_York", "Europe/Berlin", "Australia/Sydney", "Australia/Lord_Howe",
             "Antarctica/Troll")


@pytest.mark.parametrize("zone", DST_ZONES)
@pytest.mark.parametrize("expr", ["0 0 * * *", "30 2 * * *", "15 1 * * *"])
def test_a_daily_cron_fires_once_on_every_local_day_of_the_year(zone: str, expr: str) -> None:
    """A daily time the clock skips runs just after the jump, on that day, and one it repeats
    runs once. Midnight lost a day: in New York or Berlin the day after the clocks went
    forward, in Santiago or the Azores the day they did."""
    tz = ZoneInfo(zone)
    times = fires(CronTrigger(expr, zone), datetime(2025, 12, 31, 12, tzinfo=tz), 365)
    days = [t.astimezone(tz).date() for t in times]
    assert days == [datetime(2026, 1, 1).date() + timedelta(days=i) for i in range(365)]
    assert all(b > a for a, b in itertools.pairwise(times))


@pytest.mark.parametrize("zone", DST_ZONES)
def test_a_weekly_cron_at_midnight_fires_every_week_of_the_year(zone: str) -> None:
    """`0 0 * * 1` skipped the whole week after the clocks went forward in New York, Berlin,
    London or Sydney: a week without Reflection."""
    tz = ZoneInfo(zone)
    for expr, first in (("0 0 * * 1", 5), ("@weekly", 4)):
        times = fires(CronTrigger(expr, zone), datetime(2026, 1, 1, tzinfo=tz), 52)
        days = [t.astimezone(tz).date() for t in times]
        assert days == [datetime(2026, 1, first).date() + timedelta(weeks=i)
                        for i in range(52)], expr


def _clock_changes(zone: str, year: int = 2026) -> list[datetime]:
    """The instants (UTC, on the hour) at which ``zone``'s offset changes during ``year``."""
    tz = ZoneInfo(zone)
    t, end = datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)
    changes = []
    while t < end:
        if t.astimezone(tz).utcoffset() != (t - timedelta(hours=1)).astimezone(tz).utcoffset():
            changes.append(t)
        t += timedelta(hours=1)
    return changes


@pytest.mark.parametrize("zone", [z for z in DST_ZONES if z != "Australia/Lord_Howe"])
@pytest.mark.parametrize(("expr", "every"), [
    ("0 * * * *", timedelta(hours=1)),
    ("@hourly", timedelta(hours=1)),
    ("*/20 * * * *", timedelta(minutes=20)),
])
def test_an_hourly_cron_fires_every_hour_through_both_clock_changes(
        zone: str, expr: str, every: timedelta) -> None:
    """A schedule with `*` for the hour follows the clock hour by hour, as cron(8) runs
    wildcard jobs: the night the clocks went back, `0 * * * *` ran at 01:00 and then at
    02:00, two hours later, skipping the repeated hour. (In these zones every offset is whole
    hours, so local :00 is UTC :00 all year.)"""
    changes = _clock_changes(zone)
    assert len(changes) == 2, changes
    for change in changes:
        start = change - timedelta(hours=6)
        times = fires(CronTrigger(expr, zone), start - timedelta(microseconds=1), 48)
        assert [t - start for t in times] == [every * i for i in range(48)], (zone, change)
        assert {t.astimezone(ZoneInfo(zone)).minute % 20 for t in times} == {0}


def test_a_fixed_hour_still_runs_once_in_a_repeated_hour() -> None:
    """Only a wildcard hour runs twice: `0 1 * * *` fires once the night 01:00 comes twice."""
    ny = ZoneInfo("America/New_York")
    times = fires(CronTrigger("0 1 * * *", "America/New_York"),
                  datetime(2026, 10, 31, 12, tzinfo=UTC), 3)
    assert [t.astimezone(ny).isoformat() for t in times] == [
        "2026-11-01T01:00:00-04:00", "2026-11-02T01:00:00-05:00", "2026-11-03T01:00:00-05:00"]


def test_a_weekly_run_at_midnight_on_the_day_the_clock_springs_forward_runs_after_the_jump(
) -> None:
    # 2026-09-06 is a Sunday; Chile's clocks go from 00:00 straight to 01:00.
    cron = CronTrigger("@weekly", "America/Santiago")
    assert cron.next_fire(datetime(2026, 9, 1, tzinfo=UTC)).isoformat() == (
        "2026-09-06T01:00:00-03:00")
    assert CronTrigger("30 0 * * *", "America/Santiago").next_fire(
        datetime(2026, 9, 5, 12, tzinfo=UTC)).isoformat() == "2026-09-06T01:30:00-03:00"


def test_next_fire_is_strictly_after() -> None:
    cron = CronTrigger("0 2 * * 1")
    monday = datetime(2026, 10, 12, 2, 0, tzinfo=UTC)
    assert cron.next_fire(monday) == monday + timedelta(days=7)
    assert cron.next_fire(monday - timedelta(microseconds=1)) == monday


@pytest.mark.parametrize(
    ("expr", "fragment"),
    [
        ("0 2 * *", "expected 5 fields"),
        ("61 2 * * 1", "61"),
        ("0 2 * * 8", "day-of-week '8'"),
        ("0 2 * * mon-sun-x", "day-of-week"),
        ("0 2 * * 5-1", "range"),
        # A slash with no step: read as "1" and "1-5" (the other fields refuse "1/").
        ("0 2 * * 1/", "invalid step ''"),
        ("0 2 * * 1-5/", "invalid step ''"),
        ("0 2 * * */", "invalid step ''"),
        # Valid field by field, but no date matches: was accepted, then `strategies`, `status`
        # and the scheduler raised "never fires" (a traceback) when asking for the next run.
        ("0 2 30 2 *", "never fires"),
        ("0 0 31 4,6,9,11 *", "never fires"),
    ],
)
def test_invalid_cron_names_the_problem(expr: str, fragment: str) -> None:
    with pytest.raises(ValueError, match="cron") as info:
        CronTrigger(expr)
    assert fragment in str(info.value)


def test_rare_but_real_dates_are_accepted() -> None:
    assert CronTrigger("0 2 29 2 *").next_fire(datetime(2026, 3, 1, tzinfo=UTC)) == datetime(
        2028, 2, 29, 2, tzinfo=UTC)
    # With a weekday too, crontab fires on either: "30 February or a Monday of February".
    assert CronTrigger("0 2 30 2 1").next_fire(datetime(2026, 10, 12, 3, tzinfo=UTC)) == datetime(
        2027, 2, 1, 2, tzinfo=UTC)


def test_unknown_timezone_is_rejected() -> None:
    with pytest.raises(ValueError, match="Mars/Olympus"):
        CronTrigger("0 2 * * 1", "Mars/Olympus")


@pytest.mark.parametrize("tz", ["Z" * 5000, "Europe/" + "x" * 300, "../etc/passwd", "UTC\x00"],
                         ids=["long", "long-part", "outside", "nul"])
def test_a_time_zone_that_cannot_be_looked_up_is_a_short_value_error(tz: str) -> None:
    # a name longer than a file name may be raised OSError ("File name too long") out of
    # ZoneInfo: a traceback for any caller but the config validation, which caught it
    with pytest.raises(ValueError, match="unknown timezone") as info:
        CronTrigger("0 2 * * 1", tz)
    assert len(str(info.value)) < 200, str(info.value)[:300]


def test_macros() -> None:
    assert CronTrigger("@weekly").next_fire(WED).isoformat() == "2026-10-11T00:00:00+00:00"
    assert CronTrigger("@daily").next_fire(WED).isoformat() == "2026-10-08T00:00:00+00:00"


# --- catch-up ---------------------------------------------------------------------------------

MONDAY_2AM = datetime(2026, 10, 12, 2, 0, tzinfo=UTC)
GRACE = timedelta(hours=6)


def test_missed_run_within_grace_runs_once() -> None:
    cron = CronTrigger("0 2 * * 1")
    last = MONDAY_2AM - timedelta(days=7)
    assert cron.missed_run(last, MONDAY_2AM + timedelta(hours=1), GRACE) == MONDAY_2AM


def test_missed_run_outside_grace_is_skipped() -> None:
    cron = CronTrigger("0 2 * * 1")
    last = MONDAY_2AM - timedelta(days=7)
    assert cron.missed_run(last, MONDAY_2AM + timedelta(hours=7), GRACE) is None


def test_many_missed_fire_times_give_one_catch_up() -> None:
    cron = CronTrigger("0 * * * *")  # hourly: five fire times missed
    last = MONDAY_2AM
    now = MONDAY_2AM + timedelta(hours=5, minutes=30)
    assert cron.missed_run(last, now, GRACE) == MONDAY_2AM + timedelta(hours=5)


def test_nothing_missed_after_a_run_at_the_fire_time() -> None:
    cron = CronTrigger("0 2 * * 1")
    assert cron.missed_run(MONDAY_2AM, MONDAY_2AM + timedelta(hours=1), GRACE) is None
    assert cron.missed_run(None, MONDAY_2AM + timedelta(hours=1), GRACE) is None
    assert cron.missed_run(MONDAY_2AM - timedelta(days=7), MONDAY_2AM + timedelta(hours=1),
                           timedelta(0)) is None


# --- data-driven triggers ---------------------------------------------------------------------

NOW = datetime(2026, 10, 12, 12, 0, tzinfo=UTC)


def test_accumulator_fires_when_the_sum_reaches_the_threshold() -> None:
    trig = AccumulatorTrigger(field="importance", threshold=150)
    assert not trig.is_due(149.5, None, NOW)
    assert trig.is_due(150, None, NOW)
    assert trig.next_due(149, None, NOW) is None


def test_count_trigger_needs_n_new_records() -> None:
    trig = CountTrigger(n=20)
    assert not trig.is_due(19, NOW - timedelta(days=1), NOW)
    assert trig.is_due(20, NOW - timedelta(days=1), NOW)


def test_census_counts_standing_records() -> None:
    trig = CensusTrigger(record_type="atomic_fact", n=3)
    assert [trig.is_due(v, None, NOW) for v in (0, 2, 3, 10)] == [False, False, True, True]


def test_on_write_fires_after_any_write() -> None:
    trig = OnWriteTrigger()
    assert not trig.is_due(0, None, NOW)
    assert trig.is_due(1, None, NOW)


def test_cooldown_defers_a_met_threshold_until_it_ends() -> None:
    trig = CountTrigger(n=1, cooldown=timedelta(hours=24))
    last = NOW - timedelta(hours=20)
    assert not trig.is_due(5, last, NOW)
    assert trig.next_due(5, last, NOW) == last + timedelta(hours=24)
    assert trig.is_due(5, last, NOW + timedelta(hours=4))
    assert OnWriteTrigger(cooldown=timedelta(minutes=5)).next_due(1, None, NOW) == NOW


def test_a_clock_set_back_past_the_last_run_does_not_hold_a_met_trigger() -> None:
    # The cooldown was measured from a last run "in the future": set back an hour, the clock
    # held every data-triggered strategy until it caught up (an hour plus the cooldown)
    trig = CountTrigger(n=1, cooldown=timedelta(minutes=30))
    last = NOW + timedelta(minutes=59)  # the run recorded just before the clock went back
    assert trig.next_due(1, last, NOW) == NOW
    assert trig.is_due(1, last, NOW)
    assert not trig.is_due(0, last, NOW)  # the bar still has to be met


@pytest.mark.parametrize("expr", ["0 2 * * \u00b2", "0 2 * * 1-\u00b2", "0 2 * * 1/\u00b2",
                                  "0 2 * * \u0663", "\u0660 2 * * *"])
def test_a_non_ascii_digit_is_a_named_cron_error(expr: str) -> None:
    # "²".isdigit() is true: int() raised its own message; "٣" was silently read as Wednesday
    with pytest.raises(ValueError, match=r"invalid cron .*only ASCII"):
        CronTrigger(expr)
