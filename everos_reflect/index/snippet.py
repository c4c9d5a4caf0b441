"""The passage of an entry that answers a query: what a caller with a word budget should read.

A narrative can run to hundreds of words while the question needs one sentence of it. Each
search hit therefore carries a ``snippet``: the sentences of the entry that share the most
query terms, in their original order, within ``max_words``, with the date they were said (the
paragraph's ``YYYY-MM-DD:`` prefix of a narrative, else the entry's own date).

Scoring is lexical (query terms with light suffix folding, weighted by how rare they are in the
entry), deterministic and cheap: no model call per hit. The best sentence always comes; others
join while they score at least half as well and fit in ``max_words``. Ties go to the later
sentence, so a question about a changing fact gets its latest version (a narrative's current
state is last). A narrative's topic paragraphs date each line (``YYYY-MM-DD: ...``); every
sentence takes the date of its line.
Pure functions only.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

from everos_reflect.llm.extractive import STOPWORDS, narrative_sentences

#: Words a snippet may hold (plus at most one sentence that starts within the budget).
SNIPPET_WORDS = 60
#: A sentence joins the best one only if it scores at least this share of the best score.
RELEVANT_SHARE = 0.5

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


def make_snippet(content: str, query: str, *, date: str | None = None,
                 max_words: int = SNIPPET_WORDS) -> Snippet:
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
    ranked = sorted(scores, key=lambda s: (-s[0], -s[1]))
    if ranked[0][0] <= 0:  # nothing matches: the entry's opening
        ranked = [(0.0, i) for i in range(n)]
    floor = RELEVANT_SHARE * ranked[0][0]
    chosen: list[int] = []
    words = 0
    for weight, i in ranked:
        size = len(sentences[i][0].split())
        if chosen and (words + size > max_words or (floor > 0 and weight < floor)):
            continue
        chosen.append(i)
        words += size
        if words >= max_words:
            break
    chosen.sort()
    best = max(chosen, key=lambda i: scores[i])
    text = " ".join(sentences[i][0] for i in chosen)
    return Snippet(text, sentences[best][1], tuple(chosen))


__all__ = ["SNIPPET_WORDS", "Snippet", "dated_sentences", "make_snippet", "terms"]
