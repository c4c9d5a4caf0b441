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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

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
    "evidence_in",
    "normalise",
    "observation_evidence",
    "percentile",
    "recall",
    "within_budget",
]
