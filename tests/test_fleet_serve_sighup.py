"""SIGHUP (the terminal ``fleet serve`` runs in closed, an SSH session dropped) stops the fleet
scheduler as SIGTERM does, as it stops ``serve``: it killed it on the spot, runs in flight
given no grace, the local Ray it started left to its own clean-up. Under ``nohup`` it stays
ignored."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.fleet_support import build_root, open_test_root
from tests.test_serve_e2e import wait_for

FLEET_SERVE = [sys.executable, "-m", "everos_reflect.cli.main", "fleet", "serve"]


def _from_a_terminal() -> None:
    """A test run under nohup (or a CI runner ignoring SIGHUP) hands its SIG_IGN down, and
    fleet serve rightly keeps it."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _env(home: Path) -> dict[str, str]:
    """A Ray of its own, never one RAY_ADDRESS names."""
    return {**{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}, "HOME": str(home)}


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.slow
def test_sighup_stops_fleet_serve_cleanly(tmp_path: Path) -> None:
    build_root(tmp_path / "shard-a")
    (tmp_path / "fleet.toml").write_text('roots = ["shard-*"]\nnum_cpus = 1\n', "utf-8")
    env = _env(tmp_path)
    log_path = tmp_path / "fleet.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen([*FLEET_SERVE, "--fleet", str(tmp_path / "fleet.toml")],
                                env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT,
                                preexec_fn=_from_a_terminal, start_new_session=True)
        try:
            wait_for(lambda: "fleet scheduler for 1 root on " in log_path.read_text(), 120,
                     "the fleet scheduler")
            proc.send_signal(signal.SIGHUP)
            code = proc.wait(60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
    output = log_path.read_text()
    assert code == 0, output
    assert "received SIGHUP: stopping" in output and "stopped" in output, output


@pytest.mark.slow
def test_a_terminal_hanging_up_stops_fleet_serve_cleanly(tmp_path: Path) -> None:
    # the terminal's shell is gone (fleet serve's parent) and its whole process group, Ray's
    # processes too, got SIGHUP: they died of it, and fleet serve with them, no clean-up done
    build_root(tmp_path / "shard-a")
    (tmp_path / "fleet.toml").write_text('roots = ["shard-*"]\nnum_cpus = 1\n', "utf-8")
    env = _env(tmp_path)
    log_path = tmp_path / "fleet.log"
    command = " ".join(shlex.quote(a) for a in [*FLEET_SERVE, "--fleet", "fleet.toml"])
    shell = subprocess.run(  # the shell starts it in a session of its own, then is gone
        ["sh", "-c", f"setsid {command} > fleet.log 2>&1 & echo $!"], env=env, cwd=tmp_path,
        capture_output=True, text=True, check=True, preexec_fn=_from_a_terminal)
    pid = int(shell.stdout)
    try:
        wait_for(lambda: "fleet scheduler for 1 root on " in log_path.read_text(), 120,
                 "the fleet scheduler")
        os.killpg(pid, signal.SIGHUP)
        wait_for(lambda: _gone(pid), 60, "fleet serve to stop")
    finally:
        if not _gone(pid):
            os.killpg(pid, signal.SIGKILL)
    output = log_path.read_text()
    assert "received SIGHUP: stopping" in output, output
    assert output.rstrip().endswith("INFO everos_reflect.fleet.schedule: stopped"), output


def test_fleet_serve_under_nohup_keeps_sighup_ignored(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from everos_reflect.fleet import ray_backend
    from everos_reflect.fleet.config import parse_fleet
    from everos_reflect.fleet.schedule import serve_fleet

    build_root(tmp_path / "a")
    config = parse_fleet('roots = ["a"]\n', str(tmp_path / "fleet.toml"))
    while_serving: list[object] = []

    @contextmanager
    def session(config: Any) -> Any:
        yield None

    class Fleet:
        def __init__(self, ray: Any, config: Any, opener: Any) -> None:
            while_serving.append(signal.getsignal(signal.SIGHUP))
            raise KeyboardInterrupt  # stop here: the handlers are in place

    monkeypatch.setattr(ray_backend, "ray_session", session)
    monkeypatch.setattr(ray_backend, "RayFleet", Fleet)
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with pytest.raises(KeyboardInterrupt):
            serve_fleet(config, [tmp_path / "a"], opener=open_test_root)
        assert while_serving == [signal.SIG_IGN]
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)
