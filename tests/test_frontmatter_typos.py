"""A typo in a log's frontmatter `type` or `date` where the file name says it: the log is read,
with a warning, and an index that left it out before the upgrade reads it again."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from everos_reflect.index import db as dbmod
from everos_reflect.index.sync import Indexer
from everos_reflect.lint import lint_report
from everos_reflect.llm.extractive import ExtractiveLLM
from everos_reflect.runtime import Runtime
from tests.reflect_fixtures import ANDREW, add_episode, make_runtime


def _typo_root(tmp_path: Path) -> tuple[Runtime, str, Path]:
    rt = make_runtime(tmp_path, ExtractiveLLM())
    ep = add_episode(rt, ANDREW, "2026-07-03T09:00:00+00:00", "Climbing",
                     "Andrew boulders twice a week in Denver.")
    path = rt.store.path_for_id(ANDREW, ep.id)
    path.write_text(path.read_text().replace("date: '2026-07-03'", "date: '2026-07-33'"))
    return rt, ep.id, path


def _indexed_ids(root: Path) -> set[str]:
    conn = sqlite3.connect(dbmod.db_path(root))
    try:
        return {r[0] for r in conn.execute("SELECT id FROM entries")}
    finally:
        conn.close()


def test_the_log_is_indexed_and_lint_warns(tmp_path: Path) -> None:
    rt, ep_id, path = _typo_root(tmp_path)
    try:
        Indexer(rt).scan()
        assert ep_id in _indexed_ids(tmp_path)
    finally:
        rt.close()
    report = lint_report(tmp_path)
    assert report["problems"] == [{
        "file": rt.store.rel(path), "line": 5, "severity": "warning",
        "message": "unreadable date '2026-07-33' (read as 2026-07-03, as the file name says)"}]


def test_an_index_that_left_the_log_out_reads_it_again(tmp_path: Path) -> None:
    rt, ep_id, path = _typo_root(tmp_path)
    Indexer(rt).scan()
    rt.close()
    rel = rt.store.rel(path)
    conn = sqlite3.connect(dbmod.db_path(tmp_path))  # as an index built before left it
    fatal = [{"path": rel, "line": 5, "message": "unreadable date '2026-07-33'",
              "severity": "fatal"}]
    conn.execute("UPDATE files SET problems = ? WHERE path = ?", (json.dumps(fatal), rel))
    conn.execute("DELETE FROM entries WHERE path = ?", (rel,))
    conn.execute("DELETE FROM schema_migrations WHERE name = '0019_frontmatter_typos_read'")
    conn.commit()
    conn.close()

    rt = make_runtime(tmp_path, ExtractiveLLM())
    try:
        Indexer(rt).scan()  # migrates first: the log is read again
        assert ep_id in _indexed_ids(tmp_path)
    finally:
        rt.close()
