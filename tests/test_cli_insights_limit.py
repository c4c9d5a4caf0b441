"""`insights` lists at most ``--limit`` insights, newest first across users, as the API's
``GET /memory/insights?limit=`` does: it printed every insight of every user, unbounded, and
had no ``--limit`` although the API takes one."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from everos_reflect.cli.main import cli
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime

# (user, hour of 2026-10-12 in UTC written with an offset, id order): ada's newest is not the
# last one she wrote, and bo's 09:00+05:00 (04:00 UTC) is older than ada's 05:00Z
WRITTEN = [("ada", "2026-10-12T05:00:00+00:00"), ("ada", "2026-10-12T03:00:00+00:00"),
           ("bo", "2026-10-12T09:00:00+05:00"), ("bo", "2026-10-12T06:00:00+00:00"),
           ("ada", "2026-10-12T07:00:00+00:00")]


def _seed(root: Path) -> dict[str, str]:
    """Five active insights of two users; their ids by timestamp."""
    rt = Runtime(root, embedder=HashEmbedder(16))
    ids = {}
    for n, (user, stamp) in enumerate(WRITTEN):
        ids[stamp] = rt.store.append(UserRef.of(user), Kind.INSIGHT, {
            "timestamp": stamp, "status": "active", "depth": 1, "question": f"q{n}?"},
            {"Insight": f"insight number {n}"}).id
    rt.close()
    return ids


def _run(root: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["insights", *args, "--root", str(root)])


def test_limit_keeps_the_newest_across_users_and_counts_the_rest(root: Path) -> None:
    ids = _seed(root)
    newest = [ids["2026-10-12T07:00:00+00:00"], ids["2026-10-12T06:00:00+00:00"],
              ids["2026-10-12T05:00:00+00:00"], ids["2026-10-12T09:00:00+05:00"],
              ids["2026-10-12T03:00:00+00:00"]]

    every = json.loads(_run(root, "--json").stdout)
    assert [i["id"] for i in every["insights"]] == newest and every["total"] == 5

    cut = _run(root, "--limit", "2", "--json")
    assert cut.exit_code == 0, cut.output
    data = json.loads(cut.stdout)
    assert [i["id"] for i in data["insights"]] == newest[:2] and data["total"] == 5

    shown = _run(root, "--limit", "3")
    assert shown.exit_code == 0, shown.output
    assert [line.split()[0] for line in shown.stdout.splitlines()
            if line.startswith("in_")] == newest[:3]
    assert "... 2 more insights not listed (--limit, at most 1,000)" in shown.stdout


def test_one_users_limit_is_what_the_api_answers(root: Path) -> None:
    from tests.api_client import call_once

    _seed(root)
    cli_data = json.loads(_run(root, "--user", "ada", "--limit", "2", "--json").stdout)
    api = call_once(root, "GET", "/api/v1/memory/insights",
                    params={"user_id": "ada", "limit": 2})
    assert api.status_code == 200, api.text
    api_data = api.json()["data"]
    assert [i["id"] for i in cli_data["insights"]] == [i["id"] for i in api_data["insights"]]
    assert cli_data["total"] == api_data["total"] == 3


def test_a_limit_out_of_bounds_is_refused_in_the_apis_words(root: Path) -> None:
    _seed(root)
    for value in ("0", "1001", "x"):
        result = _run(root, "--limit", value)
        assert result.exit_code == 2, result.output
        assert "must be a whole number from 1 to 1000" in result.stderr, result.stderr
