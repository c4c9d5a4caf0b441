"""The text reading on the clustering's assignment path, made cheaper in session 41 (issue 15),
answers exactly as before: ``tells_change`` and ``tells_newer_version`` decide where an
Episode goes, so a cheaper reading that answered otherwise would move Episodes between
clusters.

What changed, each given below as it was (the reference): the word gate reads a text as
bytes (``_may_tell_change``), the change patterns are tried cheapest first
(``_CHANGE_MARKS``), a reading is copied without ``copy.copy`` (``_read``), a sentence's
holder is kept per sentence and person (``_holder``), its stems and folded words per token
set (``_Sentence.stems``, ``_other_holder``), and ``_echoes`` cuts the prefix once. Each
answer of the two functions, and of the changed pieces alone, is compared with the
reference's on the example root's Episodes, the state stories and generated texts.
"""

from __future__ import annotations

import copy
import itertools
import json
import random
import re
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from everos_reflect.llm import extractive as x

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "memory_root_example"

# --- the reading as it was (session 40), verbatim ----------------------------------------

OLD_WORDS_OF_ASCII = str.maketrans({
    chr(c): chr(c).lower() if chr(c).isalnum() or chr(c) == "_" else " " for c in range(128)})


def old_may_tell_change(text: str) -> bool:
    if not text.isascii():
        return True
    words = text.translate(OLD_WORDS_OF_ASCII).split()
    if not x._CHANGE_WORDS.isdisjoint(words):
        return True
    if x._PAIR_FIRSTS.isdisjoint(words):
        return False
    return not x._CHANGE_PAIRS.isdisjoint(itertools.pairwise(words))


def old_echoes(word: str, words: Any) -> bool:
    return any(other == word or (min(len(word), len(other)) >= x.SHARED_PREFIX
                                 and word[:x.SHARED_PREFIX] == other[:x.SHARED_PREFIX])
               for other in words)


def old_other_holder(a: Any, b: Any) -> bool:
    p, q = a.holder, b.holder
    if p is None and q is None:
        return False
    if p is not None and q is not None:
        return p.owner == q.owner and not old_echoes(p.head, [q.head])
    own, other = (a, b) if p is not None else (b, a)
    holder = own.holder
    assert holder is not None
    if other.subject != holder.owner or holder.again:
        return False
    return (not old_echoes(holder.head, {x._fold_plural(w) for w in other.tokens})
            or x._tells_more(own, other, holder.owner))


def old_read(text: str, day: date = date.min, order: int = 0) -> Any:
    s = copy.copy(x._reading(text))
    s.day, s.order = day, order
    return s


def old_stems(self: Any) -> frozenset[str]:
    return frozenset(x._fold_plural(w) for w in self.tokens - self.markers)


OLD_MARKS = (x._ENDED_RE, x._DISMISSAL_RE, x._CHANGE_RE, x._NOW_MARK_RE)


def _caches() -> dict[str, Any]:
    """Every function of the reading's module that keeps what it read (has ``cache_clear``):
    found, not listed by hand, so one added later is emptied too (a list by hand had missed
    ``_named_subject`` and ``_roles_of``, and the "cold" reading then read them warm)."""
    return {name: fn for name, fn in vars(x).items()
            if callable(fn) and hasattr(fn, "cache_clear")}


def _forget() -> None:
    """Every cache of the reading emptied: each side reads from nothing."""
    x._VERSION_TEXTS.clear()
    x._VERSION_TEXTS_HELD[0] = 0
    for fn in _caches().values():
        fn.cache_clear()


def _as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(x, "_may_tell_change", old_may_tell_change)
    monkeypatch.setattr(x, "_echoes", old_echoes)
    monkeypatch.setattr(x, "_other_holder", old_other_holder)
    monkeypatch.setattr(x, "_read", old_read)
    monkeypatch.setattr(x, "_holder", x._read_holder)
    monkeypatch.setattr(x, "_CHANGE_MARKS", OLD_MARKS)
    monkeypatch.setattr(x._Sentence, "stems", property(old_stems))


# --- texts --------------------------------------------------------------------------------

NAMES = ["Bea", "Noor", "Omar", "Mia Wong", "Andrew", "Lucia"]
SAID = [
    "{n} works at Arup.", "{n} was let go.", "{n} quit the chess club.", "{n} moved to Lyon.",
    "{n} no longer drives.", "{n} cycles to work now.", "{n} now drives a Tesla Model 3.",
    "{n}'s brother is allergic to peanuts.", "{n} is allergic to peanuts.",
    "{n}'s allergy to peanuts is severe.", "{n}'s car was sold.", "{n} has a car.",
    "{n}'s phone broke.", "{n}'s laptop broke.", "{n} plays golf now too.",
    "{n} left Acme for Globex.", "{n} started working at the cinema.",
    "These days {n} takes the bus.", "{n} gave up meat as a teenager.",
    "{n} switched to decaf.", "{n} stopped drinking coffee for a week.",
    "{n}'s best friend moved to Leeds.", "{n}'s closest friend lives in York.",
    "Her brother sold his flat.", "She moved to Paris.", "He retired early.",
    "{n} retired.", "{n} lives in Leeds.", "{n} lives in York now.", "Moved to Oslo.",
    "Is {n} still vegan?", "{n} wants to weigh 70 kg.", "{n} weighs 80 kg.",
    "{n} got laid off from Arup.", "{n} uninstalled the app.", "{n} broke up with Sam.",
    "Job: nurse.", "Job: teacher now.", "{n}'s grandmother still lives in Porto.",
    "{n}'s grandma moved into a care home.", "{n}'s kitchen sink keeps leaking.",
    "Yesterday {n} left work early.", "{n} resigned.", "{n} ſold her car.",
    # a holder's head and a word of the other sharing four letters, five, all
    "{n}'s mother called.", "{n} collects moths.", "{n}'s studio flooded.",
    "{n} studies law.", "{n} calls her mother.", "{n} is severely allergic to peanuts.",
    "{n}'s grandmother is in Porto.", "{n} visits her grandma in Porto.",
]


def _example_texts() -> list[str]:
    """The Content of each Episode of the example root."""
    out = []
    for path in sorted(EXAMPLE.rglob("episodes/*.md")):
        for m in re.finditer(r"## Content\n(.*?)<!-- /entry:", path.read_text(), re.DOTALL):
            out.append(m.group(1).strip())
    return out


def _story_texts() -> list[str]:
    stories = json.loads((ROOT / "bench" / "state_stories.json").read_text())["stories"]
    return [e["text"] for s in stories for e in s["episodes"]]


def _generated(rng: random.Random, count: int) -> list[str]:
    """Texts of one to four sentences said of one or two people."""
    out = []
    for _ in range(count):
        names = rng.sample(NAMES, 2)
        out.append(" ".join(rng.choice(SAID).format(n=rng.choice(names))
                            for _ in range(rng.randint(1, 4))))
    return out


def _corpus() -> tuple[list[str], list[tuple[str, str]]]:
    rng = random.Random(41)
    example, stories = _example_texts(), _story_texts()
    texts = example + stories + _generated(rng, 600)
    pairs = [(rng.choice(texts), rng.choice(texts)) for _ in range(1500)]
    # one person's texts, earlier against later, as the join meets them
    for name in NAMES:
        said = [t.format(n=name) for t in SAID]
        pairs += [(a, b) for a in said for b in said if a != b and rng.random() < 0.3]
    pairs += [(a, b) for a, b in itertools.pairwise(example)]
    return texts, pairs


def _answers() -> tuple[list[bool], list[bool], list[bool]]:
    texts, pairs = _corpus()
    _forget()
    told = [x.tells_change(t) for t in texts]
    versions = [x.tells_newer_version(a, b) for a, b in pairs]
    again = [x.tells_newer_version(a, b) for a, b in pairs]  # with every cache warm
    _forget()
    return told, versions, again


def test_tells_change_and_tells_newer_version_answer_as_the_reading_they_replace(
        monkeypatch: pytest.MonkeyPatch) -> None:
    told, versions, again = _answers()
    with monkeypatch.context() as m:
        _as_it_was(m)
        old_told, old_versions, _ = _answers()
    assert told == old_told
    assert versions == old_versions == again
    # the corpus holds both answers of each, and many of the cases the pieces changed read
    assert 100 < sum(told) < len(told) - 100
    assert 50 < sum(versions) < len(versions) - 500


def test_forget_leaves_every_cache_of_the_reading_empty() -> None:
    texts, pairs = _corpus()
    for t in texts[:200]:
        x.tells_change(t)
    for a, b in pairs[:300]:
        x.tells_newer_version(a, b)
    x._roles_of("Bea quit the chess club.")
    held = {name for name, fn in _caches().items() if fn.cache_info().currsize}
    # the reading fills the caches the hand-written list had missed
    assert {"_named_subject", "_roles_of", "_reading", "_kept_holder"} <= held
    _forget()
    assert {name: fn.cache_info().currsize for name, fn in _caches().items()
            if fn.cache_info().currsize} == {}
    assert not x._VERSION_TEXTS and x._VERSION_TEXTS_HELD == [0]


def test_the_pieces_answer_as_before() -> None:
    texts, _ = _corpus()
    sentences = sorted({s for t in texts for s in x.split_sentences(t)})
    assert [x._may_tell_change(t) for t in texts + sentences] == [
        old_may_tell_change(t) for t in texts + sentences]
    persons = [None, "Bea", "Mia", "Noor"]
    assert [x._holder(s, p) for s in sentences for p in persons] == [
        x._read_holder(s, p) for s in sentences for p in persons]
    read = [x._read(s, date(2000, 1, 2), 3) for s in sentences]
    assert [vars(s) for s in read] == [vars(old_read(s, date(2000, 1, 2), 3)) for s in sentences]
    assert [s.stems for s in read] == [old_stems(s) for s in read]
    rng = random.Random(7)
    for s in read:
        s.subject, s.person = x._subject(s.text, "Bea"), "bea"
        s.holder = x._holder(s.text, "Bea")
    held = [s for s in read if s.holder is not None]
    assert len(held) > 50
    # every pair that reaches the words (the other about the holder's owner), some others
    both = [(a, b) for a in held for b in read if b.subject == a.holder.owner]
    both += [(rng.choice(held), rng.choice(read)) for _ in range(3000)]
    both += [(b, a) for a, b in both]
    got = [x._other_holder(a, b) for a, b in both]
    assert got == [old_other_holder(a, b) for a, b in both]
    assert 100 < sum(got) < len(got) - 100


@settings(max_examples=400, deadline=None, database=None)
@given(st.text(alphabet="abcdeghilmnoprstuy ", max_size=9),
       st.lists(st.text(alphabet="abcdeghilmnoprstuy", max_size=9), max_size=6))
def test_echoes_answers_as_before(word: str, words: list[str]) -> None:
    # a prefix shared, a word shorter than the prefix, the word itself among the words
    for pool in (words, set(words), [*words, word], [w[:5] + "x" for w in words]):
        assert x._echoes(word, pool) == old_echoes(word, pool)


@settings(max_examples=400, deadline=None, database=None)
@given(st.lists(st.sampled_from(["now", "gave", "up", "let", "go", "these", "days", "Bea",
                                 "quit", "started", "working", "x_1", "LEFT", "snow"]),
                max_size=8),
       st.lists(st.sampled_from([" ", ", ", ".", "-", "'", "\n", "\t", "\x1c", "_"]),
                min_size=8, max_size=8))
def test_the_gate_answers_as_before(words: list[str], gaps: list[str]) -> None:
    text = "".join(w + g for w, g in zip(words, gaps, strict=False))
    assert x._may_tell_change(text) == old_may_tell_change(text)
