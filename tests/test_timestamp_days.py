"""A timestamp a person gives (``add``, ``task add``, the API, MCP) shaped as ISO 8601 but
naming no moment -- a day its month does not have, hour 24, an offset past 23:59 -- is
refused saying which part and why: it was "not ISO 8601 with a date, a time and an offset",
which it is, and a person looked for a typo in its form."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from tests.api_client import call_once


@pytest.mark.parametrize(("given", "said"), [
    ("2026-02-30", "2026-02-30 is not a date (February has 28 days in 2026)"),
    ("2026-02-29T09:00:00Z",
     "'2026-02-29T09:00:00Z': 2026-02-29 is not a date (February has 28 days in 2026)"),
    ("2026-04-31T09:00:00+02:00",
     "'2026-04-31T09:00:00+02:00': 2026-04-31 is not a date (April has 30 days in 2026)"),
    ("2026-13-01T09:00:00Z",
     "'2026-13-01T09:00:00Z': 2026-13-01 is not a date (there is no month 13: months are "
     "01-12)"),
    ("2026-10-12T24:00:00Z",
     "'2026-10-12T24:00:00Z': 24:00:00 is not a time of day (00:00:00 to 23:59:59)"),
    ("2026-10-12T09:61Z", "'2026-10-12T09:61Z': 09:61 is not a time of day (00:00:00 to "
                          "23:59:59)"),
    ("2026-10-12T09:00:00+24:00",
     "'2026-10-12T09:00:00+24:00': +24:00 is not a UTC offset (-23:59 to +23:59)"),
])
def test_add_names_the_part_of_a_timestamp_that_names_no_moment(
        root: Path, given: str, said: str) -> None:
    result = CliRunner().invoke(cli, ["add", "--root", str(root), "--user", "u1", "--subject",
                                      "s", "--content", "c", "--timestamp", given])
    assert result.exit_code == 1
    assert result.stderr == f"error: --timestamp {said}\n"
    assert not list(root.rglob("episode-*.md"))


def test_a_leap_day_is_a_date(root: Path) -> None:
    result = CliRunner().invoke(cli, ["add", "--root", str(root), "--user", "u1", "--subject",
                                      "s", "--content", "c", "--timestamp",
                                      "2028-02-29T09:00:00Z"])
    assert result.exit_code == 0, result.output
    assert list(root.rglob("episode-2028-02-29.md"))


def test_the_api_says_it_the_same(root: Path) -> None:
    resp = call_once(root, "POST", "/api/v1/memory/episodes", json={
        "user_id": "u1", "subject": "s", "content": "c", "timestamp": "2026-02-30T10:00:00Z"})
    assert resp.status_code == 422
    assert resp.json()["error"]["message"] == (
        "timestamp: '2026-02-30T10:00:00Z': 2026-02-30 is not a date (February has 28 days in "
        "2026)")
