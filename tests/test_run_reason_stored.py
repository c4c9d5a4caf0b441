"""Why a run that went fine had nothing to do (``reason``) is stored with its run record
(migration 0023), so ``runs``, ``runs --json`` and ``GET /api/v1/ome/runs`` still say it after
a restart: it was kept in the engine's memory only, and they showed a bare ``ok``. An index of
the earlier shape still opens, its old rows with ``reason: null``."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.embedding import HashEmbedder
from everos_reflect.engine.engine import Engine
from everos_reflect.index import db as dbmod
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.runtime import Runtime
from tests.api_client import ApiClient
from tests.db_support import system_db_at
from tests.reflect_fixtures import make_runtime, seed_pets

IDLE = ("no new Episodes to merge: no cluster of 2 or more live Episodes was formed or "
        "joined by a new Episode since the last merge")


def _idle_run(root: Path) -> str:
    """A merge, then a run with nothing to do; the engine and its runtime then go away (a
    restart). The idle run's id."""
    rt = make_runtime(root, ExtractiveLLM())
    try:
        seed_pets(rt)
        engine = Engine(rt)
        assert engine.trigger("reflect_episodes", force=True).counts["merged"] == 1
        again = engine.trigger("reflect_episodes", force=True)
        assert (again.status, again.reason) == ("ok", IDLE)
        assert again.run_id is not None
        return again.run_id
    finally:
        rt.close()


def test_runs_json_after_a_restart_says_why_a_run_had_nothing_to_do(root: Path) -> None:
    run_id = _idle_run(root)
    result = CliRunner().invoke(cli, ["runs", "--json", "--root", str(root)])
    assert result.exit_code == 0, result.output
    rows = {r["id"]: r for r in json.loads(result.stdout)["runs"]}
    assert rows[run_id]["reason"] == IDLE
    assert [r["reason"] for r in rows.values() if r["id"] != run_id] == [None]  # the merge


def test_runs_text_after_a_restart_says_why_a_run_had_nothing_to_do(root: Path) -> None:
    _idle_run(root)
    result = CliRunner().invoke(cli, ["runs", "--root", str(root)])
    assert result.exit_code == 0, result.output
    assert result.stdout.count(f"    nothing to do: {IDLE}\n") == 1, result.stdout


def test_the_api_after_a_restart_says_why_a_run_had_nothing_to_do(root: Path) -> None:
    run_id = _idle_run(root)
    rt = Runtime(root, embedder=HashEmbedder(16))
    try:
        resp = ApiClient(rt)("GET", "/api/v1/ome/runs")
    finally:
        rt.close()
    assert resp.status_code == 200, resp.text
    rows = {r["id"]: r for r in resp.json()["data"]["runs"]}
    assert rows[run_id]["reason"] == IDLE


def test_an_index_of_the_earlier_shape_opens_and_its_runs_have_no_reason(root: Path) -> None:
    conn = system_db_at(root, "0022_files_read_times")
    with conn:
        conn.execute("INSERT INTO runs(id, strategy, trigger, started_at, finished_at, status) "
                     "VALUES ('run_old', 'reflect_episodes', 'manual', "
                     "'2026-12-01T00:00:00+00:00', '2026-12-01T00:00:01+00:00', 'ok')")
    conn.close()
    result = CliRunner().invoke(cli, ["runs", "--json", "--root", str(root)])
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)["runs"]
    assert (row["id"], row["status"], row["reason"]) == ("run_old", "ok", None)
    opened = dbmod.connect(root)
    try:
        assert dbmod.migrate(opened) == []  # brought forward once, by that command
        names = [r[1] for r in opened.execute("PRAGMA table_info(runs)")]
        assert "reason" in names
    finally:
        opened.close()


def test_a_read_only_index_of_the_earlier_shape_lists_runs_in_the_same_shape(
        root: Path) -> None:
    from everos_reflect.index import runs

    conn = system_db_at(root, "0022_files_read_times")
    with conn:
        conn.execute("INSERT INTO runs(id, strategy, trigger, started_at, status) "
                     "VALUES ('run_old', 'reflect_episodes', 'manual', "
                     "'2026-12-01T00:00:00+00:00', 'ok')")
    conn.close()
    readonly = dbmod.connect(root, readonly=True)  # not migrated: no `reason` column
    try:
        [row] = runs.newest(readonly)
    finally:
        readonly.close()
    assert (row["id"], row["reason"]) == ("run_old", None)
