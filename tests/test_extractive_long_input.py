"""Hand-written input the offline merge reads in time linear in its length, whatever it
holds (an entry may hold 256 KiB): a labelled note ("Job: barista.") was read by a pattern
that tried its lazy end against the trailing spaces at every position (14 s at 40,000
spaces, minutes at 256 KiB, inside a Reflection run), and two long "sentences" had their
words' order compared word by word (4 s at 20 KB each)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from everos_reflect.llm import extractive
from tests.merge_fixtures import read_sentence

#: the pattern the notes were read with before (session 29 to 36), kept to compare answers
OLD = re.compile(r"^\s*([^\W\d_][\w'’-]*(?:\s+[\w'’-]+){0,2})\s*:\s+(\S.*?)[.!]?\s*$")

PIECES = st.sampled_from(["Job", "job", "Dr Shah", "to ask", "3", ":", ": ", " ", "  ", "\n",
                          "\t", ".", "!", "..", "barista", "Tesla Model 3", "x", "é", "’s",
                          "-", "?", "\u2003", "\x1c"])


@settings(max_examples=400, deadline=None)
@given(st.lists(PIECES, max_size=9).map("".join))
def test_a_note_is_read_as_the_old_pattern_read_it(text: str) -> None:
    old = OLD.match(text)
    assert extractive._labelled(text) == ((old.group(1), old.group(2)) if old else None)


def test_a_long_run_of_spaces_in_a_note_is_read_and_ends_its_value() -> None:
    text = "Job: barista" + " " * 40_000 + "at Lune now."
    assert extractive._labelled(text) == ("Job", "barista" + " " * 40_000 + "at Lune now")
    assert extractive._label("Lunch:" + " " * 40_000 + "soup.") == "lunch"
    assert extractive._labelled("Job: barista\nat Lune.") is None


def words(n: int, last: str) -> str:
    return "Bea " + " ".join(f"w{i}x" for i in range(n - 2)) + f" {last}."


def test_the_order_of_long_sentences_is_not_compared() -> None:
    # within ORDER_WORDS content words (shared ones, for the order) one word replaced in
    # place is read so; past it, the two are read as no rewording and no value in place
    # (both sentences stay)
    n = extractive.ORDER_WORDS
    short = [read_sentence(words(n, v)) for v in ("red", "blue")]
    long = [read_sentence(words(n + 2, v)) for v in ("red", "blue")]
    assert extractive._in_place(*short) and extractive._same_order(*short)
    assert not extractive._in_place(*long) and not extractive._same_order(*long)
