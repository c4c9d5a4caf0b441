"""Triggers: pure values that say when a strategy is due, from explicit inputs.

None of them reads the clock: the caller passes ``now``, the last run and the counters it
measured, so every rule here is tested with plain datetimes.

Cron expressions follow crontab(5), not APScheduler: day-of-week 0 and 7 are Sunday, 1 is
Monday, and when both day-of-month and day-of-week are restricted a day matching *either*
fires. APScheduler (which counts 0 = Monday and ANDs the day fields) does the calendar and
DST arithmetic underneath, after :func:`_translate` has rewritten the expression.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.combining import OrTrigger
from apscheduler.triggers.cron import CronTrigger as _APCron

from everos_reflect.model import quoted_value
from everos_reflect.settings import is_iana_zone, placeholder_zone

_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")  # crontab order: 0 = Sunday


_MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
#: The four fields APScheduler reads as written, with the values crontab(5) allows in each.
_FIELD_RANGES = (("minute", 0, 59), ("hour", 0, 23), ("day", 1, 31), ("month", 1, 12))
#: One item of a field's comma list: ``*``, ``v`` or ``v-w``, then an optional ``/step``.
_ITEM = re.compile(r"(?:(\*)|([0-9a-z]+)(?:-([0-9a-z]+))?)(?:(/)(.*))?", re.IGNORECASE)


def _field_words(name: str) -> str:
    low, high = next((lo, hi) for n, lo, hi in _FIELD_RANGES if n == name)
    names = " or jan-dec" if name == "month" else ""
    return (f"it takes {low}-{high}{names}, ranges such as {low}-{low + 4}, lists a,b, * and "
            "steps such as */5")


def _check_field(name: str, text: str, expr: str) -> None:
    """Refuse a minute, hour, day or month field crontab would not take, naming the field,
    what it holds and what it takes. APScheduler's own words ("Error validating expression
    '61': the last value (61) is higher than the maximum value (59)", "Increment must be
    higher than 0") named neither the field nor what is allowed."""
    low, high = next((lo, hi) for n, lo, hi in _FIELD_RANGES if n == name)
    takes = _field_words(name)

    def where(shown: str) -> str:  # the whole field, unless it is all the message quotes
        whole = "" if shown == text else f" {quoted_value(text)}"
        return f"invalid cron {quoted_value(expr)}: the {name} field{whole}"

    for item in text.split(","):
        if name == "day" and item.lower() == "last":  # APScheduler's "last day of the month"
            continue
        m = _ITEM.fullmatch(item)
        if m is None:
            raise ValueError(f"{where(item)} holds {quoted_value(item)}, which is not a value, "
                             f"a range or a step ({takes})")
        _star, first, last, slash, step = m.groups()
        if slash and not (step.isdigit() and int(step) > 0):
            raise ValueError(f"{where(item)} holds {quoted_value(item)}, a step of "
                             f"{quoted_value(step)}: a step is a whole number of 1 or more "
                             "(*/5: every 5th)")
        values: list[int] = []
        for token in (first, last):
            if token is None:
                continue
            if token.isdigit():
                value = int(token)
            elif name == "month" and token.lower() in _MONTH_NAMES:
                value = _MONTH_NAMES.index(token.lower()) + 1
            else:
                raise ValueError(f"{where(token)} holds {quoted_value(token)}, which is not a "
                                 f"{name} ({takes})")
            if not low <= value <= high:
                raise ValueError(f"{where(token)} holds {token}, out of range ({takes})")
            values.append(value)
        if len(values) == 2 and values[0] > values[1]:
            raise ValueError(f"{where(item)} holds the range {quoted_value(item)}, which runs "
                             f"backwards: write the lower end first ({takes})")


def _dow_value(token: str, expr: str) -> int:
    low = token.lower()
    if low[:3] in _DAY_NAMES and len(low) == 3:
        return _DAY_NAMES.index(low)
    if token.isdigit() and 0 <= int(token) <= 7:
        return int(token)
    raise ValueError(f"invalid day-of-week {quoted_value(token)} in cron {quoted_value(expr)} (use "
                     "0-7 or sun-sat)")


def _expand_dow(text: str, expr: str) -> set[int]:
    """Crontab day-of-week field → set of days, 0 = Sunday (7 folded onto 0)."""
    days: set[int] = set()
    for part in text.split(","):
        rng, slash, step_text = part.partition("/")
        # "1/" (a slash with no step) was read as "1", where the other fields refuse it
        if slash and not (step_text.isdigit() and int(step_text) > 0):
            raise ValueError(f"invalid step {quoted_value(step_text)} in the day-of-week field "
                             f"{quoted_value(text)} of cron {quoted_value(expr)}: a step is a "
                             "whole number of 1 or more (*/2: every 2nd day)")
        step = int(step_text) if step_text else 1
        if rng == "*":
            lo, hi = 0, 6
        elif "-" in rng:
            a, b = rng.split("-", 1)
            lo, hi = _dow_value(a, expr), _dow_value(b, expr)
            if lo > hi:
                raise ValueError(f"invalid day-of-week range {quoted_value(rng)} in cron "
                                 f"{quoted_value(expr)}")
        else:
            lo = _dow_value(rng, expr)
            hi = 7 if step_text else lo  # "1/2" means from 1 to the end, every 2nd
        days.update(d % 7 for d in range(lo, hi + 1, step))
    return days


#: The longest cron expression taken. Every field written as a full list ("0,1,2,…,59 …") is
#: under 400 characters; a 200,000-character one (blanks after "0 2 * * 1") was accepted and
#: written whole into every ``status --json`` and status API answer.
MAX_CRON_CHARS = 1_024


def _translate(expr: str) -> tuple[dict[str, str], bool]:
    """Crontab → APScheduler field kwargs, and whether day-of-month/-week combine with OR."""
    if len(expr) > MAX_CRON_CHARS:
        raise ValueError(f"invalid cron {quoted_value(expr)}: a cron expression is at most "
                         f"{MAX_CRON_CHARS:,} characters")
    text = _MACROS.get(expr.strip().lower(), expr.strip())
    if not text.isascii():
        # str.isdigit() is true for "²" and "٣": one crashed int(), the other was read as 3
        raise ValueError(f"invalid cron {quoted_value(expr)}: only ASCII digits, day and month "
                         "names and * , - / are allowed")
    fields = text.split()
    if text.startswith("@"):
        # "@reboot" (cron(8)'s start-up job) and "@every 5m" (Go's cron) were "expected 5
        # fields, got 1", as if a field were missing
        raise ValueError(f"invalid cron {quoted_value(expr)}: no such shorthand here (use "
                         f"{', '.join(_MACROS)}, or 5 fields: minute hour day month "
                         "day-of-week)")
    if len(fields) != 5:
        extra = (" (no seconds or year field: 5 fields only)" if len(fields) in (6, 7)
                 else "")
        raise ValueError(
            f"invalid cron {quoted_value(expr)}: expected 5 fields (minute hour day month "
            "day-of-week), "
            f"got {len(fields)}{extra}"
        )
    minute, hour, day, month, dow = fields
    for (name, _low, _high), value in zip(_FIELD_RANGES, fields, strict=False):
        _check_field(name, value, expr)
    days = _expand_dow(dow, expr)
    ap_dow = "*" if days == set(range(7)) else ",".join(_DAY_NAMES[d] for d in sorted(days))
    either = not day.startswith("*") and not dow.startswith("*")
    return {"minute": minute, "hour": hour, "day": day, "month": month,
            "day_of_week": ap_dow}, either


def time_zone(tz: str) -> ZoneInfo:
    """The time zone named ``tz``, or ``ValueError`` naming it (quoted short). ``ZoneInfo``
    raises ``OSError`` ("File name too long") for a name longer than a file name may be:
    config validation caught it, but a trigger or scheduler given the name another way
    (a library caller, fleet) let it escape as a traceback."""
    try:
        zone = ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ValueError(f"unknown timezone {quoted_value(tz)} (use an IANA name such as "
                         "'UTC' or 'Europe/Paris')") from exc
    if (placeholder := placeholder_zone(tz)) is not None:  # `Factory`: no place's zone
        raise ValueError(placeholder)
    if not is_iana_zone(tz):  # `localtime`: whatever zone the host is set to
        raise ValueError(f"{quoted_value(tz)} is not an IANA timezone name (use one such as "
                         "'UTC' or 'Europe/Paris')")
    return zone


#: The longest a DST change moves the clock (Antarctica/Troll: 2 h); a bound on how far a fire
#: time can move when its wall-clock time is skipped or repeated.
_LOOKAROUND = timedelta(hours=3)
#: Fire times examined for one ``next_fire`` before giving up (a cron that fires at all needs
#: a few; every minute over a DST change needs a few hundred).
_MAX_STEPS = 10_000


@dataclass(frozen=True)
class CronTrigger:
    """A crontab schedule in a timezone. Raises ``ValueError`` naming the problem if invalid.

    The fields are matched against wall-clock time with calendar arithmetic alone (APScheduler
    on a clock without DST); each matching wall-clock time is then placed in the zone by
    :func:`_instant`. So a time the clock skips still runs, just after the jump, and a time it
    repeats runs once, whether the change happens at 02:00 or at midnight — unless the hour
    field is ``*`` (``0 * * * *``, ``@hourly``, ``*/2``): such a schedule follows the clock
    hour by hour, as cron(8) runs wildcard jobs, so a repeated hour runs at both of its
    occurrences (an hourly job ran at 01:00 and then 02:00, two hours later, the night the
    clocks went back).
    """

    expr: str
    tz: str = "UTC"
    _ap: BaseTrigger = field(init=False, repr=False, compare=False)
    _every_hour: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        kwargs, either = _translate(self.expr)
        object.__setattr__(self, "_every_hour", kwargs["hour"].startswith("*"))
        time_zone(self.tz)
        try:
            if either:
                ap: BaseTrigger = OrTrigger([
                    _APCron(**{**kwargs, "day_of_week": "*"}, timezone=UTC),
                    _APCron(**{**kwargs, "day": "*"}, timezone=UTC),
                ])
            else:
                ap = _APCron(**kwargs, timezone=UTC)
        except ValueError as exc:
            raise ValueError(f"invalid cron {quoted_value(self.expr)}: {exc}") from None
        # A date that never occurs ("0 2 30 2 *") is valid field by field; refuse it here, with
        # the config, rather than when the scheduler, `status` or `strategies` asks for its next
        # fire. Any cron that fires at all fires within the 28-year calendar cycle after this
        # fixed reference (a constant, so construction still never reads the clock).
        if ap.get_next_fire_time(None, datetime(2000, 1, 1, tzinfo=UTC)) is None:
            raise ValueError(
                f"invalid cron {quoted_value(self.expr)}: it never fires (no calendar date "
                "matches its day and month fields)"
            )
        object.__setattr__(self, "_ap", ap)

    def to_apscheduler(self) -> BaseTrigger:
        """An APScheduler trigger that fires exactly when :meth:`next_fire` says."""
        return _APSchedulerAdapter(self)

    def _walls(self, start: datetime) -> Iterator[datetime]:
        """The matching wall-clock times (naive) from ``start`` on, in order."""
        probe = start.replace(tzinfo=UTC)
        while (nxt := self._ap.get_next_fire_time(None, probe)) is not None:
            yield nxt.replace(tzinfo=None)
            probe = nxt + timedelta(seconds=1)

    def next_fire(self, after: datetime) -> datetime:
        """The first fire time strictly after ``after`` (aware), in the trigger's timezone."""
        zone = time_zone(self.tz)
        after = _aware(after).astimezone(UTC)
        local = after.astimezone(zone)
        # A wall-clock time the clock skipped in the last hours runs just after the jump, so
        # it may still be ahead of ``after``: start that far back.
        back = max(_offset(after, zone) - _offset(after - _LOOKAROUND, zone), timedelta(0))
        if self._every_hour:
            # The second occurrence of a wall-clock time the clock is about to repeat is still
            # ahead even when the first is behind: start that far back too.
            back = max(back, _offset(after, zone) - _offset(after + _LOOKAROUND, zone))
        best: datetime | None = None
        until: datetime | None = None
        for step, wall in enumerate(self._walls(local.replace(tzinfo=None) - back)):
            if (until is not None and wall > until) or step >= _MAX_STEPS:
                break
            for t in _instants(wall, zone, repeated=self._every_hour):
                if t > after and (best is None or t < best):
                    best = t
                    # Wall-clock order is time order unless the clock moved in the hours
                    # before ``best``: then a later wall-clock time may still come first.
                    moved = _offset(best, zone) != _offset(best - _LOOKAROUND, zone)
                    until = best.astimezone(zone).replace(tzinfo=None) + (
                        _LOOKAROUND if moved else timedelta(0))
        if best is None:
            raise ValueError(f"cron {quoted_value(self.expr)} never fires after "
                             f"{after.isoformat()}")
        return best.astimezone(zone)

    def missed_run(
        self, last_run: datetime | None, now: datetime, grace: timedelta
    ) -> datetime | None:
        """The one scheduled time to catch up at start-up, or ``None``.

        That is the latest fire time after ``last_run`` (the last run, or when the schedule
        was armed) and at most ``grace`` before ``now``. Several missed fire times still give
        one run: catch-up never piles up. With no reference point nothing was missed.
        """
        if last_run is None or grace <= timedelta(0):
            return None
        now = _aware(now)
        start = max(_aware(last_run), now - grace)
        missed = None
        t = self.next_fire(start)
        while t <= now:
            missed = t
            t = self.next_fire(t)
        return missed


class _APSchedulerAdapter(BaseTrigger):
    """Lets APScheduler schedule a :class:`CronTrigger`, so both agree on every fire time."""

    def __init__(self, cron: CronTrigger) -> None:
        self.cron = cron

    def get_next_fire_time(
        self, previous_fire_time: datetime | None, now: datetime
    ) -> datetime | None:
        after = previous_fire_time or now - timedelta(microseconds=1)
        return self.cron.next_fire(after)

    def __str__(self) -> str:
        return f"cron[{self.cron.expr!r}, {self.cron.tz}]"


def _aware(ts: datetime) -> datetime:
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)


def _offset(ts: datetime, zone: ZoneInfo) -> timedelta:
    return ts.astimezone(zone).utcoffset() or timedelta(0)


def _instant(wall: datetime, zone: ZoneInfo) -> datetime:
    """When a matching wall-clock time fires (UTC), as crontab does it: a time the clock
    repeats (falling back) at its first occurrence only; a time it skips (springing forward)
    as far past the jump as it was past the jump's start (02:30 → 03:30, 00:00 → 01:00)."""
    return wall.replace(tzinfo=zone, fold=0).astimezone(UTC)


def _instants(wall: datetime, zone: ZoneInfo, *, repeated: bool) -> tuple[datetime, ...]:
    """:func:`_instant`, and with ``repeated`` also the second occurrence of a wall-clock time
    the clock repeats (falling back), for schedules that run every hour."""
    first = _instant(wall, zone)
    if not repeated:
        return (first,)
    second = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    return (first, second) if second > first else (first,)


@dataclass(frozen=True)
class DataTrigger:
    """Base of the data-driven triggers: due when the measured value passes the bar and the
    cooldown since the last run has elapsed. The strategy measures the value (its ``observe``);
    the trigger only judges it."""

    cooldown: timedelta = timedelta(0)

    def threshold_met(self, value: float) -> bool:
        raise NotImplementedError

    def next_due(self, value: float, last_run: datetime | None, now: datetime) -> datetime | None:
        """When a run is due given ``value``: ``None`` while the bar is not met, else ``now`` or
        the end of the cooldown, whichever is later.

        A last run after ``now`` means the wall clock went back past it (an NTP step, a VM
        resumed): the cooldown cannot be measured, and waiting for the clock to catch up held
        a met trigger for as long as the clock had jumped, so the run is due ``now``."""
        if not self.threshold_met(value):
            return None
        if last_run is None or _aware(last_run) > _aware(now):
            return now
        return max(_aware(now), _aware(last_run) + self.cooldown)

    def is_due(self, value: float, last_run: datetime | None, now: datetime) -> bool:
        due = self.next_due(value, last_run, now)
        return due is not None and due <= _aware(now)


@dataclass(frozen=True)
class AccumulatorTrigger(DataTrigger):
    """Due when the sum of ``field`` over records new since the last run reaches ``threshold``
    (e.g. the summed ``importance`` of new episodes ≥ 150)."""

    field: str = "importance"
    threshold: float = 1.0

    def threshold_met(self, value: float) -> bool:
        return value >= self.threshold


@dataclass(frozen=True)
class CountTrigger(DataTrigger):
    """Due when at least ``n`` records are new since the last run."""

    n: int = 1

    def threshold_met(self, value: float) -> bool:
        return value >= self.n


@dataclass(frozen=True)
class CensusTrigger(DataTrigger):
    """Due when at least ``n`` records of ``record_type`` stand (exist now, new or not)."""

    record_type: str = "episode"
    n: int = 1

    def threshold_met(self, value: float) -> bool:
        return value >= self.n


@dataclass(frozen=True)
class OnWriteTrigger(DataTrigger):
    """Due after any write since the last run (the value is the number of writes)."""

    def threshold_met(self, value: float) -> bool:
        return value > 0
