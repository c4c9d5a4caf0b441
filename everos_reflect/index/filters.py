"""Filters over the vector tables, built from validated names only.

Kept apart from :mod:`everos_reflect.index.vectors` so that code which only builds a filter
(search, the briefing) does not import LanceDB: ``import lancedb`` takes ~0.5 s, and every CLI
command paid it at start-up, ``--help`` and ``status`` included.
"""

from __future__ import annotations

from everos_reflect.errors import EverosError
from everos_reflect.model import validate_name

__all__ = ["sql_str", "where_clause"]


def sql_str(value: object) -> str:
    """A SQL string literal: quotes doubled, so no value can end the literal early."""
    text = str(value)
    if "\x00" in text:
        raise EverosError("NUL character in a filter value")
    return "'" + text.replace("'", "''") + "'"


def where_clause(
    *,
    app_id: str | None = None,
    project_id: str | None = None,
    user_id: str | None = None,
    include_deprecated: bool = True,
) -> str | None:
    """A filter over tenant/user/deprecation built only from validated names."""
    parts = []
    for column, value in (("app_id", app_id), ("project_id", project_id), ("user_id", user_id)):
        if value is not None:
            parts.append(f"{column} = {sql_str(validate_name(value, column))}")
    if not include_deprecated:
        parts.append("deprecated_by IS NULL")
    return " AND ".join(parts) or None
