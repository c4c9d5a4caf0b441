"""What the sync and watcher tests share besides conftest's ``rt``: the ids the index holds."""

from __future__ import annotations

from everos_reflect.runtime import Runtime


def indexed_ids(rt: Runtime) -> set[str]:
    """Every entry id the SQLite index holds, live or archived."""
    return {r[0] for r in rt.db().execute("SELECT id FROM entries")}
