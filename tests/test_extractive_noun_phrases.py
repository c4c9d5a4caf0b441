"""A sentence whose subject is a noun phrase ("The old car", "Her flat in Leeds") is read for
its verb, as one opening with a name is.

"The old car was sold in May." was no past event ("The" was taken for its verb) and its end
named nothing ("in May" follows "sold"): after "Bea has an old car." it was the current state
only by the words the two share. "Her flat in Leeds was let go." ended nothing; "The garden
was flooded last week." was no one-off event, so "Bea has a garden." could be read as replaced
by it.
"""

from __future__ import annotations

import pytest

from everos_reflect.embedding.local import LocalEmbedder
from everos_reflect.llm import extractive
from everos_reflect.llm.extractive import ExtractiveLLM, plain_sentences
from tests.merge_fixtures import kept_both, loaded_local, narrative, read_sentence


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return loaded_local()


def reading(text: str) -> tuple[bool, bool, frozenset[str] | None]:
    s = read_sentence(text)
    return s.past, s.passing, s.ended


@pytest.mark.parametrize("text, past, passing, ended", [
    ("The old car was sold in May.", True, False, {"old", "car"}),
    ("In May the old car was sold.", True, False, {"old", "car"}),
    ("Her flat in Leeds was let go.", True, False, {"flat", "leed"}),
    ("Tess's van was sold.", True, False, {"van"}),
    ("The season ticket was cancelled.", True, False, {"season", "ticket"}),
    ("The garden was flooded last week.", True, True, None),
    ("The old car broke down.", True, False, None),
    # no event in the past: a state told of the thing
    ("The old car was red.", False, False, None),
    ("The old car needs new tyres.", False, False, None),
])
def test_a_noun_phrase_subject_is_read_for_its_verb(text: str, past: bool, passing: bool,
                                                    ended: set[str] | None) -> None:
    assert reading(text) == (past, passing,
                             frozenset(ended) if ended is not None else None)


@pytest.mark.parametrize("first, second", [
    ("Ugo has an old bike.", "The old bike was sold last month."),
    ("Ugo rents a flat in Leeds.", "His flat in Leeds was given up."),
    ("Ugo has a season ticket.", "The season ticket was cancelled."),
    ("Tess has a van.", "Tess's van was sold."),
    ("Ugo drives an old car.", "The old car was sold."),
    ("Ugo owns a boat in Bilbao.", "The boat was sold."),
    ("Ugo has an old bike.", "The old bike was stolen."),
])
def test_the_end_of_a_thing_told_in_the_passive_is_the_current_state(
        local: LocalEmbedder, first: str, second: str) -> None:
    for content in kept_both(local, first, second):
        assert content.split("\n\n")[-1] == f"Current state (2026-11-12): {second}"


@pytest.mark.parametrize("first, second", [
    # a one-off event of the thing
    ("Ugo has a garden.", "The garden was flooded last week."),
    ("Ugo drives an old car.", "The old car was washed on Sunday."),
    # the tram he takes is no one thing of his: its cancellation ends nothing
    ("Zoe takes the tram.", "Zoe's tram was cancelled."),
    ("Zoe takes the tram.", "The tram was cancelled."),
    # a tram she takes, even "a tram", is no thing she holds: its cancellation is news of
    # the tram, not the end of her commute (it was written as her current state)
    ("Zoe takes a tram.", "The tram was cancelled."),
    ("Zoe catches a train to Leeds.", "The train was cancelled."),
    ("Zoe takes a ferry to work.", "The ferry was cancelled."),
])
def test_news_of_a_thing_that_ends_nothing_of_theirs_is_no_version(
        local: LocalEmbedder, first: str, second: str) -> None:
    for content in kept_both(local, first, second):
        assert "Current state" not in content


@pytest.mark.parametrize("first, second", [
    # the thing held is told by its name, the end by its kind: the car was read as never
    # having been hers ("stolen" ended nothing, and "car" is no word of "drives a Golf")
    ("Bea drives a Golf.", "Bea's car was stolen."),
    ("Bea has a Labrador.", "Her dog was stolen last week."),
    ("Bea owns an iPhone.", "Bea's phone was stolen."),
    # told in the active, of her own thing: the Golf read as still driven
    ("Bea drives a Golf.", "Bea sold her car."),
    ("Bea has a Labrador.", "Bea gave away her dog."),
    ("Bea drives a Tesla.", "Bea got rid of the car last week."),
])
def test_the_end_of_a_thing_held_by_its_name_is_the_current_state(
        local: LocalEmbedder, first: str, second: str) -> None:
    with_vectors, words_only = kept_both(local, first, second)
    assert with_vectors.split("\n\n")[-1] == f"Current state (2026-11-12): {second}"
    assert "Current state" not in words_only  # the kind is the embedder's to tell


@pytest.mark.parametrize("first, second", [
    # another kind of thing than the one held: no car is a bike, a phone is no Golf
    ("Bea drives a Golf.", "Bea's bike was stolen."),
    ("Bea drives a Polo.", "Her phone was stolen."),
    # nothing held, or somebody else's
    ("Bea works at Arup.", "Bea's bag was stolen."),
    ("Bea drives a Golf.", "Tom's car was stolen."),
    ("Bea drives a Golf.", "Bea sold her bike."),
    ("Bea drives a Golf.", "Bea sold Tom's car."),
    # a thing held told by its kind, not its name: another kind than the one that ended
    ("Bea has a cat.", "Her dog was stolen."),
    ("Bea rides a bike.", "Her scooter was stolen."),
])
def test_the_end_of_another_thing_ends_nothing_held_by_its_name(
        local: LocalEmbedder, first: str, second: str) -> None:
    for content in kept_both(local, first, second):
        assert "Current state" not in content


def test_ones_own_thing_after_an_end_is_read_for_its_head() -> None:
    assert extractive._own_thing(read_sentence("Bea got rid of the old car last week.")) == "car"
    assert extractive._own_thing(read_sentence("Bea sold her bikes in May.")) == "bike"
    assert extractive._own_thing(read_sentence("Bea sold a car.")) is None
    assert extractive._own_thing(read_sentence("Bea's car was stolen.")) is None  # passive


def test_a_passive_end_told_time_first_restates_it(local: LocalEmbedder) -> None:
    content = narrative(ExtractiveLLM(local), "The old car was sold in May.",
                        "In May the old car was sold.")
    assert len(plain_sentences(content)) == 1
