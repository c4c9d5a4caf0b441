"""Typed read path: does a question ask for a pattern or for an instance?

A *pattern* question asks what is generally true across many records ("what usually breaks
our deploys?", "how does Ann tend to react to delays?"): it is best answered by insights, so the
briefing puts insights before Episodes. An *instance* question asks about one occurrence ("when
did the last deploy fail?", "what did Ann say on Monday?"): it wants the source Episode with its
date, so Episodes and facts come first.

The rule (documented in docs/briefing.md, tested on a labelled table):

1. Each cue phrase below (whole words, plural too) that occurs in the lower-cased question
   scores one point for its side; a date, a weekday, a clock time or a relative day
   ("yesterday", "last week") scores one point for *instance*.
2. More pattern points than instance points → ``pattern``; otherwise → ``instance`` (a tie or
   no cue at all falls back to the evidence first: an insight can be found from its Episodes,
   not the other way round).
"""

from __future__ import annotations

import re
from typing import Literal

Route = Literal["pattern", "instance"]

PATTERN_CUES: tuple[str, ...] = (
    "usually", "always", "never", "often", "typically", "generally", "in general", "tend to",
    "tends to", "pattern", "habit", "recurring", "recur", "keeps", "keep failing", "every time",
    "each time", "whenever", "how often", "most of the time", "overall", "trend", "lesson",
    "learned", "what works", "what worked", "best way", "what kind of", "what sort of",
    "common", "commonly", "frequent", "repeatedly", "again and again", "in the long run",
    "over time", "prefer", "preference", "what does .* like", "why do .* keep",
    "what causes", "root cause", "rule of thumb", "heuristic", "across",
)
INSTANCE_CUES: tuple[str, ...] = (
    "when did", "when was", "what date", "which date", "what day", "which day", "what time",
    "last time", "the last", "first time", "the first", "what happened", "did .* on",
    "on the", "who ", "where did", "where was", "how many", "how much", "which one",
    "what was the", "what did", "exact", "specific", "that time", "this morning",
    "tonight", "ago",
)
_DATE_RE = re.compile(
    r"\b(\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}(/\d{2,4})?|\d{1,2}:\d{2}|yesterday|today|tomorrow|"
    r"last (week|month|night|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
    r"(on )?(monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
    r"(january|february|march|april|may|june|july|august|september|october|november|"
    r"december)( \d{1,2})?)\b"
)


def _compile(cues: tuple[str, ...]) -> list[re.Pattern[str]]:
    # whole words; a cue also matches its plural ("lesson" → "lessons")
    return [re.compile(r"\b" + cue.strip() + r"s?\b") for cue in cues]


_PATTERN = _compile(PATTERN_CUES)
_INSTANCE = _compile(INSTANCE_CUES)


def scores(question: str) -> tuple[int, int]:
    """(pattern points, instance points) of ``question`` under the rule above."""
    text = " ".join(question.lower().split())
    pattern = sum(1 for cue in _PATTERN if cue.search(text))
    instance = sum(1 for cue in _INSTANCE if cue.search(text))
    instance += len(_DATE_RE.findall(text))
    return pattern, instance


def route(question: str) -> Route:
    """``"pattern"`` (insights first) or ``"instance"`` (Episodes first) for ``question``."""
    pattern, instance = scores(question)
    return "pattern" if pattern > instance else "instance"
