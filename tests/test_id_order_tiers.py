"""The tiers order ids as they were allocated: `…_9999` before `…_10000` (not as text)."""

from __future__ import annotations

from datetime import UTC, datetime

from everos_reflect.model import id_order
from everos_reflect.procedural.lessons import Lesson, ranked
from everos_reflect.strategies import beliefs

LATE = "in_20261012_10000"
EARLY = "in_20261012_9999"


def test_a_window_is_oldest_first_past_four_digit_sequences() -> None:
    """Sorted as text, `…_10000` came before `…_9999`: a run cut to max_records took a newer
    record ahead of an older one, where the docs promise the oldest first."""
    candidates = {LATE: "h1", EARLY: "h2", "in_20261011_0001": "h3", "in_20261012_0002": "h4"}
    assert beliefs.window(candidates, []) == [
        "in_20261011_0001", "in_20261012_0002", EARLY, LATE]


def test_of_two_versions_of_a_key_at_one_instant_the_later_id_is_current() -> None:
    """Two live versions of a key written in the same second (a hand-added one, or a crash
    between a version and its predecessor's archive key): the one written later is the
    current one. As text, `…_9999` won, and the newer `…_10000` was archived into it."""
    at = datetime(2026, 10, 12, 9, 0, tzinfo=UTC)
    older = beliefs.Conviction("wv_20261012_9999", "strategy", "Ship weekly.", timestamp=at)
    newer = beliefs.Conviction("wv_20261012_10000", "strategy", "Ship daily.", timestamp=at)
    view = beliefs.current_worldview([newer, older])
    assert view.current["strategy"].id == newer.id
    assert view.repairs == {older.id: newer.id}


def test_lessons_of_equal_standing_rank_in_id_order() -> None:
    at = datetime(2026, 10, 12, 9, 0, tzinfo=UTC)
    a = Lesson("ls_20261012_10000", "deploy", "do", "B", timestamp=at)
    b = Lesson("ls_20261012_9999", "deploy", "do", "A", timestamp=at)
    assert [x.id for x in ranked([a, b], "deploy")] == [b.id, a.id]


def test_id_order_puts_what_is_no_id_last() -> None:
    ids = ["zz", LATE, "ep_20261012_0002", EARLY]
    assert sorted(ids, key=id_order) == ["ep_20261012_0002", EARLY, LATE, "zz"]
