"""The offline importance scorer: a transparent 1–10 estimate for an Episode without an LLM.

Generative Agents asks a model "how poignant is this memory, 1 to 10". Offline we cannot judge
poignancy, so this scorer counts observable signs that a memory will matter later, and says
nothing more than that:

- start at 3 (an ordinary exchange);
- +2 if it records a decision, commitment or change of state ("decided", "switched to",
  "from now on", "promised", "moved", "quit", "agreed" ...);
- +2 if it records a failure or incident ("failed", "outage", "revert", "rollback", "bug",
  "broke", "incident", "crash" ...);
- +1 if it states a lasting preference or rule ("always", "never", "prefer", "hates",
  "allergic", "wants" ...);
- +1 if it names a date, a deadline or a number (something checkable later);
- +1 if it is long (≥ 60 words): more happened;
- −1 if it is short small talk (< 12 words and none of the signs above).

Capped to 1..10. Deterministic, language-naive (English cue words), and documented as a
heuristic in docs/insights.md; an LLM score replaces it whenever one is configured.
"""

from __future__ import annotations

import re
from typing import NamedTuple

_DECISION = re.compile(
    r"\b(decid\w*|chose|choos\w*|switch\w*|migrat\w*|from now on|promis\w*|commit\w*|agree\w*|"
    r"moved|moving|quit|resign\w*|hired|fired|adopt\w*|married|divorc\w*|signed|launch\w*|"
    r"starts? (?:a|the|his|her|their)|stopped|plan(?:s|ned)? to)\b", re.IGNORECASE)
_FAILURE = re.compile(
    r"\b(fail\w*|outage|revert\w*|roll ?back\w*|bug\w*|broke\w*|broken|incident\w*|crash\w*|"
    r"error\w*|regress\w*|lost|injur\w*|sick|hospital\w*|accident\w*|emergenc\w*)\b",
    re.IGNORECASE)
_PREFERENCE = re.compile(
    r"\b(always|never|prefer\w*|hates?|loves?|dislikes?|allergic|wants?|insists?|must|"
    r"favou?rite|can't stand)\b", re.IGNORECASE)
_CHECKABLE = re.compile(
    r"\b(\d{1,4}([.,:/-]\d+)*|deadline|monday|tuesday|wednesday|thursday|friday|saturday|"
    r"sunday|january|february|march|april|may|june|july|august|september|october|november|"
    r"december|tomorrow|next week)\b", re.IGNORECASE)
_WORD = re.compile(r"\w+")


def score_importance(text: str) -> int:
    """1–10 from the cues listed in the module docstring."""
    words = len(_WORD.findall(text))
    score = 3
    signs = 0
    for pattern, weight in ((_DECISION, 2), (_FAILURE, 2), (_PREFERENCE, 1)):
        if pattern.search(text):
            score += weight
            signs += 1
    if _CHECKABLE.search(text):
        score += 1
    if words >= 60:
        score += 1
    if words < 12 and not signs:
        score -= 1
    return max(1, min(10, score))


class Scored(NamedTuple):
    """An Episode's importance as written, who scored it (the provider, or ``offline``), and
    why the configured LLM did not (None when it did, or none is configured)."""

    importance: int
    scorer: str
    note: str | None = None


def importance_on_write(llm: object, subject: str, content: str) -> Scored:
    """The importance of a new Episode whose writer gave none, and who scored it.

    By the configured LLM (the ``importance`` task) when it is not the offline provider,
    through its interactive client (one short attempt: a person or an agent is waiting on the
    ``add``); by :func:`score_importance` offline, or when that call fails, with a ``note``
    saying why (an ``add`` never fails, nor waits minutes, because a model is down).
    """
    from everos_reflect.errors import ProviderUnavailable
    from everos_reflect.llm.tasks import NeedsLLM, Record, TaskRequest

    text = f"{subject}: {content}"
    note = None
    if getattr(llm, "provider", "extractive") != "extractive":
        quick = getattr(llm, "interactive", None)
        client = quick() if callable(quick) else llm
        try:
            result = client.run_task(  # type: ignore[attr-defined]
                "importance", TaskRequest(records=(Record("new", "episode", text),)))
            return Scored(int(result.value), str(result.provider))
        except (ProviderUnavailable, NeedsLLM) as exc:
            note = f"importance scored offline: the LLM was not reached or gave no score ({exc})"
    return Scored(score_importance(text), "offline", note)
