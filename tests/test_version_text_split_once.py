"""A version text's sentences are not split again to count the names opening them.

``_version_text`` splits a text into sentences, then counts the names that open them
(``_leading_counts``, which splits what it is given into sentences first, as the merge
counts a member's). Split again, a sentence is nearly always itself: that second reading
was one full ``split_sentences`` per sentence for nothing (many Python calls, a few per
cent of the time, bench/results/clustering_s43.md). ``_sentences_of_sentence`` hands
such a sentence on as it is and reads the rest in full: the same sentences as
``split_sentences``, checked here on texts made of the pieces its rules read (sentence
ends, abbreviations, bullets, dated lines, line breaks of every kind, CJK stops,
spaces)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from everos_reflect.llm import extractive as x

PIECES = ["Noor", "works", "at", "Arup", "Dr.", "J.", "Mei", "Lin", "e.g.", "etc.", ".", "!",
          "?", "…", "。", "！", "？", "-", "*", "•", "1.", "2)", "3", "2026-03-02:",
          "2026-03-02 —", "Current state:", "→", "she", "He", "moved", "to", "Lyon", "now"]
GAPS = [" ", "  ", "\n", "\n\n", "\r\n", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\t",
        "\u00a0", "", ". ", "! ", "\n- ", "\n1. "]


@st.composite
def texts(draw: Any) -> str:
    parts = draw(st.lists(st.tuples(st.sampled_from(PIECES), st.sampled_from(GAPS)),
                          min_size=1, max_size=14))
    return draw(st.sampled_from(["", " ", "\n", "- "])) + "".join(p + g for p, g in parts)


@settings(max_examples=600, deadline=None)
@given(texts())
def test_a_sentence_split_again_is_split_as_split_sentences_splits_it(text: str) -> None:
    for sentence in x.split_sentences(text):
        assert x._sentences_of_sentence(sentence) == x.split_sentences(sentence)
    assert x._sentences_of_sentence(text) == x.split_sentences(text)


@pytest.mark.parametrize("text", [
    "", " ", "Noor works at Arup.", " Noor works at Arup", "- Noor works", "1. Noor",
    "Noor moved. She left", "Dr. Mei Lin works", "你好。世界", "Noor\x85works", "Noor\u2028x",
    "2026-03-02: Noor moved to Lyon"])
def test_edges(text: str) -> None:
    assert x._sentences_of_sentence(text) == x.split_sentences(text)


def test_the_sentences_of_a_version_text_are_split_once(monkeypatch) -> None:
    x._VERSION_TEXTS.clear()
    x._VERSION_TEXTS_HELD[0] = 0
    calls: list[str] = []
    real = x.split_sentences

    def counted(text: str) -> list[str]:
        calls.append(text)
        return real(text)

    monkeypatch.setattr(x, "split_sentences", counted)
    text = "Noor works at Arup. Noor lives in Leeds. Omar moved to Lyon. She likes tea."
    read = x._version_text(text)
    assert len(read.sentences) == 4
    assert read.leading == {"Noor": 2, "Omar": 1}
    assert calls == [text]  # was the text, then each of its four sentences again
