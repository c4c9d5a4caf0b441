"""A narrative cut by its parts keeps to its cap whatever a person wrote in it: any Unicode,
lines that only look like days or a current state, parts longer than the cap."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from everos_reflect.briefing.narrative import narrative_parts
from everos_reflect.briefing.pack import Item, _capped, cut_parts, item_line, line_floor
from everos_reflect.briefing.tokens import default_counter

COUNTER = default_counter()

_words = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=80) | \
    st.text(st.sampled_from(list("ab .,:-\t\n\u3000先😀é\u0301…")), max_size=40)
_line = st.one_of(
    _words,
    st.builds(lambda d, t: f"2026-0{d % 9 + 1}-1{d % 9}: {t}", st.integers(0, 99), _words),
    st.builds(lambda t: f"Current state: {t}", _words),
    st.builds(lambda t: f"9999-99-99: {t}", _words),  # looks like a day, is none
)
_narrative = st.lists(_line, min_size=2, max_size=12).map(
    lambda lines: "\n\n".join(lines[:-1]) + "\n" + lines[-1])


@settings(max_examples=300, deadline=None)
@given(content=_narrative, query=_words, cap=st.integers(1, 200))
def test_a_cut_never_passes_its_cap(content: str, query: str, cap: int) -> None:
    parts = narrative_parts(content, query)
    if not parts:
        return
    parts = ((-1, "Subject:"), *parts)
    cut = cut_parts(parts, cap, COUNTER)
    assert COUNTER.count(cut) <= cap
    item = Item("ep_20261207_0001", "episode", "Subject: " + content, "2026-09-07",
                parts=parts)
    assert line_floor(item, cap, COUNTER) <= COUNTER.count(item_line(_capped(item, cap, COUNTER)))
