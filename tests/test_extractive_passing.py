"""A one-off or temporary event neither ends nor replaces a standing state.

"Lucia drives to work." / "Lucia left work early." (cosine 0.76) were written as a change of
the commute: the narrative ended "Current state: Lucia left work early.". "Lucia left home at
eight." after "Lucia works from home." and "Lucia stopped drinking coffee for a week." after
"Lucia drinks coffee every morning." were read as ends of the state they name, and "Lucia
skipped the gym this week." (0.79) was folded into "Lucia goes to the gym on Mondays." and lost.
"""

from __future__ import annotations

import sys
from datetime import date
from pathlib import Path

import pytest

from everos_reflect.embedding.local import LocalEmbedder
from everos_reflect.llm import extractive
from everos_reflect.llm.extractive import ExtractiveLLM, plain_sentences
from everos_reflect.strategies.reflect import DEFAULT_FACT_MATCH_THRESHOLD
from tests.merge_fixtures import kept_both, loaded_local, narrative

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import fold_pairs


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return loaded_local()


@pytest.mark.parametrize("first, second", [
    ("Lucia drives to work.", "Lucia left work early."),
    ("Lucia works from home.", "Lucia left home at eight."),
    ("Lucia drinks coffee every morning.", "Lucia stopped drinking coffee for a week."),
    ("Lucia runs the café on Elm Street.", "Lucia closed the café for the holidays."),
    ("Lucia works at the library.", "Lucia left the library at 6:30 pm."),
    ("Lucia goes to the gym on Mondays.", "Lucia skipped the gym this week."),
    # a stop bounded by a named time or a span
    ("Lucia eats meat.", "Lucia gave up meat for Lent."),
    ("Lucia drinks wine with dinner.", "Lucia gave up wine for January."),
    ("Lucia eats chocolate.", "Lucia stopped eating chocolate during Ramadan."),
    ("Lucia plays video games.", "Lucia gave up video games for the exam season."),
    # "quit" for a named time, as "gave up" for one
    ("Bea eats sugar.", "Bea quit sugar for Lent."),
    ("Bea drinks beer.", "Bea quit beer for January."),
    ("Ugo eats meat.", "Ugo quit meat during Ramadan."),
])
def test_a_one_off_event_is_no_version_of_a_standing_state(local: LocalEmbedder, first: str,
                                                           second: str) -> None:
    for content in kept_both(local, first, second):  # with the embedder and without
        assert "Current state" not in content


@pytest.mark.parametrize("first, second", [
    ("Tariq is in the chess club.", "Tariq quit the chess club yesterday."),
    ("Tariq sings in the choir.", "Tariq left the choir two weeks ago."),
    ("Tariq works at Initech.", "Tariq left Initech late last year."),
    ("Tariq drinks coffee every morning.", "Tariq stopped drinking coffee."),
    ("Tariq has a job at the museum.", "Tariq quit his job during Ramadan."),
    ("Tariq has a flat in Leeds.", "Tariq gave up his flat during Lent."),
])
def test_an_end_told_with_when_it_happened_is_still_the_current_state(
        local: LocalEmbedder, first: str, second: str) -> None:
    content = narrative(ExtractiveLLM(local), first, second)
    assert plain_sentences(content) == [first, second]
    assert content.split("\n\n")[-1] == f"Current state (2026-11-12): {second}"


def test_two_one_off_events_of_one_kind_still_fold(local: LocalEmbedder) -> None:
    content = narrative(ExtractiveLLM(local), "Lucia left work early.",
                        "Lucia left work early today.")
    assert len(plain_sentences(content)) == 1


@pytest.mark.parametrize("text, passing, ended", [
    ("Lucia left work early.", True, None),
    ("Lucia left home at eight.", True, None),
    ("Lucia stopped drinking coffee for a week.", True, None),
    ("Lucia stopped drinking coffee until the exams.", True, None),
    ("Lucia skipped the gym this week.", True, None),
    ("Lucia left home at eighteen.", False, {"home"}),  # an age, not a clock time
    ("Lucia left Initech for Hooli.", False, {"initech"}),
    ("Lucia left Initech for a startup.", False, {"initech"}),
    ("Gave up meat for Lent.", True, None),
    ("Lucia stopped drinking wine for January.", True, None),
    ("Lucia quit sugar for Lent.", True, None),
    ("Lucia quit sugar throughout March.", True, None),
    # "quit" for a name that is no time: what it went to
    ("Lucia quit Initech for Hooli.", False, {"initech"}),
    ("Lucia quit her job for Google.", False, {"job"}),
    ("Lucia quit her job during the pandemic.", False, {"job"}),
    # "during" a named time dates the end of a thing of hers; it bounds only a stop of
    # something she keeps from ("quit meat during Ramadan", above)
    ("Lucia quit her job during Ramadan.", False, {"job"}),
    ("During Ramadan Lucia quit her job.", False, {"job"}),
    ("During Ramadan Lucia quit meat.", True, None),
    ("Lucia sold the car during Easter.", False, {"car"}),
    ("Lucia gave up her flat during Lent.", False, {"flat"}),
    ("Lucia gave up her flat for Lent.", True, None),
    ("Lucia closed the shop throughout March.", True, None),
    # "for" after an "-ing" verb: for whom or where, not for how long
    ("Lucia stopped working for Initech.", False, {"working"}),
    ("Lucia gave up smoking for Maria.", False, {"smoking"}),
    ("Lucia gave up coffee for tea.", False, {"coffee"}),
    ("Lucia quit the chess club on Monday.", True, {"chess", "club"}),
    ("Lucia left the choir two weeks ago.", False, {"choir"}),
    # habits and adjectives: no event bounded in time
    ("Lucia goes to bed at eleven.", False, None),
    ("Lucia works until six.", False, None),
    ("Lucia takes the early train to work.", False, None),
])
def test_which_sentences_tell_of_a_one_off_or_temporary_event(
        text: str, passing: bool, ended: set[str] | None) -> None:
    s = extractive._Sentence(text, date.min, 0)
    assert s.passing is passing
    assert s.ended == (frozenset(ended) if ended is not None else None)


def test_a_delay_of_some_hours_is_no_event_left_early_or_late() -> None:
    assert not extractive._Sentence("Eva's Tokyo flight left six hours late.", date.min,
                                    0).passing


@pytest.mark.parametrize("text", [
    "The flight left six hours late.",
    "Eva's Tokyo flight left six hours late.",
    "Rafa's train left forty minutes late.",
    "The bus left half an hour early.",
    "The ferry left 20 minutes behind schedule.",
])
def test_a_departure_late_by_some_time_ends_nothing(text: str) -> None:
    # "six hours" was read as what ended, so "Eva's flight was six hours late." / "Eva's
    # flight left six hours late." was written as the end of the delay, the later sentence
    # as the current state
    assert extractive._Sentence(text, date.min, 0).ended is None


def test_a_departure_with_when_it_happened_still_ends() -> None:
    assert extractive._Sentence("Rafa left Madrid two years ago.", date.min,
                                0).ended == {"madrid"}


def test_a_delay_told_twice_is_one_sentence(local: LocalEmbedder) -> None:
    content = narrative(ExtractiveLLM(local), "Eva's flight was six hours late.",
                        "Eva's flight left six hours late.")
    assert len(plain_sentences(content)) == 1
    assert "Current state" not in content


@pytest.mark.parametrize("fact, sentence", [
    ("Lucia drives to the studio.", "Lucia left the studio early."),
    ("Lucia works at the library.", "Lucia left the library at six."),
    ("Lucia goes to the gym on Mondays.", "Lucia skipped the gym this week."),
])
def test_the_guard_counts_no_one_off_event_as_stating_a_standing_state(
        local: LocalEmbedder, fact: str, sentence: str) -> None:
    # cosine 0.75-0.80: a merge that kept only the one-off event passed the guard with the
    # standing state lost, the pair the merge keeps apart
    assert fold_pairs.coverage(local, [fact], sentence, DEFAULT_FACT_MATCH_THRESHOLD) == 0.0
    # the event itself, and a sentence stating both, still count
    assert fold_pairs.coverage(local, [sentence], sentence, DEFAULT_FACT_MATCH_THRESHOLD) == 1.0
    both = "Lucia drives to the studio and left it early one day."
    assert fold_pairs.coverage(local, ["Lucia drives to the studio.",
                                       "Lucia left the studio early."], both,
                               DEFAULT_FACT_MATCH_THRESHOLD) == 1.0
