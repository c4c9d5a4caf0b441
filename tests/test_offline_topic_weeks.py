"""Offline topics count weeks by one rule: the UTC ISO week of each Episode's instant."""

from __future__ import annotations

from everos_reflect.model import Entry, Kind
from everos_reflect.strategies.insights_offline import recurring_topics


def ep(n: int, stamp: str, content: str) -> Entry:
    return Entry(id=f"ep_{stamp[:10].replace('-', '')}_{n:04d}", kind=Kind.EPISODE,
                 meta={"timestamp": stamp}, sections={"Subject": "Ops", "Content": content})


FILLER = [ep(10 + n, f"2026-09-{n + 1:02d}T12:00:00+00:00", text) for n, text in enumerate((
    "Lunch with the team.", "Planning the offsite agenda.", "Reviewed the budget sheet.",
    "Interviewed a candidate.", "Sorted the mailbox."))]


def topic(history: list[Entry]) -> object:
    found = [t for t in recurring_topics(history, limit=5) if t.term == "kubernetes"]
    return found[0] if found else None


def test_one_instant_is_one_week_whatever_offset_it_was_written_in() -> None:
    """Sunday 23:30 UTC written as Monday 01:30+02:00 counted as the next week: the same
    instant in two offsets made two weeks, and a topic of two weeks was stated as three
    (while `status`, counting UTC weeks, said the tier needs an LLM)."""
    history = [ep(1, "2026-10-04T23:30:00+00:00", "The kubernetes node restarted."),
               ep(2, "2026-10-05T01:30:00+02:00", "Again the kubernetes node restarted."),
               ep(3, "2026-10-12T10:00:00+00:00", "A kubernetes upgrade is due."), *FILLER]
    assert topic(history) is None  # weeks 40 and 42 (UTC): two, not three


def test_three_utc_weeks_make_a_topic_dated_by_utc_days() -> None:
    """Monday 01:30+02:00 is Sunday 23:30 UTC, in the week before: three UTC weeks (40, 41,
    42), where the Episodes' own offsets made two and stated nothing."""
    history = [ep(1, "2026-10-05T01:30:00+02:00", "The kubernetes node restarted."),
               ep(2, "2026-10-06T10:00:00+00:00", "Again the kubernetes node restarted."),
               ep(3, "2026-10-12T10:00:00+00:00", "A kubernetes upgrade is due."), *FILLER]
    found = topic(history)
    assert found is not None and found.weeks == 3  # type: ignore[attr-defined]
    # the first day is the UTC day of the first instant, as the weeks are counted
    assert found.first == "2026-10-04" and found.last == "2026-10-12"  # type: ignore[attr-defined]
