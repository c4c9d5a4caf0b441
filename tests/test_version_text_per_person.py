"""A text's reading as one side of a version pair is kept per person.

``tells_newer_version`` resolves a leading He/She of each sentence of both texts to the
pair's person and reads who each is about; the later text's sentences that tell a change
are read in full. The join reads one later text against up to eight members, and a member
against every later text in its window: that reading was made again for every pair. It
depends on the text and the person alone, so it is kept with the text's sentences
(``_VersionText``) per person, and shared (``_versions`` only reads it). The answers are
those of the reading per pair (tests/test_change_reading_same_answers.py,
tests/test_version_join_cost.py)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from everos_reflect.llm import extractive as x
from tests.test_version_join_cost import reference

LATER = "Noor was let go. She moved to Lyon. Noor likes green tea."
MEMBERS = ["Noor works at Arup.", "Noor lives in Leeds.", "Noor plays chess on Sundays."]


@pytest.fixture
def resolved(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Each sentence's pronoun resolution counted, every per-text cache emptied first."""
    x._VERSION_TEXTS.clear()
    x._VERSION_TEXTS_HELD[0] = 0
    seen: Counter[str] = Counter()
    real = x._resolve_pronoun

    def counted(text: str, *args: Any) -> Any:
        seen[text] += 1
        return real(text, *args)

    monkeypatch.setattr(x, "_resolve_pronoun", counted)
    return seen


def test_a_later_text_is_read_once_against_several_members(resolved) -> None:
    answers = [x.tells_newer_version(m, LATER) for m in MEMBERS]
    assert answers == [True, True, False]
    # each of its three sentences once, not once per member (was three times)
    assert [resolved[s] for s in x._version_text(LATER).sentences] == [1, 1, 1]


def test_a_member_is_read_once_against_several_later_texts(resolved) -> None:
    later = ["Noor was let go.", "Noor left Arup.", "Noor no longer works."]
    assert all(x.tells_newer_version(MEMBERS[0], t) for t in later)
    assert resolved[MEMBERS[0]] == 1  # was once per later text


def test_another_person_is_read_apart() -> None:
    """The person comes of both texts: the same later text, its He/She resolved to
    another person against each member, answers as the reading per pair."""
    x._VERSION_TEXTS.clear()
    x._VERSION_TEXTS_HELD[0] = 0
    later = "Omar met Noor. Omar was let go. He moved to Lyon."
    members = ["Omar lives in Leeds. Omar works at Arup.", "Noor works at Arup.",
               "Noor lives in Leeds. Noor works at Arup. Noor plays chess.",
               "Omar lives in Leeds. Omar works at Arup."]
    answers = [x.tells_newer_version(m, later) for m in members]
    assert answers == [reference(m, later) for m in members] == [True, False, True, True]
    assert set(x._version_text(later)._changes) == {"Omar", "Noor"}


def _changes_text(n: int) -> str:
    """A distinct text of 40 sentences that each tell a change, of two people."""
    return " ".join(f"{'Noor' if k % 2 else 'Omar'} moved to hall {n}-{k} by the river now."
                    for k in range(40))


def test_what_is_kept_per_person_is_counted_in_the_cache_bounds(monkeypatch) -> None:
    """Hostile: distinct texts of 40 sentences that each tell a change, read as both sides
    under several persons. What is kept per person is counted in the cache's bytes, so the
    bound holds at every step, and the count is what the texts held account for."""
    monkeypatch.setattr(x, "VERSION_TEXTS_BYTES", 400_000)
    x._VERSION_TEXTS.clear()
    x._VERSION_TEXTS_HELD[0] = 0
    members = ["Noor works at Arup.", "Omar works at Arup.", "Noor lives in Leeds. Omar too."]
    for n in range(150):
        later = _changes_text(n)
        for m in members:
            x.tells_newer_version(m, later)
            x.tells_newer_version(later, _changes_text(n + 1))
        assert x._VERSION_TEXTS_HELD[0] <= 400_000
        assert x._VERSION_TEXTS_HELD[0] == sum(v._held[0] for v in x._VERSION_TEXTS.values())
    kept = [v for v in x._VERSION_TEXTS.values() if v._changes]
    assert kept  # readings are kept, and counted
    assert all(v._held[0] > v.size for v in kept)
    assert len(x._VERSION_TEXTS) < 150  # the bytes decided, not the entries
    x._VERSION_TEXTS.clear()
    x._VERSION_TEXTS_HELD[0] = 0
