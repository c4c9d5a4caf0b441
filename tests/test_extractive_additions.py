"""A state said to hold as well as the old one ("too", "also", "as well") replaces nothing.

"Bea plays tennis." / "Bea plays golf now too." was written with the golf as the current state
and the tennis as history: the two share half their content words, which made them versions of
one fact, so the merge claimed she had stopped playing tennis.
"""

from __future__ import annotations

import pytest

from everos_reflect.embedding.local import LocalEmbedder
from everos_reflect.llm.extractive import ExtractiveLLM, plain_sentences
from tests.merge_fixtures import kept_both, loaded_local, narrative


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return loaded_local()


@pytest.mark.parametrize("first, second", [
    ("Bea plays tennis.", "Bea plays golf now too."),
    ("Bea speaks Spanish.", "Bea speaks Italian as well."),
    ("Ugo keeps two cats.", "Ugo also keeps a rabbit now."),
    ("Ugo works at the library.", "Ugo works at the cinema too, on weekends."),
])
def test_a_state_added_alongside_the_old_is_no_version(local: LocalEmbedder, first: str,
                                                       second: str) -> None:
    for content in kept_both(local, first, second):
        assert "Current state" not in content


@pytest.mark.parametrize("first, second, current", [
    # "too" of degree is no addition; "instead" replaces
    ("Ugo thinks his rent is fair.", "Ugo thinks his rent is too high now.", "too high"),
    ("Bea plays tennis.", "Bea plays golf now instead.", "golf"),
    ("Ugo is in the chess club.", "Ugo also quit the chess club.", "quit"),
])
def test_a_change_is_still_a_version(local: LocalEmbedder, first: str, second: str,
                                     current: str) -> None:
    content = narrative(ExtractiveLLM(local), first, second)
    assert plain_sentences(content) == [first, second]
    last = content.split("\n\n")[-1]
    assert last.startswith("Current state (2026-11-12): ") and current in last
