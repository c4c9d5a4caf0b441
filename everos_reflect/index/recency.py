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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Protocol, TypeVar

import numpy as np


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


def owner(hit: Ranked) -> tuple[str, str, str, str]:
    """What two hits must share to be versions of one fact: the user and the kind."""
    return (hit.app_id, hit.project_id, hit.user_id, hit.kind)


def key(hit: Ranked) -> tuple[str, str, str, str, str]:
    """The hit's key in the ``vectors`` mapping: its owner and id."""
    return (*owner(hit), hit.id)


def latest_first(hits: Sequence[H], vectors: Mapping[tuple[str, str, str, str, str], np.ndarray],
                 *, threshold: float) -> list[H]:
    """``hits`` (best first) with every later version moved just above the earliest-ranked
    version of it; its score is raised to that hit's so scores stay non-increasing.

    ``vectors`` maps ``(*owner(hit), hit.id)`` to a unit vector; hits without one keep their
    place. Each hit moves at most once per earlier hit, so the loop ends (O(n²) for the n ≤ 100
    hits of one search).
    """
    order = list(hits)
    moved = True
    guard = len(order) ** 2 + 1
    while moved and guard > 0:
        moved = False
        guard -= 1
        for j, newer in enumerate(order):
            vj = vectors.get(key(newer))
            if vj is None or _when(newer) is None:
                continue
            target = next((i for i, older in enumerate(order[:j])
                           if _supersedes(newer, older, vj, vectors, threshold)), None)
            if target is not None:
                order.pop(j)
                newer.score = max(newer.score, order[target].score)
                order.insert(target, newer)
                moved = True
                break
    return order


def _supersedes(newer: Ranked, older: Ranked, vec: np.ndarray,
                vectors: Mapping[tuple[str, str, str, str, str], np.ndarray],
                threshold: float) -> bool:
    if owner(newer) != owner(older):
        return False
    a, b = _when(newer), _when(older)
    if a is None or b is None or a <= b:
        return False
    other = vectors.get(key(older))
    return other is not None and float(np.dot(vec, other)) >= threshold


def _when(hit: Ranked) -> datetime | None:
    """The hit's timestamp as an aware datetime (naive = UTC); None when absent or unreadable."""
    try:
        when = datetime.fromisoformat(hit.timestamp) if hit.timestamp else None
    except ValueError:
        return None
    if when is not None and when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when


__all__ = ["key", "latest_first", "owner"]
