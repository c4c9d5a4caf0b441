"""Meal, time-slot, to-do and question notes tell no state: never versions of one fact.

"Lunch: salad." / "Lunch: soup." (cosine over the version threshold) and "Question: ask about
the boiler." / "Question: ask about the lease." were written as a fact and its newer version:
the later note became the "Current state", as if the boiler question were settled and lunch
were soup from now on.
"""

from __future__ import annotations

from datetime import date

import pytest

from everos_reflect.embedding.local import LocalEmbedder
from everos_reflect.llm import extractive
from everos_reflect.llm.extractive import ExtractiveLLM, plain_sentences
from tests.merge_fixtures import loaded_local, narrative


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return loaded_local()


@pytest.mark.parametrize("first, second", [
    ("Lunch: salad.", "Lunch: soup."),
    ("Breakfast: porridge.", "Breakfast: eggs."),
    ("Question: ask about the boiler.", "Question: ask about the lease."),
    ("Question: which plumber to call.", "Question: which electrician to call."),
    ("Idea: bake bread.", "Idea: bake cookies."),
    # a plain sentence and a slot note: no change of the one by the other
    ("Tariq eats soup for lunch.", "Lunch: salad."),
])
def test_notes_that_tell_no_state_are_no_versions(local: LocalEmbedder, first: str,
                                                  second: str) -> None:
    content = narrative(ExtractiveLLM(local), first, second)
    assert plain_sentences(content) == [first, second]
    assert "Current state" not in content


def test_a_note_said_twice_is_still_one_note(local: LocalEmbedder) -> None:
    content = narrative(ExtractiveLLM(local), "Snack: apple.", "Snack: an apple.")
    assert len(plain_sentences(content)) == 1


def test_an_attribute_label_is_still_versioned(local: LocalEmbedder) -> None:
    content = narrative(ExtractiveLLM(local), "Job: barista.", "Job: accountant.")
    assert content.split("\n\n")[-1] == "Current state (2026-11-12): Job: accountant."


def test_a_question_label_asks() -> None:
    def asks(text: str) -> bool:
        return extractive._Sentence(text, date.min, 0).question

    assert asks("Question: ask about parking.")
    assert asks("Q: which bank.")
    assert not asks("Quest: done.")
    assert not asks("Lunch: soup.")


@pytest.mark.parametrize("first, second", [
    ("Sam asked how to hand the workspace ownership to Priya Nair.",
     "Sam transferred ownership of the Fernhill workspace to Priya Nair."),
    ("Rosa asked the landlord about a parking space.",
     "Rosa got a parking space from the landlord."),
    ("Rosa asked whether the gym has a pool.", "Rosa said the gym has a pool."),
])
def test_asking_how_is_neither_the_deed_nor_its_old_version(local: LocalEmbedder, first: str,
                                                            second: str) -> None:
    # the demo's Sam narrative folded the asking into the transfer (cosine over 0.78): the
    # question left live memory and explain credited the transfer to the Episode that asked
    content = narrative(ExtractiveLLM(local), first, second)
    assert plain_sentences(content) == [first, second]
    assert "Current state" not in content


def test_a_sentence_that_tells_first_and_asks_after_still_tells() -> None:
    def asks(text: str) -> bool:
        return extractive._Sentence(text, date.min, 0).question

    assert asks("Sam asked support how to export invoices.")
    assert asks("Mia wanted to know when the bus leaves.")
    assert not extractive._Sentence("Mia wanted to know when the bus leaves.", date.min, 0).wish
    assert not asks("Mei is moving to Hobart in January and asked what the visa needs.")
    assert not asks("Andrew asked the assistant to remember this rule.")
