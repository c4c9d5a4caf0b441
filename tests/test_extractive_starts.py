"""A change to a new place, employer or team named in place of the old one is its new version.

"Lucia lives in Paris." / "Lucia moved to Lyon." (cosine 0.73) kept no current state: "moved to"
is read as a change, but the embedder does not know "Lyon" as a word of the kind of "Paris"
(0.49), so the old city read as still true. "Moved to Lyon." / "Left Lyon for Paris." kept
none either: "Left" was taken for somebody's name, so the two notes had two subjects.
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


@pytest.mark.parametrize("first, second", [
    ("Lucia lives in Paris.", "Lucia moved to Lyon."),
    ("Kemal works at Acme.", "Kemal started working at Globex."),
    ("Moved to Lyon.", "Left Lyon for Paris."),
    # a move or a join to a name, where the earlier says where one lives or works: far
    # apart in meaning (0.39-0.59), these kept no current state
    ("Lives in Paris.", "Moved to Lyon."),
    ("Omar rents a flat in Lyon.", "Omar moved to Paris."),
    ("Omar is based in Leeds.", "Omar relocated to York."),
    ("Omar has a job at Initech.", "Omar started at Globex."),
    # a new job told by a job, a hiring, or a join with a role, its staff or work there
    ("Omar works at Initech.", "Omar got a job at Hooli."),
    ("Omar has a job at Initech.", "Omar took a new job with Globex."),
    ("Omar works at Initech.", "Omar was hired by Hooli."),
    ("Omar works at Initech.", "Omar joined Hooli as an engineer."),
    ("Omar works at Initech.", "Omar joined Hooli's staff."),
    ("Omar works at Initech.", "Omar left Initech and joined Hooli."),
])
def test_a_change_to_a_name_in_place_of_a_name_is_the_current_state(
        local: LocalEmbedder, first: str, second: str) -> None:
    content = narrative(ExtractiveLLM(local), first, second)
    assert plain_sentences(content) == [first, second]
    assert content.split("\n\n")[-1] == f"Current state (2026-11-12): {second}"


@pytest.mark.parametrize("first, second", [
    # a city for an employer: a name for a name, but of another kind (cosine 0.63)
    ("Kemal lives in Berlin.", "Kemal started working at Globex."),
    ("Ines works at Acme.", "Ines moved to Berlin."),
    ("Omar lives in Berlin.", "Omar joined Globex."),
    ("Omar plays chess at the club.", "Omar joined Hooli."),
    ("Omar works at Initech.", "Omar joined the Initech choir."),
    # a join says nothing of a job by itself: a member of a charity, a club, an app, still
    # working where he worked (written as the end of Initech before)
    ("Omar works at Initech.", "Omar joined Greenpeace."),
    ("Omar works at Initech.", "Omar joined Hooli."),
    ("Omar works at Initech.", "Omar joined Strava after work."),
    # a job somewhere, after a home: no version
    ("Omar lives in Leeds.", "Omar got a job at Hooli."),
    # two past events of one frame with an opening verb: no change
    ("Met Tom for lunch.", "Met Lisa for lunch."),
])
def test_a_name_of_another_kind_or_another_event_is_no_version(local: LocalEmbedder,
                                                              first: str,
                                                              second: str) -> None:
    content = narrative(ExtractiveLLM(local), first, second)
    assert plain_sentences(content) == [first, second]
    assert "Current state" not in content


def test_an_opening_past_verb_is_nobody() -> None:
    assert extractive._leading_name("Left Lyon for Paris.") is None
    assert extractive._leading_name("Met Tom for lunch.") is None
    assert extractive._leading_name("Lucia left Lyon for Paris.") == "Lucia"
    assert extractive._main_entity(["Left Lyon for Paris.", "Met Tom for lunch."]) is None


@pytest.mark.parametrize("first, second", [
    # under the version threshold (0.68): the bus was read as still taken
    ("Lucia takes the bus to work.", "Lucia cycles to work now."),
    # over the paraphrase threshold (0.81): folded, the bus left the narrative
    ("Lucia takes the bus to school.", "These days Lucia walks to school."),
])
def test_a_state_said_to_hold_now_is_the_current_state(local: LocalEmbedder, first: str,
                                                       second: str) -> None:
    content = narrative(ExtractiveLLM(local), first, second)
    assert plain_sentences(content) == [first, second]
    assert content.split("\n\n")[-1] == f"Current state (2026-11-12): {second}"


@pytest.mark.parametrize("first, second", [
    # "work": where she works in one, where she walks in the other (the "now" rule, 0.67;
    # without an embedder half their words)
    ("Bea works at Arup.", "Bea walks to work now."),
    ("Bea works at a school.", "Bea walks to school now."),
    # "park": near it, in it (0.81: over the version threshold, "now" or not)
    ("Bea lives near the park.", "Bea runs in the park now."),
    ("Bea lives near the park.", "Bea runs in the park."),
])
def test_a_shared_word_in_another_part_is_another_fact(local: LocalEmbedder, first: str,
                                                      second: str) -> None:
    for content in kept_both(local, first, second):
        assert "Current state" not in content


def test_a_shared_word_read_for_its_part() -> None:
    roles = extractive._roles
    assert roles(read_sentence("Bea works at Arup.")) == {"work": {"v"}, "arup": {"at"}}
    assert roles(read_sentence("These days Bea walks to work.")) == {"walk": {"v"},
                                                                      "work": {"to"}}
    assert roles(read_sentence("In May moved to York.")) == {"moved": {"v"}, "york": {"to"}}


@pytest.mark.parametrize("first, second", [
    ("Lucia takes the bus to work.", "Lucia cycles to work now too."),
    ("Lucia takes the bus to work.", "Lucia cycles to work now and then."),
    ("Lucia eats lunch at work.", "Lucia cycles to work now."),
])
def test_an_addition_or_another_frame_said_now_is_no_version(local: LocalEmbedder, first: str,
                                                             second: str) -> None:
    content = narrative(ExtractiveLLM(local), first, second)
    assert plain_sentences(content) == [first, second]
    assert "Current state" not in content


def test_a_state_restated_with_now_still_folds(local: LocalEmbedder) -> None:
    content = narrative(ExtractiveLLM(local), "Lucia cycles to work.",
                        "These days Lucia cycles to work.")
    assert len(plain_sentences(content)) == 1
