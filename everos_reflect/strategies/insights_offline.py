"""Offline insights: topics that recur across weeks, found with TF-IDF and stated with counts.

Without a language model nothing may be invented, so the offline method only states what it
can count: a term (word or two-word phrase) that is salient in the owner's live Episodes by
TF-IDF and appears in Episodes of at least ``min_weeks`` different ISO weeks (in UTC, whatever
offset each Episode was written in; its dates are UTC days too) becomes the insight
"'<term>' comes up in N episodes across W weeks (first D1, last D2)", citing those Episodes.
The wording is a template, the numbers and dates are counted, the citations are real.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from everos_reflect.model import Entry

QUESTION = "Which topics keep coming back across weeks?"
#: Different ISO weeks a topic must appear in before it is stated.
MIN_WEEKS = 3
#: Words every agent-memory episode uses; a topic made of them says nothing.
_GENERIC = frozenset({"user", "users", "assistant", "agent", "asked", "said", "told"})


@dataclass(frozen=True)
class Topic:
    term: str
    evidence: list[str]
    count: int
    weeks: int
    first: str
    last: str

    @property
    def question(self) -> str:
        return QUESTION

    @property
    def text(self) -> str:
        return (f"'{self.term}' comes up in {self.count} episodes across {self.weeks} "
                f"weeks (first {self.first}, last {self.last}).")


#: The statement :attr:`Topic.text` makes, read back: its term.
_STATEMENT_RE = re.compile(r"'(?P<term>.+)' comes up in \d+ episodes across \d+ weeks "
                           r"\(first \S+, last \S+\)\.")


def topic_of(text: str) -> str | None:
    """The term an offline insight's text counts (:attr:`Topic.text`), or None for any
    other text (an LLM's insight, or one a person rewrote)."""
    found = _STATEMENT_RE.fullmatch(text.strip())
    return found.group("term") if found else None


def recurring_topics(episodes: Sequence[Entry], *, limit: int = 3, min_weeks: int = MIN_WEEKS,
                     max_evidence: int = 8) -> list[Topic]:
    """Up to ``limit`` recurring topics, most salient first; fewer (or none) when the history
    shows none. Each cites at most ``max_evidence`` Episodes, the most recent ones."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, TfidfVectorizer

    dated = [e for e in episodes if e.timestamp is not None and e.content.strip()]
    if len(dated) < 2:
        return []
    texts = [f"{e.subject}. {e.content}" for e in dated]
    vectorizer = TfidfVectorizer(stop_words=sorted(ENGLISH_STOP_WORDS | _GENERIC),
                                 ngram_range=(1, 2), min_df=2, max_df=0.5,
                                 token_pattern=r"(?u)\b[A-Za-z][A-Za-z0-9_-]{2,}\b")
    try:
        matrix = vectorizer.fit_transform(texts)
    except ValueError:  # nothing survives the filters
        return []
    terms = vectorizer.get_feature_names_out()
    weight = np.asarray(matrix.sum(axis=0)).ravel()
    topics: list[Topic] = []
    covered: list[set[str]] = []
    for col in np.argsort(-weight, kind="stable"):
        rows = matrix[:, col].nonzero()[0]
        hits = sorted((dated[r] for r in rows), key=lambda e: e.timestamp)  # type: ignore[arg-type, return-value]
        weeks = {_utc(e).isocalendar()[:2] for e in hits}
        if len(weeks) < min_weeks:
            continue
        ids = {e.id for e in hits}
        if any(len(ids & seen) >= 0.8 * len(ids) for seen in covered):
            continue  # the same episodes as a stronger topic ("auth" vs "auth refactor")
        covered.append(ids)
        cited = hits[-max_evidence:]
        term = _most_specific(str(terms[col]), set(rows), terms, matrix, weight, texts)
        topics.append(Topic(term, [e.id for e in cited], len(hits), len(weeks),
                            _utc(hits[0]).date().isoformat(),
                            _utc(hits[-1]).date().isoformat()))
        if len(topics) >= limit:
            break
    return topics


def _utc(entry: Entry) -> datetime:
    """An Episode's instant in UTC: its week and day are counted by one rule, UTC ISO weeks
    (as ``status`` counts them, :func:`~everos_reflect.index.reads.live_episode_weeks`). In
    each Episode's own offset, one instant written as Sunday 23:30Z and as Monday 01:30+02:00
    fell in two weeks."""
    return entry.timestamp.astimezone(UTC)  # type: ignore[union-attr]


def _most_specific(term: str, rows: set[int], terms: Sequence[str], matrix: object,
                   weight: np.ndarray, texts: Sequence[str]) -> str:
    """The two-word phrase holding ``term`` that names exactly the same Episodes, if any.

    A single word usually outweighs its phrases by TF-IDF ("test" over "checkout test"), yet the
    phrase says what the Episodes are about; with the same evidence the count stays true. The
    vectorizer pairs words across the stop words it drops ("deploy the kubernetes" gives
    "deploy kubernetes"), so a phrase is taken only where every one of those Episodes says it.
    """
    if " " in term:
        return term
    best, best_weight = term, -1.0
    for col, phrase in enumerate(terms):
        words = phrase.split(" ")
        if len(words) != 2 or words[0] == words[1] or term not in words:
            continue
        if weight[col] <= best_weight or set(matrix[:, col].nonzero()[0]) != rows:  # type: ignore[index]
            continue
        said = re.compile(rf"\b{re.escape(words[0])}\W+{re.escape(words[1])}\b", re.IGNORECASE)
        if all(said.search(texts[r]) for r in rows):
            best, best_weight = str(phrase), float(weight[col])
    return best
