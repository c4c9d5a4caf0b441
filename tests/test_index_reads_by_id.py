"""Reads of a user's entries by id (``index/reads.py``) take the primary key, however many
ids they ask for, and return exactly the rows asked for.

SQLite picks the ``(user, kind)`` index for ``id IN (...) AND kind=...`` from four ids on and
reads every entry of that kind the user has to find a few (one owner's thousands of facts
for a Reflection pass's dozens)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
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
         embedded: str, model: str | None = MODEL, *, parent: str | None = None,
         ts: float | None = None, deprecated_by: str | None = None) -> None:
    conn.execute(
        "INSERT INTO entries (app_id, project_id, user_id, id, kind, path, text, content_hash, "
        "text_hash, embed_model, parent_id, ts, deprecated_by) "
        "VALUES (?, ?, ?, ?, ?, 'p.md', ?, 'c', ?, ?, ?, ?, ?)",
        (ref.app, ref.project, ref.user_id, entry_id, kind, text, text_hash(embedded), model,
         parent, ts, deprecated_by))


class _Spy:
    """A connection that plans each statement it runs (``EXPLAIN QUERY PLAN``) first."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn, self.plans = conn, []

    def execute(self, sql: str, params: Sequence[object] = ()) -> sqlite3.Cursor:
        self.plans.append(" ".join(r[3] for r in self.conn.execute(
            "EXPLAIN QUERY PLAN " + sql, params)))
        return self.conn.execute(sql, params)


@pytest.mark.parametrize("size", [1, 2, 4, 8, 64, 600])
def test_facts_embedded_as_stated_reads_by_primary_key(tmp_path: Path, size: int) -> None:
    spy = _Spy(_conn(tmp_path))
    reads.facts_embedded_as_stated(spy, REF, [f"af_{i}" for i in range(size)],  # type: ignore[arg-type]
                                   MODEL)
    assert spy.plans
    for plan in spy.plans:
        assert "sqlite_autoindex_entries_1" in plan and "entries_by_user_kind" not in plan


@pytest.mark.parametrize("size", [1, 2, 4, 8, 64, 600])
def test_live_facts_of_reads_by_parent(tmp_path: Path, size: int) -> None:
    spy = _Spy(_conn(tmp_path))
    reads.live_facts_of(spy, REF, [f"ep_{i}" for i in range(size)])  # type: ignore[arg-type]
    assert spy.plans
    for plan in spy.plans:
        assert "entries_by_parent" in plan and "entries_by_user_kind" not in plan


def test_live_facts_of_returns_the_live_facts_of_the_parents_oldest_first(
        tmp_path: Path) -> None:
    conn = _conn(tmp_path)
    other = UserRef.of("u_other")
    _put(conn, REF, "af_b", "atomic_fact", "b", "b", parent="ep_1", ts=20.0)
    _put(conn, REF, "af_a", "atomic_fact", "a", "a", parent="ep_1", ts=20.0)
    _put(conn, REF, "af_old", "atomic_fact", "old", "old", parent="ep_2", ts=5.0)
    _put(conn, REF, "af_untimed", "atomic_fact", "untimed", "untimed", parent="ep_2")
    _put(conn, REF, "af_gone", "atomic_fact", "gone", "gone", parent="ep_1", ts=1.0,
         deprecated_by="af_a")
    _put(conn, REF, "ep_child", "episode", "not a fact", "x", parent="ep_1", ts=2.0)
    _put(conn, REF, "af_unasked", "atomic_fact", "unasked", "u", parent="ep_3", ts=3.0)
    _put(conn, other, "af_theirs", "atomic_fact", "theirs", "t", parent="ep_1", ts=4.0)
    for i in range(1_200):  # parents beyond one statement's chunk, in reverse time order
        _put(conn, REF, f"af_bulk_{i:04d}", "atomic_fact", f"bulk {i}", "x",
             parent=f"ep_bulk_{i:04d}", ts=10_000.0 - i)
    expected = [("af_untimed", "ep_2", "untimed"), ("af_old", "ep_2", "old"),
                ("af_a", "ep_1", "a"), ("af_b", "ep_1", "b")]
    assert reads.live_facts_of(conn, REF, ["ep_1", "ep_2", "ep_none"]) == expected
    # more parents than a build with SQLite's smallest parameter limit takes in a statement
    conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)
    bulk = [(f"af_bulk_{i:04d}", f"ep_bulk_{i:04d}", f"bulk {i}") for i in range(1_200)]
    asked = ["ep_1", *[f"ep_bulk_{i:04d}" for i in range(1_200)], "ep_2"]
    assert reads.live_facts_of(conn, REF, asked) == [*expected, *bulk[::-1]]


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


def test_live_entry_ids_answers_past_the_builds_parameter_limit(tmp_path: Path) -> None:
    conn = _conn(tmp_path)
    for i in range(1_200):
        _put(conn, REF, f"ep_{i:04d}", "episode", f"e {i}", f"e {i}",
             deprecated_by="ep_n" if i % 2 else None)
    _put(conn, UserRef.of("u_other"), "ep_0000", "episode", "theirs", "theirs")
    conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)
    asked = [f"ep_{i:04d}" for i in range(1_200)] + ["ep_missing"]
    assert reads.live_entry_ids(conn, REF, asked) == {f"ep_{i:04d}" for i in range(0, 1_200, 2)}
    assert reads.live_entry_ids(conn, REF, []) == set()


def test_status_names_live_sources_of_a_narrative_with_more_sources_than_the_limit(
        tmp_path: Path) -> None:
    """A hand-written ``sources`` list may be long: ``status`` (``index_report``) still
    names the sources left live beside the narrative."""
    from everos_reflect.strategies.consistency import index_report

    conn = _conn(tmp_path)
    sources = [f"ep_{i:04d}" for i in range(1_200)]
    for i, eid in enumerate(sources):
        _put(conn, REF, eid, "episode", f"e {i}", f"e {i}",
             deprecated_by=None if i in (5, 1_100) else "ep_n")
    conn.execute(
        "INSERT INTO entries (app_id, project_id, user_id, id, kind, path, text, content_hash, "
        "text_hash, parent_type, sources) VALUES (?, ?, ?, 'ep_n', 'episode', 'p.md', 'n', "
        "'c', 'h', 'cluster', ?)", (REF.app, REF.project, REF.user_id, json.dumps(sources)))
    conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)
    beside = index_report(conn)["live_beside_sources"]
    assert beside == [{"app_id": REF.app, "project_id": REF.project, "user_id": REF.user_id,
                       "narrative": "ep_n", "live_sources": ["ep_0005", "ep_1100"]}]
