"""Daily-log Markdown: the single source of truth.

``parser`` reads text into a :class:`~everos_reflect.model.DailyLog` (pure, lenient), ``writer``
makes minimal pure text edits, and :class:`MarkdownStore` owns the files (layout, locks, atomic
writes).
"""

from everos_reflect.markdown.parser import parse_log
from everos_reflect.markdown.store import MarkdownStore

__all__ = ["MarkdownStore", "parse_log"]
