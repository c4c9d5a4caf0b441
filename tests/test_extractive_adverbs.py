"""An adverb between a subject and its verb ("also", "just", "then", "finally", "recently")
does not hide the verb.

"Lucia also skipped the gym this week." was read with "also" as its verb: no past event, so no
one-off one, and at cosine 0.80 it could be folded into "Lucia goes to the gym on Mondays.",
the habit lost. "Lucia then met Lisa for lunch." was no event either, so it could be written
as the newer version of "Lucia met Tom for lunch.".
"""

from __future__ import annotations

import pytest

from everos_reflect.embedding.local import LocalEmbedder
from tests.merge_fixtures import kept_both, loaded_local, read_sentence


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return loaded_local()


def reading(text: str) -> tuple[bool, bool]:
    s = read_sentence(text)
    return s.past, s.passing


@pytest.mark.parametrize("text, past, passing", [
    ("Lucia also skipped the gym this week.", True, True),
    ("Lucia just left work early.", True, True),
    ("Lucia then met Lisa for lunch.", True, False),
    ("Lucia finally quit smoking.", True, False),
    ("Lucia recently moved to Porto.", True, False),
    ("She also skipped the gym this week.", True, True),
    # a habit with an adverb, and a word in "-ly" that is its verb
    ("Lucia also goes to the gym on Mondays.", False, False),
    ("Lucia usually drives to work.", False, False),
    ("Lucia flew to Rome.", True, False),
])
def test_an_adverb_before_the_verb_is_passed_over(text: str, past: bool,
                                                  passing: bool) -> None:
    assert reading(text) == (past, passing)


@pytest.mark.parametrize("first, second", [
    ("Ugo goes to the gym on Mondays.", "Ugo also skipped the gym this week."),
    ("Ugo drives to work.", "Ugo just left work early."),
    ("Ugo met Tom for lunch.", "Ugo then met Lisa for lunch."),
])
def test_a_one_off_or_second_event_with_an_adverb_is_no_version(local: LocalEmbedder,
                                                                first: str,
                                                                second: str) -> None:
    for content in kept_both(local, first, second):
        assert "Current state" not in content
