"""Latest version first: a superseded statement never ranks above its replacement.

Two live entries of one user that say nearly the same thing on different days ("Sam drives a
Honda Civic" in March, "Sam now drives a Tesla" in June) are versions of one fact; a question
about the state ("what does Sam drive?") must read the newer one first. Similarity to the
query cannot decide that: the older wording often matches the question better. So after the
search has ranked its hits, each hit that is a *later version* of a hit ranked above it moves
up to just before that hit. Every hit stays in the result (the older one is still the answer
to "what did Sam drive before?"); only their order changes.

"Versions" is judged on the stored vectors: same user, same kind, cosine ≥ ``threshold``, and
a strictly later timestamp. Pure: the caller supplies the vectors.

The threshold (:data:`RECENCY_COSINE`) is stricter than the extractive merge's version
threshold (0.75) on purpose. Whole Episodes of one person are often that close without being
versions of one fact (7 % of same-user LoCoMo Episode pairs are ≥ 0.75), and at 0.75 the rule
pulled later sessions above the best hit: recall within 200 words fell 14 points on LoCoMo
conversations 0–4 (before any merge). At 0.85 (0.4 % of pairs) that loss is 0.4 point while the
latest state of a story still ranks first in 29 of 44 calibration stories instead of 21
(``bench/state_stories.py``; figures from the calibration halves only).

A new version often says something its old one does not ("Sam drives a Honda Civic" / "Sam
sold the Civic and bought a Tesla": cosine well under the threshold), so given the hits' texts
the offline merge's version join is asked too
(:func:`~everos_reflect.llm.extractive.tells_newer_version`, words alone, deterministic): a
later hit whose sentence tells a change of a fact an earlier hit states moves above it, at
any cosine. Where the words alone cannot tell and each of the two texts is one sentence
(so their stored cosine is their sentences' cosine), the pair is read as the merge reads two
sentences of a cluster, with that cosine ("Nina is vegetarian." / "Nina is vegan now.", cosine
0.83), and a sentence telling a state holds again ("Omar reads paper books again.") is newer
than the same subject's earlier statements of that state and of the one it leaves
(:func:`~everos_reflect.llm.extractive.newer_by_words_and_cosine`). Reading words costs far
more than a dot product, so only the first
:data:`TEXT_VERSION_HITS` hits of each owner are read, each up to
:data:`TEXT_VERSION_CHARS` characters (``bench/latest_first_cost.py``: a search of 100 hits
of 256 KiB each, every pair read).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Protocol, TypeVar

import numpy as np

from everos_reflect.llm.extractive import newer_by_words_and_cosine


class Ranked(Protocol):
    id: str
    user_id: str
    app_id: str
    project_id: str
    kind: str
    timestamp: str | None
    score: float


H = TypeVar("H", bound=Ranked)

#: Cosine of two hits' stored vectors at which the later one counts as a new version.
RECENCY_COSINE = 0.85
#: Hits of each owner, the best first, whose texts the version join reads (a search returns
#: at most 100; a state question's versions are among its first few).
TEXT_VERSION_HITS = 10
#: Characters of a hit's text the version join reads (an entry may hold 256 KiB).
TEXT_VERSION_CHARS = 2000

Key = tuple[str, str, str, str, str]


def owner(hit: Ranked) -> tuple[str, str, str, str]:
    """What two hits must share to be versions of one fact: the user and the kind."""
    return (hit.app_id, hit.project_id, hit.user_id, hit.kind)


def key(hit: Ranked) -> tuple[str, str, str, str, str]:
    """The hit's key in the ``vectors`` mapping: its owner and id."""
    return (*owner(hit), hit.id)


def latest_first(hits: Sequence[H], vectors: Mapping[Key, np.ndarray], *, threshold: float,
                 texts: Mapping[Key, str] | None = None) -> list[H]:
    """``hits`` (best first) with every later version moved just above the earliest-ranked
    version of it; its score is raised to that hit's so scores stay non-increasing.

    ``vectors`` maps ``(*owner(hit), hit.id)`` to a unit vector; hits without one keep their
    place. ``texts`` (same keys) lets the version join read the first hits' words as well
    (see the module docstring). Each pair is judged once; each hit moves at most once per
    earlier hit, so the loop ends.
    """
    order = list(hits)
    judge = _Judge(order, vectors, threshold, _readable(order, texts) if texts else {})
    moved = True
    guard = len(order) ** 2 + 1
    while moved and guard > 0:
        moved = False
        guard -= 1
        for j, newer in enumerate(order):
            if not judge.may_be_newer(newer):
                continue
            target = next((i for i, older in enumerate(order[:j])
                           if judge.supersedes(newer, older)), None)
            if target is not None:
                order.pop(j)
                newer.score = max(newer.score, order[target].score)
                order.insert(target, newer)
                moved = True
                break
    return order


def _readable(hits: Sequence[Ranked], texts: Mapping[Key, str]) -> dict[Key, str]:
    """The texts the version join reads: of each owner's first :data:`TEXT_VERSION_HITS`
    hits, the first :data:`TEXT_VERSION_CHARS` characters."""
    seen: dict[tuple[str, str, str, str], int] = {}
    kept: dict[Key, str] = {}
    for hit in hits:
        n = seen.get(owner(hit), 0)
        seen[owner(hit)] = n + 1
        if n < TEXT_VERSION_HITS and (text := texts.get(key(hit))):
            kept[key(hit)] = text[:TEXT_VERSION_CHARS]
    return kept


class _Judge:
    """Is one hit a later version of another: each hit's date read once, each pair judged
    once (the ranking loop asks a pair again after every move)."""

    def __init__(self, hits: Sequence[Ranked], vectors: Mapping[Key, np.ndarray],
                 threshold: float, texts: Mapping[Key, str]) -> None:
        self._vectors = vectors
        self._threshold = threshold
        self._texts = texts
        self._when = {key(h): _when(h) for h in hits}
        self._pairs: dict[tuple[Key, Key], bool] = {}

    def may_be_newer(self, hit: Ranked) -> bool:
        """Can ``hit`` be any hit's later version: it has a date, and a vector or a text."""
        k = key(hit)
        return self._when.get(k) is not None and (k in self._vectors or k in self._texts)

    def supersedes(self, newer: Ranked, older: Ranked) -> bool:
        """Is ``newer`` a later version of ``older``: same owner, strictly later, and their
        vectors at :data:`RECENCY_COSINE` or more, or their words (with that cosine, for two
        one-sentence texts) read as versions."""
        pair = (key(newer), key(older))
        found = self._pairs.get(pair)
        if found is None:
            found = self._pairs[pair] = self._judged(newer, older)
        return found

    def _judged(self, newer: Ranked, older: Ranked) -> bool:
        if owner(newer) != owner(older):
            return False
        a, b = self._when.get(key(newer)), self._when.get(key(older))
        if a is None or b is None or a <= b:
            return False
        vec, other = self._vectors.get(key(newer)), self._vectors.get(key(older))
        cosine = None
        if vec is not None and other is not None:
            cosine = float(np.dot(vec, other))
            if cosine >= self._threshold:
                return True
        return self._words_say(key(older), key(newer), cosine)

    def _words_say(self, older: Key, newer: Key, cosine: float | None) -> bool:
        old, new = self._texts.get(older), self._texts.get(newer)
        if old is None or new is None:
            return False
        return newer_by_words_and_cosine(old, new, cosine)


def _when(hit: Ranked) -> datetime | None:
    """The hit's timestamp as an aware datetime (naive = UTC); None when absent or unreadable."""
    try:
        when = datetime.fromisoformat(hit.timestamp) if hit.timestamp else None
    except ValueError:
        return None
    if when is not None and when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when


__all__ = ["RECENCY_COSINE", "TEXT_VERSION_CHARS", "TEXT_VERSION_HITS", "key", "latest_first",
           "owner"]
