"""The passage of an entry that answers a query: what a caller with a word budget should read.

A narrative can run to hundreds of words while the question needs one sentence of it. Each
search hit therefore carries a ``snippet``: one passage of the entry, consecutive sentences
around the one that best matches the query, within ``max_words``, with the date it was said
(the paragraph's ``YYYY-MM-DD:`` prefix of a narrative, else the entry's own date).

A passage, not a collage: the snippet never skips text to stitch together matches from far
apart in the entry. A collage would turn one long entry into a retriever over everything in
it, so that merging a user's whole history into one entry would read like the best memory at
a small budget; with one passage per hit, an entry is worth what one place in it says.

Scoring is lexical (query terms with light suffix folding, weighted by how rare they are in the
entry), deterministic and cheap: no model call per hit. A hybrid search also hands over the
entry's atomic facts nearest the query (``anchors``, best first): found by meaning, they catch
the answer a question words differently, so the sentences they stand for score as well as the
best lexical match, the nearest fact's most. The best sentence always comes; the passage
widens to take in each next-best sentence that scores at least half as well, with the sentences
between them, while it fits in ``max_words``. Ties go to the later
sentence, so a question about a changing fact gets its latest version (a narrative's current
state is last). A narrative's topic paragraphs date each line (``YYYY-MM-DD: ...``); every
sentence takes the date of its line, and a passage never crosses from one date to another: the
snippet's date is the day all of it was said.

One entry may answer with more than one passage (:func:`make_passages`): each further passage
opens on the sentence that stands for one of the entry's other nearest facts (an anchor not
already inside an earlier passage) and widens the same way without overlapping them. A
narrative that merged three sessions then serves the two of them a question needs as two
passages, as the separate Episodes did, instead of one. Which of them a search returns, and
where, is the search's call (:mod:`everos_reflect.index.search`).
Pure functions only.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

from everos_reflect.llm.extractive import STOPWORDS, narrative_sentences

#: Words a snippet may hold. Its best sentence comes whole even if longer, unless it runs past
#: twice this (unpunctuated text): then its opening is cut to this many words, ending in "…".
SNIPPET_WORDS = 60
#: A sentence joins the best one only if it scores at least this share of the best score.
RELEVANT_SHARE = 0.5
#: What the nearest anchor adds to its sentence, as a share of the best lexical score.
ANCHOR_WEIGHT = 1.0
#: A sentence stands for an anchor when this share of the shorter one's terms is shared.
ANCHOR_OVERLAP = 0.6

_TERM_RE = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class Snippet:
    """``text`` (sentences without their date prefixes), ``date`` (ISO day or None) and the
    indices of the sentences used, in ``split_sentences(content)`` order."""

    text: str
    date: str | None
    sentences: tuple[int, ...]


@dataclass(frozen=True)
class Passage:
    """A further passage of an entry (:func:`make_passages`) and the index, in the anchors
    given, of the anchor it opens on: the search ranks it by that fact's rank."""

    snippet: Snippet
    anchor: int


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def terms(text: str) -> set[str]:
    """Content terms of ``text``: lower-cased, stop words out, light suffix folding."""
    return {_stem(w) for w in (m.lower() for m in _TERM_RE.findall(text))
            if w not in STOPWORDS and len(w) > 1}


def dated_sentences(content: str, default_date: str | None) -> list[tuple[str, str | None]]:
    """Each sentence of ``content`` without its date prefix or label, with its date.

    A narrative's ``YYYY-MM-DD:`` line dates its sentences, a dated "Current state
    (2026-08-18):" label its paragraph's (the day the change was said, which may be older
    than the entry); an undated "Current state" paragraph and undated text take
    ``default_date`` (the entry's own date)."""
    return [(s.text, s.day if s.day is not None else default_date)
            for s in narrative_sentences(content)]


def _anchor_values(bags: list[set[str]], anchors: Sequence[str]) -> list[float]:
    """Per sentence: 1 / (1 + rank) of the best-ranked anchor it stands for, else 0."""
    values = [0.0] * len(bags)
    for rank, anchor in enumerate(anchors):
        wanted = terms(anchor)
        for i, bag in enumerate(bags):
            shared = len(bag & wanted)
            if values[i] == 0.0 and shared and shared >= ANCHOR_OVERLAP * min(len(bag),
                                                                             len(wanted)):
                values[i] = 1.0 / (1 + rank)
    return values


def _passage(ranked: list[tuple[float, int]], sizes: list[int], max_words: int,
             floor: float, dates: Sequence[str | None],
             blocked: frozenset[int] = frozenset()) -> tuple[int, int]:
    """First and last sentence of the passage: it opens on the best sentence (``ranked[0]``)
    and widens to each next-best relevant one (score ≥ ``floor``) whose span, with every
    sentence between, still fits ``max_words``, was said on the best sentence's day (``dates``)
    and holds no ``blocked`` sentence (one already in another passage), so the one date a
    snippet carries is true of all of it. With nothing relevant (``floor`` 0) it is the
    entry's opening."""
    upto = [0, *accumulate(sizes)]  # upto[j]: words of the sentences before j
    if floor <= 0:
        last = 0
        while (last + 1 < len(sizes) and upto[last + 2] <= max_words
               and dates[last + 1] == dates[0]):
            last += 1
        return 0, last
    first = last = ranked[0][1]
    # the run of sentences said on the best one's day, up to any sentence already served:
    # the passage never leaves it
    day_start, day_end = first, last
    while (day_start > 0 and dates[day_start - 1] == dates[first]
           and day_start - 1 not in blocked):
        day_start -= 1
    while (day_end + 1 < len(dates) and dates[day_end + 1] == dates[first]
           and day_end + 1 not in blocked):
        day_end += 1
    for weight, i in ranked[1:]:
        if weight < floor:
            break
        lo, hi = min(first, i), max(last, i)
        if day_start <= lo and hi <= day_end and upto[hi + 1] - upto[lo] <= max_words:
            first, last = lo, hi
    return first, last


@dataclass(frozen=True)
class _Scored:
    """What every passage of one entry is cut from: its dated sentences, their term bags,
    scores (lexical + anchor) best first, and word counts."""

    sentences: list[tuple[str, str | None]]
    bags: list[set[str]]
    scores: list[tuple[float, int]]
    ranked: list[tuple[float, int]]
    sizes: list[int]


def _score(content: str, query: str, date: str | None, anchors: Sequence[str]) -> _Scored:
    sentences = dated_sentences(content, date)
    wanted = terms(query)
    bags = [terms(text) for text, _ in sentences]
    n = len(sentences)
    df = Counter(term for bag in bags for term in bag & wanted)
    # rarer terms weigh more; ties are broken towards later sentences below
    scores = [(sum(math.log(1 + n / df[term]) for term in wanted & bag), i)
              for i, bag in enumerate(bags)]
    if anchors and ANCHOR_WEIGHT > 0 and scores:
        scale = ANCHOR_WEIGHT * (max(score for score, _ in scores) or 1.0)
        scores = [(score + scale * value, i)
                  for (score, i), value in zip(scores, _anchor_values(bags, anchors),
                                               strict=True)]
    ranked = sorted(scores, key=lambda s: (-s[0], -s[1]))
    return _Scored(sentences, bags, scores, ranked, [len(text.split()) for text, _ in sentences])


def _cut(scored: _Scored, first: int, last: int, max_words: int) -> Snippet:
    chosen = list(range(first, last + 1))
    best = max(chosen, key=lambda i: scored.scores[i])
    text = " ".join(scored.sentences[i][0] for i in chosen)
    if scored.sizes[first] > 2 * max_words:  # a runaway sentence (unpunctuated text): its opening
        text = " ".join(text.split()[:max_words]) + " …"
    return Snippet(text, scored.sentences[best][1], tuple(chosen))


def make_snippet(content: str, query: str, *, date: str | None = None,
                 max_words: int = SNIPPET_WORDS, anchors: Sequence[str] = ()) -> Snippet:
    """The best passage of ``content`` for ``query`` (see the module docstring)."""
    scored = _score(content, query, date, anchors)
    if not scored.sentences:
        return Snippet("", date, ())
    first, last = _passage(scored.ranked, scored.sizes, max_words,
                           RELEVANT_SHARE * max(scored.ranked[0][0], 0.0),
                           [day for _, day in scored.sentences])
    return _cut(scored, first, last, max_words)


def _stands_for(bags: list[set[str]], anchor: str) -> int | None:
    """The sentence that states ``anchor`` (the :data:`ANCHOR_OVERLAP` rule), the one sharing
    most of its terms (ties: the later); None when no sentence does."""
    wanted = terms(anchor)
    best: tuple[int, int] | None = None
    for i, bag in enumerate(bags):
        shared = len(bag & wanted)
        if (shared and shared >= ANCHOR_OVERLAP * min(len(bag), len(wanted))
                and (best is None or shared >= best[0])):
            best = (shared, i)
    return None if best is None else best[1]


def make_passages(content: str, query: str, *, date: str | None = None,
                  max_words: int = SNIPPET_WORDS, anchors: Sequence[str] = (),
                  snippet_anchors: int | None = None, limit: int = 1,
                  ) -> tuple[Snippet, list[Passage]]:
    """The best passage of ``content`` (exactly :func:`make_snippet` with the first
    ``snippet_anchors`` anchors, default all) and up to ``limit - 1`` further ones, in the
    order of the anchors they open on (best first).

    A further passage opens on the sentence that stands for an anchor none of the passages
    so far holds, and widens, like the first, to relevant sentences of its day that fit
    ``max_words``, never into a sentence another passage holds. An anchor no sentence states
    opens nothing. Passages never share a sentence, so the words they add are new words."""
    head = anchors if snippet_anchors is None else anchors[:snippet_anchors]
    first = make_snippet(content, query, date=date, max_words=max_words, anchors=head)
    if limit <= 1 or not anchors or not first.sentences:
        return first, []
    scored = _score(content, query, date, anchors)
    used = set(first.sentences)
    dates = [day for _, day in scored.sentences]
    more: list[Passage] = []
    for index, anchor in enumerate(anchors):
        if len(more) + 1 >= limit:
            break
        seed = _stands_for(scored.bags, anchor)
        if seed is None or seed in used:
            continue
        ranked = [(scored.scores[seed][0], seed)] + [
            s for s in scored.ranked if s[1] != seed and s[1] not in used]
        lo, hi = _passage(ranked, scored.sizes, max_words,
                          RELEVANT_SHARE * max(ranked[0][0], 1e-9), dates, frozenset(used))
        snip = _cut(scored, lo, hi, max_words)
        used.update(snip.sentences)
        more.append(Passage(snip, index))
    return first, more


__all__ = ["SNIPPET_WORDS", "Passage", "Snippet", "dated_sentences", "make_passages",
           "make_snippet", "terms"]
