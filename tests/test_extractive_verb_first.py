"""A note that opens with its verb in the past has no subject: the verb is the deed.

"Visited Rome in May." had "Visited" read as somebody's name: the note was no past event, and
about another person than the cluster's ("Bea lives in Rome." / "Visited Rome in May." were
two people's). "In June moved to York." had "In June moved" read as its opening phrase of time,
so the note was no event either, and no newer version of "Moved to Leeds.".
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


def past(text: str) -> bool:
    return extractive._Sentence(text, date.min, 0).past


@pytest.mark.parametrize("text", [
    "Visited Rome in May.", "Hiked Ben Nevis.", "Called Ahmed.", "Visited Atkins for an interview.",
    # a plural object after the verb: "flights" had been read as the verb of a person
    # named "Booked"
    "Booked flights to Rome.", "Packed boxes for the move.", "Ordered books online.",
    "Planned trips to Oslo.", "Tried lessons at the pool.",
])
def test_an_opening_past_verb_is_the_deed_and_nobody(text: str) -> None:
    assert extractive._leading_name(text) is None
    assert past(text)


@pytest.mark.parametrize("text, name", [
    ("Ahmed Khan visited Rome.", "Ahmed"),
    ("Ahmed lives in Leeds.", "Ahmed"),
    ("Ahmed was late.", "Ahmed"),
    ("Ahmed's car broke down.", "Ahmed"),
    ("Ahmed and Ana visited Rome.", "Ahmed"),
    ("Mohammed, my brother, visited Rome.", "Mohammed"),
    # names in "-ed" are no verb's past: no word of English spelled so, or "Jared" would be
    # "jarred"
    ("Fred lives in Leeds.", "Fred"),
    ("Alfred runs a bakery.", "Alfred"),
    ("Jared plays chess.", "Jared"),
    ("Hamed works at Arup.", "Hamed"),
    ("Mildred rents a flat.", "Mildred"),
])
def test_a_name_in_ed_before_its_verb_is_still_a_name(text: str, name: str) -> None:
    assert extractive._leading_name(text) == name


@pytest.mark.parametrize("text", ["United plays Chelsea.", "United beats Arsenal at home.",
                                  "Allied supplies Acme."])
def test_a_name_in_ed_before_a_verb_in_s_and_its_object_is_a_name(text: str) -> None:
    # "United", a past by spelling, had been read as the verb of a note naming nobody
    assert extractive._leading_name(text) == text.split()[0]
    assert not past(text)


def test_a_plural_object_before_a_time_keeps_the_note() -> None:
    assert extractive._leading_name("Booked flights Monday.") is None


def test_a_team_in_ed_is_not_the_main_persons_sentence(local: LocalEmbedder) -> None:
    # read as a note naming nobody, the team's fixture was Bea's, and the later version of
    # her playing for the team (half their words)
    for content in kept_both(local, "Bea plays for United.", "United plays Chelsea."):
        assert "Current state" not in content
    folded = narrative(ExtractiveLLM(local), "United plays Chelsea on Saturday.",
                       "On Saturday United plays Chelsea.")
    assert len(plain_sentences(folded)) == 1


def test_verb_first_notes_name_no_main_person() -> None:
    # "Visited" opened more sentences than Bea did and was taken for the cluster's person,
    # whom "She ..." would have been rewritten as
    assert extractive._main_entity(
        ["Visited Rome in May.", "Visited Oslo in June.", "Bea lives in Leeds."]) == "Bea"


@pytest.mark.parametrize("text", [
    "In June moved to York.", "Last week visited Rome.", "On Friday quit the chess club.",
])
def test_a_time_opener_before_a_verb_without_a_subject_is_an_event(text: str) -> None:
    assert past(text)


def test_a_time_opener_keeps_the_subject_it_is_followed_by() -> None:
    assert extractive._clause("In June moved to York.") == "moved to York."
    assert extractive._clause("In June Noor moved to York.") == "moved to York."
    assert extractive._clause("In the morning Omar swims.") == "swims."


@pytest.mark.parametrize("first, second", [
    ("Moved to Leeds.", "In June moved to York."),
    ("Moved to Leeds.", "Moved to York in June."),
])
def test_a_move_told_time_first_is_the_newer_version_of_a_move(local: LocalEmbedder,
                                                              first: str, second: str) -> None:
    content = narrative(ExtractiveLLM(local), first, second)
    assert plain_sentences(content) == [first, second]
    assert content.split("\n\n")[-1] == f"Current state (2026-11-12): {second}"


@pytest.mark.parametrize("first, second", [
    ("Visited Rome in May.", "In May visited Rome."),
    ("In June moved to York.", "Moved to York in June."),
])
def test_a_verb_first_note_told_time_first_restates_it(local: LocalEmbedder, first: str,
                                                       second: str) -> None:
    assert len(plain_sentences(narrative(ExtractiveLLM(local), first, second))) == 1


@pytest.mark.parametrize("first, second", [
    ("Booked flights to Rome.", "Booked flights to Oslo."),
    ("Visited friends in Leeds.", "Visited friends in York."),
])
def test_two_verb_first_events_of_one_verb_are_two_events(local: LocalEmbedder, first: str,
                                                          second: str) -> None:
    # "Booked" was read as a person, the note as a state of theirs, and the second booking
    # was written as the current state, the first as replaced
    for content in kept_both(local, first, second):
        assert "Current state" not in content


def test_a_name_in_ed_keeps_its_changes(local: LocalEmbedder) -> None:
    for llm in (ExtractiveLLM(local), ExtractiveLLM()):
        content = narrative(llm, "Ahmed lives in Leeds.", "Ahmed lives in York.")
        assert content.split("\n\n")[-1] == "Current state (2026-11-12): Ahmed lives in York."


@pytest.mark.parametrize("first, second", [
    ("Booked flights to Rome.", "Changed the booking to Oslo."),
    ("Booked flights to Rome.", "Booked flights to Oslo instead."),
    ("Noor met Tom for lunch.", "Noor met Lisa for lunch instead."),
    ("Noor ordered a blue sofa.", "Noor changed the order to a green sofa."),
])
def test_an_event_said_to_replace_another_is_its_newer_version(local: LocalEmbedder,
                                                               first: str,
                                                               second: str) -> None:
    for content in kept_both(local, first, second):
        assert content.split("\n\n")[-1] == f"Current state (2026-11-12): {second}"


@pytest.mark.parametrize("first, second", [
    # "instead" of another frame, or a change of something the first does not tell of
    ("Booked flights to Rome.", "Took the train to work instead."),
    ("Noor ordered a blue sofa.", "Noor changed the tyres to winter ones."),
    ("Noor works at Arup.", "Noor walked instead."),
])
def test_a_replacement_of_something_else_is_no_version(local: LocalEmbedder, first: str,
                                                       second: str) -> None:
    for content in kept_both(local, first, second):
        assert "Current state" not in content


@pytest.mark.parametrize("first, second", [
    ("Lives in Leeds.", "Lives in York."),
    ("Works at Acme.", "Works at Initech."),
    ("Drives a Golf.", "Drives a Tesla."),
])
def test_two_notes_naming_nobody_with_a_value_swapped_are_versions(local: LocalEmbedder,
                                                                  first: str,
                                                                  second: str) -> None:
    # their unnamed subject is one, as the name of "Ana lives in Leeds." / "Ana lives in
    # York." is: without it they shared too few words and kept no current state
    for content in kept_both(local, first, second):
        assert content.split("\n\n")[-1] == f"Current state (2026-11-12): {second}"


def test_two_notes_naming_nobody_of_another_frame_are_no_versions(local: LocalEmbedder) -> None:
    for llm in (ExtractiveLLM(local), ExtractiveLLM()):
        content = narrative(llm, "Lives in Leeds.", "Plays chess in York.")
        assert "Current state" not in content
