"""The derivation_report audit table (SPEC §10): a named migration, rows readable with sqlite3."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from everos_reflect.index import db as dbmod
from everos_reflect.index.audit import Derivation, list_derivations, record_derivation
from everos_reflect.model import UserRef

SPEC_COLUMNS = {"id", "run_id", "strategy", "app_id", "project_id", "owner_id", "inputs",
                "outputs", "status", "provider", "model", "prompt_tokens",
                "completion_tokens", "duration_ms", "error", "created_at"}


def test_a_blank_database_migrates_to_the_spec_columns(tmp_path: Path) -> None:
    conn = dbmod.connect(tmp_path)
    names = {r[0] for r in conn.execute("SELECT name FROM schema_migrations")}
    assert "0007_derivation_report" in names
    columns = {r[1] for r in conn.execute("PRAGMA table_info(derivation_report)")}
    assert columns >= SPEC_COLUMNS
    assert dbmod.migrate(conn) == []  # applying again does nothing


def test_a_derivation_is_readable_with_plain_sqlite3(tmp_path: Path) -> None:
    conn = dbmod.connect(tmp_path)
    ref = UserRef.of("u1", "a", "p")
    record_derivation(conn, Derivation(
        "reflect_insights", ref, "ok", run_id="run_1", inputs=["ep_20261012_0001"],
        outputs=["in_20261012_0001"], provider="openai", model="m", prompt_tokens=10,
        completion_tokens=5, duration_ms=42))
    record_derivation(conn, Derivation("reflect_insights", ref, "failed", error="boom"))
    raw = sqlite3.connect(dbmod.db_path(tmp_path))
    rows = raw.execute("SELECT strategy, status, outputs, owner_id FROM derivation_report "
                       "ORDER BY created_at").fetchall()
    assert rows == [("reflect_insights", "ok", '["in_20261012_0001"]', "u1"),
                    ("reflect_insights", "failed", "[]", "u1")]
    newest = list_derivations(conn, strategy="reflect_insights", ref=ref, limit=1)
    assert [(r["status"], r["error"], r["outputs"]) for r in newest] == [("failed", "boom", [])]
