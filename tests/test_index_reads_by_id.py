"""Reads of a user's entries by id (``index/reads.py``) take the primary key, however many
ids they ask for, and return exactly the rows asked for.

SQLite picks the ``(user, kind)`` index for ``id IN (...) AND kind=...`` from four ids on and
reads every entry of that kind the user has to find a few (one owner's thousands of facts
for a Reflection pass's dozens)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from everos_reflect.index import db as dbmod
from everos_reflect.index import reads
from everos_reflect.model import UserRef, text_hash

REF = UserRef.of("u_reads")
MODEL = "minilm"


def _conn(tmp_path: Path) -> sqlite3.Connection:
    return dbmod.connect(tmp_path)


def _put(conn: sqlite3.Connection, ref: UserRef, entry_id: str, kind: str, text: str,
         embedded: str, model: str | None = MODEL) -> None:
    conn.execute(
        "INSERT INTO entries (app_id, project_id, user_id, id, kind, path, text, content_hash, "
        "text_hash, embed_model) VALUES (?, ?, ?, ?, ?, 'p.md', ?, 'c', ?, ?)",
        (ref.app, ref.project, ref.user_id, entry_id, kind, text, text_hash(embedded), model))


@pytest.mark.parametrize("size", [1, 2, 4, 8, 64, 600])
def test_facts_embedded_as_stated_reads_by_primary_key(tmp_path: Path, size: int) -> None:
    conn = _conn(tmp_path)
    plans: list[str] = []
    real = conn.execute

    class Spy:
        def execute(self, sql: str, params: tuple[object, ...] = ()) -> sqlite3.Cursor:
            plans.append(" ".join(r[3] for r in real("EXPLAIN QUERY PLAN " + sql, params)))
            return real(sql, params)

    reads.facts_embedded_as_stated(Spy(), REF, [f"af_{i}" for i in range(size)],  # type: ignore[arg-type]
                                   MODEL)
    assert plans
    for plan in plans:
        assert "sqlite_autoindex_entries_1" in plan and "entries_by_user_kind" not in plan


def test_facts_embedded_as_stated_keeps_only_this_users_facts_embedded_as_stated(
        tmp_path: Path) -> None:
    conn = _conn(tmp_path)
    other = UserRef.of("u_other")
    _put(conn, REF, "af_same", "atomic_fact", "Noor likes tea.", "Noor likes tea.")
    _put(conn, REF, "af_edited", "atomic_fact", "Noor likes coffee.", "Noor likes tea.")
    _put(conn, REF, "af_other_model", "atomic_fact", "Noor runs.", "Noor runs.", "hash-64")
    _put(conn, REF, "af_unembedded", "atomic_fact", "Noor sings.", "Noor sings.", None)
    _put(conn, REF, "ep_same", "episode", "Noor swims.", "Noor swims.")
    _put(conn, other, "af_theirs", "atomic_fact", "Sam reads.", "Sam reads.")
    for i in range(700):  # more facts than one statement's chunk, some asked for
        _put(conn, REF, f"af_bulk_{i:04d}", "atomic_fact", f"fact {i}", f"fact {i}")
    asked = ["af_same", "af_edited", "af_other_model", "af_unembedded", "ep_same", "af_theirs",
             "af_missing", *[f"af_bulk_{i:04d}" for i in range(0, 700, 3)]]
    got = reads.facts_embedded_as_stated(conn, REF, asked, MODEL)
    assert got == {"af_same", *[f"af_bulk_{i:04d}" for i in range(0, 700, 3)]}
    assert reads.facts_embedded_as_stated(conn, REF, [], MODEL) == set()
    # more ids than a build with SQLite's smallest parameter limit takes in one statement
    conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)
    many = [f"af_bulk_x{i}" for i in range(2_000)] + ["af_same"]
    assert reads.facts_embedded_as_stated(conn, REF, many, MODEL) == {"af_same"}
