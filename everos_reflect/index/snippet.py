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

    A narrative's ``YYYY-MM-DD:`` line dates its sentences; its "Current state" paragraph and
    undated text take ``default_date`` (the entry's own date)."""
    return [(s.text, s.day if s.day is not None and not s.state else default_date)
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
             floor: float, dates: Sequence[str | None]) -> tuple[int, int]:
    """First and last sentence of the passage: it opens on the best sentence and widens to
    each next-best relevant one (score ≥ ``floor``) whose span, with every sentence between,
    still fits ``max_words`` and was said on the best sentence's day (``dates``), so the one
    date a snippet carries is true of all of it. With nothing relevant (``floor`` 0) it is
    the entry's opening."""
    upto = [0, *accumulate(sizes)]  # upto[j]: words of the sentences before j
    if floor <= 0:
        last = 0
        while (last + 1 < len(sizes) and upto[last + 2] <= max_words
               and dates[last + 1] == dates[0]):
            last += 1
        return 0, last
    first = last = ranked[0][1]
    # the run of sentences said on the best one's day: the passage never leaves it
    day_start, day_end = first, last
    while day_start > 0 and dates[day_start - 1] == dates[first]:
        day_start -= 1
    while day_end + 1 < len(dates) and dates[day_end + 1] == dates[first]:
        day_end += 1
    for weight, i in ranked[1:]:
        if weight < floor:
            break
        lo, hi = min(first, i), max(last, i)
        if day_start <= lo and hi <= day_end and upto[hi + 1] - upto[lo] <= max_words:
            first, last = lo, hi
    return first, last


def make_snippet(content: str, query: str, *, date: str | None = None,
                 max_words: int = SNIPPET_WORDS, anchors: Sequence[str] = ()) -> Snippet:
    """The best passage of ``content`` for ``query`` (see the module docstring)."""
    sentences = dated_sentences(content, date)
    if not sentences:
        return Snippet("", date, ())
    wanted = terms(query)
    bags = [terms(text) for text, _ in sentences]
    n = len(sentences)
    df = Counter(term for bag in bags for term in bag & wanted)
    # rarer terms weigh more; ties are broken towards later sentences below
    scores = [(sum(math.log(1 + n / df[term]) for term in wanted & bag), i)
              for i, bag in enumerate(bags)]
    if anchors and ANCHOR_WEIGHT > 0:
        scale = ANCHOR_WEIGHT * (max(score for score, _ in scores) or 1.0)
        scores = [(score + scale * value, i)
                  for (score, i), value in zip(scores, _anchor_values(bags, anchors),
                                               strict=True)]
    ranked = sorted(scores, key=lambda s: (-s[0], -s[1]))
    sizes = [len(text.split()) for text, _ in sentences]
    first, last = _passage(ranked, sizes, max_words, RELEVANT_SHARE * max(ranked[0][0], 0.0),
                           [day for _, day in sentences])
    chosen = list(range(first, last + 1))
    best = max(chosen, key=lambda i: scores[i])
    text = " ".join(sentences[i][0] for i in chosen)
    if sizes[first] > 2 * max_words:  # a runaway sentence (unpunctuated text): its opening
        text = " ".join(text.split()[:max_words]) + " …"
    return Snippet(text, sentences[best][1], tuple(chosen))


__all__ = ["SNIPPET_WORDS", "Snippet", "dated_sentences", "make_snippet", "terms"]
