"""Read-only opens of ``system.db`` (``add``'s id watermark, ``status``, the merge journal
check) work for a root whose path holds ``#``, ``?`` or ``%``: written into a ``file:`` URI
unescaped, these ended the path or started an escape, so no database (or another one) was
opened and each reader went on as if the root had no index."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.index import db as dbmod
from everos_reflect.index import merge_journal
from tests.test_id_watermark import DAY, cite_then_delete_by_hand


@pytest.fixture(params=["notes#2", "what?", "100%41"])
def odd_root(request: pytest.FixtureRequest, tmp_path: Path,
             monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    root = tmp_path / request.param / "root"
    (root / ".index").mkdir(parents=True)
    return root


def test_add_allocates_past_the_index_watermark(odd_root: Path) -> None:
    cite_then_delete_by_hand(odd_root)  # ep_20260907_0001 cited, then deleted by hand
    result = CliRunner().invoke(cli, ["add", "--root", str(odd_root), "--user", "u_andrew",
                                      "--subject", "Milk", "--content", "Andrew bought milk.",
                                      "--timestamp", DAY])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "ep_20260907_0002"


def test_status_reads_the_index(odd_root: Path) -> None:
    cite_then_delete_by_hand(odd_root)
    result = CliRunner().invoke(cli, ["status", "--root", str(odd_root), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["counts_from"] == "index"
    assert data["index"] is not None and data["merges"] is not None


def test_the_merge_journal_check_sees_its_rows(odd_root: Path) -> None:
    cite_then_delete_by_hand(odd_root)
    assert not merge_journal.has_rows(odd_root)
    conn = sqlite3.connect(dbmod.db_path(odd_root))
    try:  # a merge interrupted mid-commit leaves a row: every column filled, as a stand-in
        notnull = sorted(r[1] for r in conn.execute("PRAGMA table_info(merge_journal)") if r[3])
        conn.execute(f"INSERT INTO merge_journal ({', '.join(notnull)}) VALUES "
                     f"({', '.join('?' for _ in notnull)})", ["x"] * len(notnull))
        conn.commit()
    finally:
        conn.close()
    assert merge_journal.has_rows(odd_root)
