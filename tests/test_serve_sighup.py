"""SIGHUP (the terminal ``serve`` runs in closed, an SSH session dropped) stops the daemon as
SIGTERM does: it killed it on the spot, without "shutting down", leaving its ``daemon.json``
behind and any run in progress unrecorded until the next start marked it abandoned."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.test_serve_e2e import free_port, wait_for

SERVE = [sys.executable, "-m", "everos_reflect.cli.main", "serve"]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_stops_serve_cleanly_saying_it_once(tmp_path: Path,
                                                           sig: signal.Signals) -> None:
    # SIGTERM and SIGINT, which uvicorn catches while it serves, were raised again once it
    # stopped: the log said only "received SIGTERM while stopping", after one SIGTERM
    root = tmp_path / "root"
    (root / ".index").mkdir(parents=True)
    port = free_port()
    env = {**os.environ, "HOME": str(tmp_path), "EVEROS_ROOT": str(root),
           "EVEROS_EMBEDDING__PROVIDER": "local", "EVEROS_LLM__PROVIDER": "extractive"}
    log_path = tmp_path / "serve.log"
    with log_path.open("w") as log:
        # started as from a terminal: a test run under nohup (or a CI runner ignoring SIGHUP)
        # would hand its SIG_IGN down, and serve rightly keeps it
        proc = subprocess.Popen([*SERVE, "--root", str(root), "--port", str(port)], env=env,
                                stdout=log, stderr=subprocess.STDOUT,
                                preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}/api/v1", timeout=30) as c:
                wait_for(lambda: c.get("/health").status_code == 200, 60, "the API")
            info = json.loads((root / ".index" / "daemon.json").read_text())
            assert info["pid"] == proc.pid
            proc.send_signal(sig)
            code = proc.wait(60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    output = log_path.read_text()
    assert code == 0, output
    assert f"received {sig.name}; stopping" in output and "stopped" in output, output
    assert "while stopping" not in output, output
    assert not (root / ".index" / "daemon.json").exists()


def test_serve_under_nohup_keeps_sighup_ignored(monkeypatch: pytest.MonkeyPatch,
                                                root: Path) -> None:
    # `nohup everos-reflect serve` ignores SIGHUP for the daemon: it must outlive the terminal
    from everos_reflect import serve as serve_module
    from everos_reflect.index.watcher import Watcher
    from everos_reflect.runtime import Runtime

    class Stop(Exception):
        pass

    while_serving: list[object] = []

    def start(self: Watcher) -> None:
        while_serving.append(signal.getsignal(signal.SIGHUP))
        raise Stop

    monkeypatch.setattr(Watcher, "start", start)
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    runtime = Runtime(root)
    try:
        with pytest.raises(Stop):
            serve_module._serve(runtime, "127.0.0.1", 0)
        assert while_serving == [signal.SIG_IGN]
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    finally:
        runtime.close()
        signal.signal(signal.SIGHUP, previous)
