"""A ``reflection_report`` row whose ``source_members`` is not a JSON list of entry ids (edited
by hand, cut short) is said to be damaged, the same by ``reports --json`` and
``GET /api/v1/ome/reports``: the CLI showed ``[]`` (as if nothing had been merged) and the API
the raw text. Both read the rows through one reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.embedding import HashEmbedder
from everos_reflect.index import db as dbmod
from everos_reflect.runtime import Runtime
from tests.api_client import ApiClient

GOOD = json.dumps(["ep_20261010_0001", "ep_20261010_0002"])


def _audit(root: Path, members: str) -> None:
    """Two rows: a damaged one (``members``, newer) and a sound one."""
    conn = dbmod.connect(root)
    try:
        with dbmod.transaction(conn):
            for n, (text, when) in enumerate([(GOOD, "01"), (members, "02")]):
                conn.execute(
                    "INSERT INTO reflection_report (id, app_id, project_id, owner_id, "
                    "cluster_id, mode, source_count, source_members, merged_entry_id, status, "
                    "created_at) VALUES (?, 'default_app', 'default_project', 'u1', ?, 'init', "
                    "2, ?, ?, 'ok', ?)",
                    (f"rr_{n}", f"cl_{n:012d}", text,
                     f"ep_20261012_000{n}", f"2026-12-01T00:00:{when}+00:00"))
    finally:
        conn.close()


def _cli_rows(root: Path) -> list[dict[str, object]]:
    result = CliRunner().invoke(cli, ["reports", "--json", "--root", str(root)])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["reports"]


def _api_rows(root: Path) -> list[dict[str, object]]:
    rt = Runtime(root, embedder=HashEmbedder(16))
    try:
        resp = ApiClient(rt)("GET", "/api/v1/ome/reports")
    finally:
        rt.close()
    assert resp.status_code == 200, resp.text
    return resp.json()["data"]["reports"]


@pytest.mark.parametrize(("members", "shown"), [
    ('["ep_20261010_0001", "ep_2026', "'[\"ep_20261010_0001\", \"ep_2026'"),
    ('{"a": 1}', "'{\"a\": 1}'"),
    ("[1, 2]", "'[1, 2]'"),
    ("", "''"),
])
def test_a_damaged_row_is_said_to_be_damaged_the_same_by_cli_and_api(
        root: Path, members: str, shown: str) -> None:
    _audit(root, members)
    cli_rows, api_rows = _cli_rows(root), _api_rows(root)
    assert cli_rows == api_rows
    damaged, sound = cli_rows
    assert (damaged["id"], damaged["source_members"], damaged["damaged"]) == (
        "rr_1", None, f"source_members is not a JSON list of entry ids: {shown}")
    assert (sound["source_members"], sound["damaged"]) == (json.loads(GOOD), None)


def test_the_text_listing_names_the_damage(root: Path) -> None:
    _audit(root, "not json")
    result = CliRunner().invoke(cli, ["reports", "--root", str(root)])
    assert result.exit_code == 0, result.output
    assert "source_members is not a JSON list of entry ids" in " ".join(result.stdout.split())


def test_runs_and_reports_json_are_what_the_api_answers_under_data(root: Path) -> None:
    _audit(root, GOOD)
    runs = CliRunner().invoke(cli, ["runs", "--json", "--root", str(root)])
    assert runs.exit_code == 0, runs.output
    reports = CliRunner().invoke(cli, ["reports", "--json", "--root", str(root)])
    assert reports.exit_code == 0, reports.output
    rt = Runtime(root, embedder=HashEmbedder(16))
    try:
        call = ApiClient(rt)
        api_runs = call("GET", "/api/v1/ome/runs").json()["data"]
        api_reports = call("GET", "/api/v1/ome/reports").json()["data"]
    finally:
        rt.close()
    assert json.loads(runs.stdout) == api_runs == {"runs": []}
    assert json.loads(reports.stdout) == api_reports
    assert [r["id"] for r in api_reports["reports"]] == ["rr_1", "rr_0"]
