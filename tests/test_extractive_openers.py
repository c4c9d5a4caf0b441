"""A sentence that opens with its time or place is read as the same sentence with that phrase
at its end.

"On Monday Omar took a flight to Oslo." was no past event ("On" was taken for its verb), so it
was no restatement of "Omar flew to Oslo on Monday." (a one-off event): both stayed. "Last
night Noor skipped yoga." was no one-off event either ("Last night" is an occasion only in lower
case), and was folded into "Noor does yoga every evening.": that she does yoga was lost.
"""

from __future__ import annotations

import pytest

from everos_reflect.embedding.local import LocalEmbedder
from everos_reflect.llm.extractive import ExtractiveLLM, plain_sentences
from tests.merge_fixtures import kept_both, loaded_local, narrative, read_sentence


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return loaded_local()


def reading(text: str) -> tuple[bool, bool]:
    s = read_sentence(text)
    return s.past, s.passing


@pytest.mark.parametrize("opening, closing", [
    ("On Monday Omar took a flight to Oslo.", "Omar took a flight to Oslo on Monday."),
    ("In 2019 she lived in Rome.", "She lived in Rome in 2019."),
    ("Last week Rafa painted the fence.", "Rafa painted the fence last week."),
    ("Yesterday Rafa skipped his swim.", "Rafa skipped his swim yesterday."),
    ("On Friday, Rafa quit the chess club.", "Rafa quit the chess club on Friday."),
    ("At eight Lucia left home.", "Lucia left home at eight."),
    ("In the morning Omar swims.", "Omar swims in the morning."),
    ("In Madrid Rafa works at a bank.", "Rafa works at a bank in Madrid."),
])
def test_a_time_or_place_said_first_reads_as_said_last(opening: str, closing: str) -> None:
    assert reading(opening) == reading(closing)


def test_an_opening_time_makes_a_past_event() -> None:
    assert reading("On Monday Omar took a flight to Oslo.") == (True, True)
    assert reading("In 2019 she lived in Rome.") == (True, False)
    assert reading("In the morning Omar swims.") == (False, False)


def test_an_event_told_time_first_restates_it_told_time_last(local: LocalEmbedder) -> None:
    content = narrative(ExtractiveLLM(local), "Omar flew to Oslo on Monday.",
                        "On Monday Omar took a flight to Oslo.")
    assert len(plain_sentences(content)) == 1


@pytest.mark.parametrize("first, second", [
    ("Noor does yoga every evening.", "Last night Noor skipped yoga."),
    ("Rafa cycles to the office.", "On Tuesday Rafa took a taxi to the office."),
])
def test_a_one_off_event_told_time_first_is_no_version_nor_restatement(
        local: LocalEmbedder, first: str, second: str) -> None:
    for content in kept_both(local, first, second):
        assert "Current state" not in content
