"""The merge reads a sentence's text once: copies of a reading and the per-text answers of the
pair tests must equal what reading the text anew gives. A fold keeps the reading of the
wording it keeps (``_moved``) and the version join asks ``_changed_thing``, ``_says_instead``
and ``_to_name`` of each text once; were any of them to depend on more than the text (its
day, order or sources), a folded or compared sentence would be read wrongly."""

from __future__ import annotations

from dataclasses import fields
from datetime import date

import pytest

from everos_reflect.llm import extractive as ex

TEXTS = [
    "Andrew adopted a dog named Rex.",
    "Mia switched her phone to a Pixel 8.",
    "Noor booked flights to Oslo instead.",
    "Noor booked flights to Rome instead of Oslo.",
    "Tariq got a new job at Hooli.",
    "Ines moved to Paris last spring.",
    "Bea joined Atkins as an engineer.",
    "Bea was let go.",
    "Is Nina still vegan?",
    "Sam wants to learn the cello.",
    "Omar ran 5 km a week as a student.",
    "Rafa left Madrid two years ago.",
    "Lunch: soup.",
    "Sue no longer takes the bus; she cycles to work now.",
    "Sam skipped the gym this week.",
]


@pytest.mark.parametrize("text", TEXTS)
def test_a_moved_copy_reads_as_the_text_read_anew(text: str) -> None:
    first = ex._Sentence(text, date(2026, 1, 2), 3, ("ep_a",))
    moved = ex._moved(first, date(2026, 5, 6), 9, ("ep_a", "ep_b"))
    again = ex._Sentence(text, date(2026, 5, 6), 9, ("ep_a", "ep_b"))
    assert moved == again
    for f in fields(ex._Sentence):  # eq would pass a field left out of compare
        assert getattr(moved, f.name) == getattr(again, f.name), f.name
    assert first.day == date(2026, 1, 2) and first.sources == ("ep_a",)  # the copy alone moved


def test_a_moved_copy_keeps_the_caller_fields_the_merge_set() -> None:
    s = ex._Sentence("Mia lives in Leeds.", date(2026, 1, 2), 0, ("ep_a",))
    s.subject, s.person, s.vector = "mia", "mia", 4
    moved = ex._moved(s, date(2026, 2, 1), 5)
    assert (moved.subject, moved.person, moved.vector, moved.sources) == ("mia", "mia", 4,
                                                                          ("ep_a",))


@pytest.mark.parametrize("text", TEXTS)
def test_per_text_answers_equal_the_patterns(text: str) -> None:
    m = ex._CHANGED_THING_RE.search(text)
    expected = None if m is None else (
        ex._fold_plural(m.group("thing").lower()),
        {ex._fold_plural(w.lower()) for w in ex._WORD_RE.findall(m.group("value"))}
        - ex.STOPWORDS)
    assert ex._changed_thing(text) == expected
    assert ex._says_instead(text) == (ex._INSTEAD_RE.search(text) is not None)
    found, kept = ex._TO_NAME_RE.search(text), ex._to_name(text)
    assert (found is None) == (kept is None)
    if found is not None and kept is not None:
        assert found.groupdict() == kept.groupdict() and found.span() == kept.span()


def test_the_patterns_are_asked_of_each_text_once_in_a_merge(monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    """A merge of sentences that each compare with every other searches each text once
    for a changed thing and once for "instead", not once per pair."""
    for fn in (ex._changed_thing, ex._says_instead, ex._to_name):
        fn.cache_clear()  # type: ignore[attr-defined]
    searched: list[str] = []
    pattern = ex._INSTEAD_RE

    class Counting:
        def search(self, text: str) -> object:
            searched.append(text)
            return pattern.search(text)

    monkeypatch.setattr(ex, "_INSTEAD_RE", Counting())
    sentences = [ex._Sentence(t, date(2026, 1, 1 + i), i, (f"ep_{i}",))
                 for i, t in enumerate(["Noor booked flights to Rome.",
                                        "Noor booked flights to Oslo instead.",
                                        "Noor booked a hotel in Oslo.",
                                        "Noor booked a car in Oslo instead."])]
    ex._fold_restatements(sentences, None, 0.78)
    assert searched and len(searched) == len(set(searched))


@pytest.mark.parametrize("text", [*TEXTS, "Bea lives in Leeds.", "Bea works in Leeds now.",
                                  "Omar studies in Bristol now.", "Ravi runs"])
def test_one_verb_is_the_roles_one_verb(text: str) -> None:
    roles = ex._roles_of(text)
    verbs = [w for w, parts in roles.items() if "v" in parts]
    expected = None if len(verbs) != 1 else (
        verbs[0], {w: p for w, p in roles.items() if w != verbs[0]})
    assert ex._one_verb(text) == expected


def test_another_verb_reads_one_frame_per_text() -> None:
    lives = ex._Sentence("Bea lives in Leeds.", date(2026, 1, 1), 0, ("a",))
    works = ex._Sentence("Bea works in Leeds now.", date(2026, 2, 1), 1, ("b",))
    moved = ex._Sentence("Bea lives in York now.", date(2026, 3, 1), 2, ("c",))
    for s in (lives, works, moved):
        s.subject = "bea"
    assert ex._another_verb(lives, works)  # where she lives, where she works: both so
    assert not ex._another_verb(lives, moved)  # one frame, its value replaced
