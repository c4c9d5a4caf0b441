"""What of a merged narrative a briefing keeps when the narrative must be cut to fit.

A narrative tells its topic in time order — one ``YYYY-MM-DD:`` line per day — and ends with
its "Current state" paragraph. Cut at its opening, as any other text is, it kept the oldest
days and dropped the current state: briefed on "pets", Andrew's narrative said "Andrew has no
pets yet" and was cut before "Andrew now has two dogs", the very thing an agent needs.

So a narrative is offered to the packer as parts, each with a rank (:func:`narrative_parts`):
the current state first, then the day the question's words point at (the day of the entry's
best passage for the query, :func:`~everos_reflect.index.snippet.make_snippet`), then the
other days, latest first. The packer keeps whole parts in rank order while they fit and shows
them in the narrative's own order, "…" where days were left out
(:func:`everos_reflect.briefing.pack.cut_parts`); the text is never reworded. An entry that is
no narrative (no dated line, no current state) has no parts and is cut at its opening as
before.
"""

from __future__ import annotations

import re

from everos_reflect.index.snippet import make_snippet, terms
from everos_reflect.llm.extractive import split_sentences

#: A line that opens a part: a day's line, or the current-state label (as the merge writes
#: them, :mod:`everos_reflect.llm.extractive`).
_DAY_LINE = re.compile(r"^\d{4}-\d{2}-\d{2}(?:\s+—|:)\s")
_STATE_LINE = re.compile(r"^(?:Current state\b[^:\n]*:|→)\s")
#: Ranks: the current state, the day the question points at, then the rest by recency.
STATE_RANK = 0
ANSWER_RANK = 1


def _lines(content: str) -> list[str]:
    """``content`` as parts: each paragraph, split again where a line opens a day or the
    current state (a topic paragraph holds one line per day); a hard-wrapped line goes with
    the line it continues."""
    parts: list[str] = []
    for paragraph in re.split(r"\n\s*\n", content.strip()):
        current: list[str] = []
        for line in paragraph.splitlines():
            line = line.strip()
            if not line:
                continue
            if current and (_DAY_LINE.match(line) or _STATE_LINE.match(line)):
                parts.append(" ".join(current))
                current = []
            current.append(line)
        if current:
            parts.append(" ".join(current))
    return parts


def narrative_parts(content: str, query: str, *, date: str | None = None,
                    ) -> tuple[tuple[int, str], ...]:
    """``content``'s parts in its own order, each with the rank the packer keeps it by (lower
    first): the current state, the day of the best passage for ``query``, then the other
    days from the latest back. Empty when ``content`` is no narrative: fewer than two parts,
    or none of them a dated day or a current state."""
    parts = _lines(content)
    if len(parts) < 2 or not any(_DAY_LINE.match(p) or _STATE_LINE.match(p) for p in parts):
        return ()
    answer = _answer_part(parts, content, query, date)
    later = ANSWER_RANK + (answer is not None)
    ranks: dict[int, int] = {}
    for i in range(len(parts) - 1, -1, -1):
        if _STATE_LINE.match(parts[i]):
            ranks[i] = STATE_RANK
        elif i == answer:
            ranks[i] = ANSWER_RANK
        else:
            ranks[i] = later
            later += 1
    return tuple((ranks[i], part) for i, part in enumerate(parts))


def _answer_part(parts: list[str], content: str, query: str, date: str | None) -> int | None:
    """The index of the part holding the first sentence of ``content``'s best passage for
    ``query``; None when no word of the query is in the entry (the passage is then only the
    entry's opening, no answer)."""
    wanted = terms(query)
    lowered = content.lower()
    if not any(term in lowered for term in wanted):  # a term of the entry is in its text
        return None
    snippet = make_snippet(content, query, date=date)
    said = split_sentences(snippet.text)
    if not said or not terms(said[0]) & wanted:
        return None
    first = " ".join(said[0].split())
    for i, part in enumerate(parts):
        if first in " ".join(part.split()):
            return i
    return None


__all__ = ["narrative_parts"]
