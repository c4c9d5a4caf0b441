"""A ``daemon.json`` left by a daemon that died (``kill -9``, a power cut) whose pid the OS
has since given to another process: that pid is alive, so the file was taken for a running
daemon. ``serve`` refused to start ("a daemon (pid N) already serves"), ``trigger`` sent its
run to whatever listened on that port, ``status`` reported a daemon that did not answer. A
daemon is alive only while it holds the root's serve lock."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect import serve as serve_module
from everos_reflect.cli import engine_cmds
from everos_reflect.cli.main import cli
from everos_reflect.engine.daemon import daemon_file, hold_serve_lock, read_daemon
from tests.daemon_lock import serve_lock


def _left_over(root: Path) -> dict[str, object]:
    """A daemon.json naming a live pid (this test's parent: a pid reused since) and no lock."""
    info = {"pid": os.getppid(), "host": "127.0.0.1", "port": 8123, "root": str(root)}
    daemon_file(root).write_text(json.dumps(info), "utf-8")
    return info


def test_a_daemon_json_no_serve_holds_the_lock_for_names_no_daemon(root: Path) -> None:
    info = _left_over(root)
    assert read_daemon(root) is None
    with serve_lock(root):  # a live serve of the root
        assert read_daemon(root) == info
    assert read_daemon(root) is None


def test_serve_starts_over_a_daemon_json_a_dead_daemon_left(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _left_over(root)
    started: list[int] = []
    monkeypatch.setattr(serve_module, "_serve", lambda rt, host, port, **_: started.append(port))
    monkeypatch.setattr(engine_cmds, "configure_logging", lambda: None)
    result = CliRunner().invoke(cli, ["serve", "--root", str(root), "--port", "8124"])
    assert result.exit_code == 0, result.output
    assert started == [8124]


def test_trigger_runs_in_process_past_a_daemon_json_a_dead_daemon_left(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx

    _left_over(root)
    calls: list[object] = []
    monkeypatch.setattr(httpx, "post", lambda *a, **k: calls.append((a, k)))
    result = CliRunner().invoke(cli, ["trigger", "revalidate_insights", "--force", "--root",
                                      str(root)])
    assert result.exit_code == 0, result.output
    assert calls == []
    assert "[in-process]" in result.stdout


def test_a_daemon_json_a_killed_serve_left_is_not_the_new_serve_starting(root: Path) -> None:
    # a new serve holds the lock from before it listens; until it writes its own daemon.json
    # (seconds on a large root), the killed one's was read as the live daemon: `trigger` sent
    # its run to a port nobody (or another program) listened on, `status` named a dead daemon
    _left_over(root)
    fd = hold_serve_lock(root)  # this process: the new serve, starting
    try:
        assert read_daemon(root) is None
        result = CliRunner().invoke(cli, ["status", "--json", "--root", str(root)])
    finally:
        os.close(fd)
    assert result.exit_code == 0, result.output
    assert "the daemon (pid" not in result.stderr
    assert {row["via"] for row in json.loads(result.stdout)["strategies"]} == {"in-process"}
