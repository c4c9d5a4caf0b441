"""The word gate in front of the change patterns (``extractive._may_tell_change``) must let
through every text a pattern matches: a text it stops is never read as telling a change, and
the clustering would place such an Episode as if it told none."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from everos_reflect.llm.extractive import (
    _CHANGE_MARKS,
    _WORD_OF_TEXT_RE,
    _WORDS_OF_ASCII,
    _may_tell_change,
    tells_change,
)

ASCII = st.characters(codec="ascii")


@pytest.mark.parametrize("pattern", _CHANGE_MARKS, ids=lambda p: p.pattern[:30])
def test_every_text_a_change_pattern_matches_passes_the_word_gate(pattern: re.Pattern[str]
                                                                  ) -> None:
    @settings(max_examples=300, deadline=None, database=None)
    @given(st.from_regex(pattern, alphabet=ASCII))
    def check(text: str) -> None:
        assert pattern.search(text)
        assert _may_tell_change(text), text

    check()


@pytest.mark.parametrize("text", [
    "Bea was let go.", "Bea QUIT her job.", "Bea got rid of the car.", "Bea was LET GO.",
    "These days Bea cycles.", "Bea started working at Arup.", "Bea no longer drives.",
])
def test_the_gate_passes_what_a_person_writes_in_any_case(text: str) -> None:
    assert any(p.search(text) for p in _CHANGE_MARKS)
    assert _may_tell_change(text) and tells_change(text)


def test_the_gate_stops_a_text_that_holds_no_change_word() -> None:
    # "started" alone, "let" alone and "days" alone are everyday words: only their pairs count
    for text in ("Bea started a blog.", "Let me know.", "Two days ago Bea ran 5 km.",
                 "Bea knows the snow."):
        assert not _may_tell_change(text), text
        assert not any(p.search(text) for p in _CHANGE_MARKS), text


def test_a_text_that_is_not_ascii_goes_to_the_patterns() -> None:
    # case-blind matching knows U+017F (long s) as an "s": "ſold" is "sold" to the pattern
    text = "Bea ſold her car."
    assert any(p.search(text) for p in _CHANGE_MARKS)
    assert _may_tell_change(text)


@settings(max_examples=500, deadline=None, database=None)
@given(st.text(alphabet=ASCII, max_size=200))
def test_the_gate_reads_the_words_the_word_pattern_finds(text: str) -> None:
    # the gate splits a translated text (session 38: half the cost of the pattern's findall;
    # session 41: as bytes); the words must be the pattern's, in order, whatever ASCII a
    # text holds
    assert text.encode("ascii").translate(_WORDS_OF_ASCII).split() == [
        w.encode("ascii") for w in _WORD_OF_TEXT_RE.findall(text.lower())]
