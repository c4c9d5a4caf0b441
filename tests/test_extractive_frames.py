"""Four misreadings of the offline merge left after session 36 (bench/fold_pairs.json's
session-37 domains):

- one name under another verb is another fact: "Bea lives in Leeds." / "Bea works in Leeds
  now." was written as a change (where she lives, then where she works);
- the way to work ends when the work is done from home: "Bea takes the bus to work." / "Bea
  works from home now." kept no current state (session 36's shared-word rule read "work" as
  two parts);
- a theft told in the passive and the active is one fact: "Tom's bike was stolen on
  Monday." / "Someone stole Tom's bike on Monday." were both kept ("stole" ended nothing,
  "Someone" was a name);
- a verb-first note naming a list is nobody's ("Visited friends Ana and Tom.": "Visited" was
  read as a name), and what a note says holds now is no event in the past ("United plays at
  Wembley now." was, by "United", and so no version of "United plays at Old Trafford.").
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


def is_current_state(content: str, sentence: str) -> bool:
    last = content.split("\n\n")[-1]
    return last.startswith("Current state (2026-11-12): ") and last.endswith(sentence)


@pytest.mark.parametrize("first, second", [
    ("Bea lives in Leeds.", "Bea works in Leeds now."),
    ("Omar lives in Bristol.", "Omar studies in Bristol now."),
    ("Ivy works in Oxford.", "Ivy lives in Oxford now."),
])
def test_one_place_under_another_verb_is_another_fact(local: LocalEmbedder, first: str,
                                                      second: str) -> None:
    for content in kept_both(local, first, second):
        assert "Current state" not in content


@pytest.mark.parametrize("first, second", [
    ("Bea lives in Leeds.", "Bea lives in York now."),  # the value replaced: a change
    ("Bea walks to work.", "Bea cycles to work now."),  # the way replaced, the place kept
    # an event under the other verb may be the change itself: only two states are apart
    ("Kemal goes to the gym on King Street.", "Kemal returned to the gym on King Street."),
])
def test_a_value_replaced_under_the_same_verb_stays_a_change(local: LocalEmbedder,
                                                             first: str, second: str) -> None:
    content = narrative(ExtractiveLLM(local), first, second)
    assert is_current_state(content, second[second.index(" ") + 1:])


@pytest.mark.parametrize("first, second", [
    ("Bea takes the bus to work.", "Bea works from home now."),
    ("Ivy walks to work.", "Ivy works remotely now."),
])
def test_work_done_from_home_ends_the_way_to_work(local: LocalEmbedder, first: str,
                                                  second: str) -> None:
    content = narrative(ExtractiveLLM(local), first, second)
    assert len(plain_sentences(content)) == 2
    assert is_current_state(content, second[second.index(" ") + 1:])


@pytest.mark.parametrize("first, second", [
    ("Bea takes the bus to work.", "Bea works at the bakery now."),  # a new job, same bus
    ("Bea cycles to work.", "Bea works late now."),
    ("Bea works at Arup.", "Bea walks to work now."),  # session 36's pair: two facts
    ("Bea walks to work.", "Bea works at Home Depot now."),  # a name, not her home
    ("Bea walks to work.", "Bea works at home Depot Street now."),
])
def test_other_news_of_work_ends_no_way_to_it(local: LocalEmbedder, first: str,
                                              second: str) -> None:
    for content in kept_both(local, first, second):
        assert "Current state" not in content


def test_someone_stealing_ones_thing_is_its_end_as_the_passive_is() -> None:
    active = read_sentence("Someone stole Tom's bike on Monday.")
    passive = read_sentence("Tom's bike was stolen on Monday.")
    assert active.past and passive.past
    assert active.ended == passive.ended == frozenset({"bike"})
    assert extractive._leading_name("Someone stole Tom's bike.") is None


@pytest.mark.parametrize("first, second", [
    ("Tom's bike was stolen on Monday.", "Someone stole Tom's bike on Monday."),
    ("Someone stole Tom's bike on Monday.", "Tom's bike was stolen on Monday."),
])
def test_a_theft_told_in_the_passive_and_the_active_is_folded(local: LocalEmbedder,
                                                              first: str, second: str) -> None:
    content = narrative(ExtractiveLLM(local), first, second)
    assert len(plain_sentences(content)) == 1


def test_thefts_of_two_things_are_both_kept(local: LocalEmbedder) -> None:
    for content in kept_both(local, "Tom's bike was stolen on Monday.",
                             "Someone stole Tom's wallet on Monday."):
        assert "Current state" not in content


@pytest.mark.parametrize("sentence", [
    "Visited friends Ana and Tom.", "Phoned cousins Mia and Leo.",
    "Visited friends Ana Wong and Tom.",
])
def test_a_verb_first_note_naming_a_list_names_nobody(sentence: str) -> None:
    assert extractive._leading_name(sentence) is None
    assert read_sentence(sentence).past


@pytest.mark.parametrize("sentence, name", [
    ("United plays Chelsea.", "United"),  # a verb and its one object: a name first
    ("Ahmed visits Ana and Tom.", "Ahmed"),  # a verb, no plural: the name stays
])
def test_a_single_object_or_a_verb_keeps_the_name(sentence: str, name: str) -> None:
    assert extractive._leading_name(sentence) == name


def test_two_visits_of_a_list_are_two_events_not_a_change(local: LocalEmbedder) -> None:
    for content in kept_both(local, "Visited friends Ana and Tom.",
                             "Visited friends Ana and Lea."):
        assert "Current state" not in content


def test_what_a_note_says_holds_now_is_no_past_event(local: LocalEmbedder) -> None:
    assert not read_sentence("United plays at Wembley now.").past
    content = narrative(ExtractiveLLM(local), "United plays at Old Trafford.",
                        "United plays at Wembley now.")
    assert is_current_state(content, "United plays at Wembley now.")


@pytest.mark.parametrize("text, change", [
    ("Bea now uses Signal instead.", "signal"),
    ("Bea replaced her old phone with a Pixel.", "pixel"),
    # the parts of a change phrase lie within a clause: read unbounded, every "now" of a
    # hand-written text scanned the rest of it for "instead" (256 KiB of "now": seven
    # minutes to read one sentence, in Reflection and in the indexer)
    (f"Bea now {'walks and talks ' * 14}a lot instead.", None),
    (f"Bea replaced {'the old and the new ' * 11}with a Pixel.", None),
])
def test_a_change_phrase_is_read_within_its_span(text: str, change: str | None) -> None:
    assert read_sentence(text).change == change
