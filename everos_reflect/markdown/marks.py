"""Archive marks (``deprecated_entries``) read against their own log: the problems ``lint``,
the index and ``status`` word alike. Pure: a parsed log in, problems out."""

from __future__ import annotations

from everos_reflect.markdown.parser import lead_end
from everos_reflect.model import DailyLog, Diagnostic


def frontmatter_line(text: str, key: str) -> int:
    """Line of ``key:`` inside a file's leading frontmatter, else 1 (the file's start): where
    a ``deprecated_entries`` mark of ``key`` is fixed. Lines end at ``\n``, as the parser
    counts them: ``str.splitlines`` also ended one at a U+2028 or a form feed, and named a
    line further down than the one to fix."""
    lines = text.split("\n")
    opening = lead_end(text)[1]  # blank lines before the opening '---' (the parser's rule)
    for number, line in enumerate(lines[opening + 1 :], opening + 2):
        if line.strip() == "---":
            break
        if line.lstrip().startswith((f"{key}:", f"'{key}':", f'"{key}":')):
            return number
    return 1


def foreign_mark_message(old: str) -> str:
    return f"deprecated_entries: {old} is not an entry of this file"


def foreign_marks(log: DailyLog) -> list[Diagnostic]:
    """A problem per ``deprecated_entries`` key that names no entry of ``log``: it archives
    nothing (a typo, an entry deleted or moved by hand), while the entry meant stays live."""
    own = {entry.id for entry in log.entries}
    return [Diagnostic(log.path, frontmatter_line(log.text, old), foreign_mark_message(old))
            for old in log.deprecated_entries if old not in own]


__all__ = ["foreign_mark_message", "foreign_marks", "frontmatter_line"]
