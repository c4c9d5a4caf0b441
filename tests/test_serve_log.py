"""``serve``'s log lines are stamped as the run records are: UTC, ISO 8601, with the zone, in
any local time zone. uvicorn's lines (startup, access) go through the same handler."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from everos_reflect.cli import engine_cmds
from everos_reflect.cli.main import cli

#: 2026-12-04T11:20:00.123+00:00 INFO everos_reflect.serve: serving …
UTC_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00 INFO (\S+): (.*)$")


@pytest.fixture
def far_from_utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A local zone 5:30 from UTC: a stamp in local time cannot pass for UTC."""
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_serve_log_lines_are_utc_with_the_zone_in_any_local_zone(
    root: Path, monkeypatch: pytest.MonkeyPatch, far_from_utc: None
) -> None:
    def fake_serve(runtime: Any, **kwargs: Any) -> None:
        logging.getLogger("everos_reflect.serve").info("serving %s", "the root")

    monkeypatch.setattr("everos_reflect.serve.serve", fake_serve)
    monkeypatch.setattr(engine_cmds, "open_runtime", lambda root: None)
    # the root logger as a fresh process has it (pytest's capture handlers set aside), so the
    # command's own logging set-up takes effect; restored after the test
    monkeypatch.setattr(logging.root, "handlers", [])
    monkeypatch.setattr(logging.root, "level", logging.WARNING)
    before = time.time()
    result = CliRunner().invoke(cli, ["serve", "--root", str(root)])
    after = time.time()
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    matches = [UTC_LINE.match(line) for line in lines]
    assert lines and all(matches), lines
    assert [(m.group(1), m.group(2)) for m in matches if m] == [
        ("everos_reflect.serve", "serving the root")]
    # the stamp is the moment itself, in UTC (not the local wall time with +00:00 added)
    stamp = lines[0].split(" ", 1)[0]
    assert before - 1 <= datetime.fromisoformat(stamp).timestamp() <= after + 1


def test_uvicorn_logs_through_the_daemon_handler() -> None:
    # uvicorn's own logging config printed "INFO:     Uvicorn running on …" with no time at
    # all, beside the daemon's stamped lines
    from everos_reflect.serve import uvicorn_config

    config = uvicorn_config(app=object(), host="127.0.0.1", port=0)
    assert config.log_config is None
