"""Offline, ``status`` (CLI and API) counts every stale insight a revalidation run left waiting
for a model: those it could not judge (``needs_llm``) and those waiting for a stale insight
they cite (``waiting_on_cited``), per owner."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.index.sync import Indexer
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.revalidate import NAME
from tests.api_client import ApiClient
from tests.test_revalidate import merged, run, setup


def reasons(rt: Runtime, root: Path) -> tuple[str, str]:
    """The revalidation row's ``unavailable`` in ``status --json`` and in the API's status."""
    result = CliRunner().invoke(cli, ["status", "--root", str(root), "--json"])
    assert result.exit_code == 0, result.output
    [cli_row] = [r for r in json.loads(result.stdout)["strategies"] if r["name"] == NAME]
    resp = ApiClient(rt)("GET", "/api/v1/status")
    assert resp.status_code == 200
    [api_row] = [r for r in resp.json()["data"]["strategies"] if r["name"] == NAME]
    return cli_row["unavailable"], api_row["unavailable"]


def test_status_counts_the_insights_waiting_on_a_cited_one_as_waiting_for_a_model(
        root: Path) -> None:
    rt, eps, _first, _second = setup(root)
    merged(rt, eps)
    assert run(rt) == {"needs_llm": 1, "waiting_on_cited": 1}
    for reason in reasons(rt, root):
        assert reason.startswith("needs an LLM: 2 stale insights wait"), reason
        assert "(1 of them until a stale insight they cite is judged)" in reason


def test_status_counts_each_owners_waiting_insights_though_their_ids_are_the_same(
        root: Path) -> None:
    """Entry ids are unique per user only: two owners' ``in_..._0001`` were counted once."""
    rt, eps, _first, _second = setup(root)
    merged(rt, eps)
    users = root / "default_app" / "default_project" / "users"
    shutil.copytree(users / "u_dev", users / "u_ops")
    for path in (users / "u_ops").rglob("*.md"):
        path.write_text(path.read_text("utf-8").replace("u_dev", "u_ops"), "utf-8")
    Indexer(rt).scan()
    assert run(rt) == {"needs_llm": 2, "waiting_on_cited": 2}
    for reason in reasons(rt, root):
        assert reason.startswith("needs an LLM: 4 stale insights wait"), reason
        assert "(2 of them until" in reason
