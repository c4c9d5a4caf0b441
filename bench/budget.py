"""Recall within a word budget: what a caller gets from search when its context holds B words.

Pure scoring, shared by ``bench/quality.py`` and its tests. An *item* is one search result as
the caller would read it: a list of sentences, each with the evidence it carries (the dia_ids
of the source Episodes the sentence stands for, via sentence-level provenance). Items are taken
in rank order, whole while the running word count stays within B; the item that crosses B is
cut at B and credits only the sentences that fit completely inside the cut. A result list that
returns one giant entry therefore gets credit only for what a caller could actually read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

BUDGETS = (100, 200, 400, 800)


@dataclass(frozen=True)
class Sentence:
    text: str
    evidence: frozenset[str]  # dia_ids the sentence stands for

    @property
    def words(self) -> int:
        return len(self.text.split())


Item = Sequence[Sentence]


def within_budget(items: Iterable[Item], budget: int) -> list[Sentence]:
    """The sentences a caller reads within ``budget`` words (see the module docstring)."""
    read: list[Sentence] = []
    used = 0
    for item in items:
        size = sum(s.words for s in item)
        if used + size <= budget:
            read.extend(item)
            used += size
            continue
        for sentence in item:  # the crossing item: complete sentences inside the cut only
            if used + sentence.words > budget:
                break
            read.append(sentence)
            used += sentence.words
        break
    return read


def evidence_in(sentences: Iterable[Sentence]) -> set[str]:
    found: set[str] = set()
    for s in sentences:
        found |= s.evidence
    return found


def recall(evidence: set[str], found: set[str]) -> float:
    return len(evidence & found) / len(evidence) if evidence else 0.0


_PREFIX_RE = re.compile(r"^(?:\d{4}-\d{2}-\d{2}(?:\s+—|:)\s+)?(?:Current state[^:]*:\s+)?")


def normalise(text: str) -> str:
    """How an observation and a sentence are compared: a narrative's date prefix or label,
    case and spacing do not matter."""
    return " ".join(_PREFIX_RE.sub("", text.strip()).lower().split()).rstrip(".!?")


def observation_evidence(sentences: Iterable[Sentence],
                         observations: dict[str, frozenset[str]]) -> set[str]:
    """Observation-level variant: evidence of the LoCoMo observations whose sentence is among
    the ``sentences`` read (``observations``: normalised observation text -> its dia_ids)."""
    found: set[str] = set()
    for s in sentences:
        found |= observations.get(normalise(s.text), frozenset())
    return found


class StatedEvidence:
    """Statement-level variant: a sentence read credits the LoCoMo observations it *states* —
    those of the source Episodes its provenance names whose cosine to the sentence is at least
    ``threshold`` (an exact restatement always counts) — and only their own dia_ids.

    Entry-level credit (``evidence_in``) gives a sentence the evidence of its whole source
    Episode, so any one short sentence of an Episode earns the Episode's whole session, and a
    shorter snippet earns more per word whatever it says. Here a sentence earns what it says;
    a narrative sentence that folded three restatements still earns all three, since each is
    stated by it. ``vector`` maps a normalised sentence to its unit vector.
    """

    def __init__(self, observations: Sequence[tuple[str, frozenset[str]]],
                 matrix: np.ndarray, vector: Callable[[str], np.ndarray],
                 threshold: float) -> None:
        self.texts = [normalise(text) for text, _ in observations]
        self.ids = [ids for _, ids in observations]
        self.matrix = matrix
        self.vector = vector
        self.threshold = threshold
        self._memo: dict[tuple[str, frozenset[str]], frozenset[str]] = {}

    def of(self, sentence: Sentence) -> frozenset[str]:
        key = (normalise(sentence.text), sentence.evidence)
        found = self._memo.get(key)
        if found is None:
            found = self._stated(*key)
            self._memo[key] = found
        return found

    def _stated(self, text: str, evidence: frozenset[str]) -> frozenset[str]:
        if not evidence or not text:
            return frozenset()
        rows = [j for j, ids in enumerate(self.ids) if ids & evidence]
        if not rows:
            return frozenset()
        cosines = self.matrix[rows] @ self.vector(text)
        found: set[str] = set()
        for j, cosine in zip(rows, cosines, strict=True):
            if cosine >= self.threshold or self.texts[j] == text:
                found |= self.ids[j]
        return frozenset(found)

    def evidence(self, sentences: Iterable[Sentence]) -> set[str]:
        found: set[str] = set()
        for s in sentences:
            found |= self.of(s)
        return found


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return float(ordered[index])


__all__ = [
    "BUDGETS",
    "Item",
    "Sentence",
    "StatedEvidence",
    "evidence_in",
    "normalise",
    "observation_evidence",
    "percentile",
    "recall",
    "within_budget",
]
