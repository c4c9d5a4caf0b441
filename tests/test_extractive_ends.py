"""A sentence telling that something ended, naming it, is the newer version of what it ended.

"Tariq is in the chess club." / "Tariq quit the chess club." sit close (cosine over the
paraphrase threshold) with the same numbers and negations: the merge folded them as one fact
and the quitting left live memory. "Tariq works at Initech." / "Tariq left Initech for
Hooli." sit below every threshold (the embedder does not know the names): both stayed with no
current state, the old employer read as still true.
"""

from __future__ import annotations

from datetime import date

import pytest

from everos_reflect.embedding.local import LocalEmbedder
from everos_reflect.llm import extractive
from everos_reflect.llm.extractive import ExtractiveLLM, plain_sentences
from tests.merge_fixtures import kept_both, loaded_local, narrative


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return loaded_local()


@pytest.mark.parametrize("first, second", [
    ("Tariq is in the chess club.", "Tariq quit the chess club."),
    ("Tariq works at Initech.", "Tariq left Initech for Hooli."),
    ("Tariq uses Dropbox.", "Tariq switched from Dropbox to iCloud."),
    ("Tariq rides the bus to school.", "Tariq stopped taking the bus and cycles to school now."),
    ("Tariq takes the tram to work.", "Tariq no longer takes the tram; he walks to work now."),
    ("Tariq smokes.", "Tariq gave up smoking."),
    # a reversal told as two ends: the first went to what the second ends
    ("Tariq left Initech for Hooli.", "Tariq left Hooli for Initech."),
])
def test_an_end_naming_what_ended_is_the_current_state(local: LocalEmbedder, first: str,
                                                       second: str) -> None:
    for content in kept_both(local, first, second):  # with the embedder and without
        assert content.split("\n\n")[-1] == f"Current state (2026-11-12): {second}"


@pytest.mark.parametrize("first, second", [
    ("Tariq takes the tram to work.", "Tariq left his umbrella on the tram."),
    ("Tariq plays the guitar.", "Tariq left the choir."),
    ("Tariq goes to the church on Sundays.", "Tariq turned left at the church."),
    # named in passing by a sentence about something else
    ("Sam from Fernhill Studio asked support why builds of fernhill-web time out.",
     "Sam left Fernhill Studio."),
    # two ends of two things: two events
    ("Tariq quit the chess club.", "Tariq quit the tennis club."),
    # not ended yet
    ("Sam works at Fernhill Studio.", "Sam is leaving Fernhill Studio at the end of October."),
])
def test_an_end_of_something_else_is_no_version(local: LocalEmbedder, first: str,
                                                second: str) -> None:
    content = narrative(ExtractiveLLM(local), first, second)
    assert plain_sentences(content) == [first, second]
    assert "Current state" not in content


def test_what_ended_is_read_from_the_words_after_the_end() -> None:
    def ended(text: str) -> frozenset[str] | None:
        return extractive._Sentence(text, date.min, 0).ended

    assert ended("Tariq left Initech for Hooli.") == {"initech"}
    assert ended("Tariq stopped taking the trams and cycles now.") == {"tram"}
    assert ended("Tariq no longer takes the tram.") == {"tram"}
    assert ended("Tariq turned left at the church.") == frozenset()
    assert ended("He left Lumen Analytics in mid-August.") == {"lumen", "analytic"}
    assert ended("Tariq gave up smoking.") == {"smoking"}
    assert ended("Tariq no longer commutes by car.") == {"car"}
    assert ended("Tariq is in the chess club.") is None
    assert ended("Tariq is left-handed.") is None  # a word of its own
    assert ended("Might Tariq quit the club?") is None  # a question ends nothing


@pytest.mark.parametrize("first, second", [
    ("Tariq left Initech for Hooli.", "Tariq quit Initech for Hooli."),
    ("Tariq stopped smoking.", "Tariq gave up smoking."),
])
def test_one_end_in_other_words_is_one_sentence(local: LocalEmbedder, first: str,
                                                second: str) -> None:
    # cosine 0.91-0.93, but "left" -> "quit" read as a value swapped: written as a change
    content = narrative(ExtractiveLLM(local), first, second)
    assert plain_sentences(content) == [second]


@pytest.mark.parametrize("first, second", [
    ("Nadia has a savings account at Monzo.", "Nadia closed the savings account at Monzo."),
    ("Nadia has a landline.", "Nadia got rid of the landline."),
    ("Nadia owns a Vespa.", "Nadia sold the Vespa."),
    ("Nadia is dating Pavel.", "Nadia broke up with Pavel."),
])
def test_selling_closing_or_getting_rid_of_a_thing_is_its_end(local: LocalEmbedder, first: str,
                                                              second: str) -> None:
    # "closed the savings account", "got rid of the landline": over the paraphrase threshold
    # with the same numbers and negations, folded into one sentence and the end lost
    content = narrative(ExtractiveLLM(local), first, second)
    assert plain_sentences(content) == [first, second]
    assert content.split("\n\n")[-1] == f"Current state (2026-11-12): {second}"


def test_the_end_of_something_the_earlier_sentence_does_not_name_is_no_version(
        local: LocalEmbedder) -> None:
    # folded at first (a fact lost), then, kept apart, written as the garden's current state
    first, second = ("Nadia has a balcony garden.",
                     "Nadia removed the weeds from the balcony garden.")
    content = narrative(ExtractiveLLM(local), first, second)
    assert plain_sentences(content) == [first, second]
    assert "Current state" not in content


@pytest.mark.parametrize("first, second", [
    ("Omar works at Initech.", "Left Initech for Hooli."),
    ("Omar eats meat.", "Gave up meat."),
])
def test_a_note_naming_nobody_ends_the_main_person_s_state(local: LocalEmbedder, first: str,
                                                           second: str) -> None:
    # "Left" and "Gave" were read as the note's subject, another person than Omar: both
    # sentences stayed with no current state, Initech read as still his employer
    for content in kept_both(local, first, second):
        assert content.split("\n\n")[-1] == f"Current state (2026-11-12): {second}"



@pytest.mark.parametrize("first, second", [
    ("Rafa lives in Madrid.", "Rafa left Madrid two years ago."),
    ("Nina smokes.", "Nina quit smoking years ago."),
])
def test_an_end_told_years_ago_is_still_an_end(local: LocalEmbedder, first: str,
                                               second: str) -> None:
    # "years ago" read as an earlier time of life, as in "Kai lived in Rome years ago.": the
    # end was old news and Madrid read as still his home; "quit smoking years ago" named
    # nothing that ended ("smoking" was taken for part of the time)
    content = narrative(ExtractiveLLM(local), first, second)
    assert plain_sentences(content) == [first, second]
    assert content.split("\n\n")[-1] == f"Current state (2026-11-12): {second}"


@pytest.mark.parametrize("first, second", [
    ("Nina eats meat.", "Nina gave up meat as a teenager."),
    ("Kai lives in Berlin.", "Kai left Rome years ago."),
])
def test_an_end_of_an_earlier_time_or_of_something_else_is_no_version(
        local: LocalEmbedder, first: str, second: str) -> None:
    content = narrative(ExtractiveLLM(local), first, second)
    assert plain_sentences(content) == [first, second]
    assert "Current state" not in content
