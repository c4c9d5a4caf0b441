"""``trigger``, ``status`` and ``strategies`` reach the daemon serving the root directly, never
through a proxy the environment names (``HTTP_PROXY``): the proxy, set for the LLM, is not on
the machine and cannot reach its loopback daemon."""

from __future__ import annotations

import http.server
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.engine.daemon import strategies_via_daemon, write_daemon
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from tests.daemon_lock import serve_lock


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, answer: int) -> None:
        self.answer = answer
        self.paths: list[str] = []
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server

    def _reply(self) -> None:
        self.server.paths.append(self.path)
        if self.server.answer != 200:  # the proxy: it cannot reach the user's loopback
            body = b"proxy: cannot connect"
        elif self.command == "POST":
            self.rfile.read(int(self.headers.get("content-length", "0")))
            body = json.dumps({"status": "ok", "name": "revalidate_insights",
                               "run_id": "run_1", "counts": {}}).encode()
        else:
            body = json.dumps({"data": {"strategies": []}}).encode()
        self.send_response(self.server.answer)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _reply

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def servers() -> Iterator[tuple[_Server, _Server]]:
    made = [_Server(200), _Server(502)]
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in made]
    for t in threads:
        t.start()
    try:
        yield made[0], made[1]
    finally:
        for s in made:
            s.shutdown()
            s.server_close()


def test_trigger_and_strategies_reach_the_daemon_directly_with_a_proxy_set(
        root: Path, monkeypatch: pytest.MonkeyPatch,
        servers: tuple[_Server, _Server]) -> None:
    # with HTTP_PROXY set (for the LLM, behind a company proxy), the daemon's address went to
    # the proxy: its 502 became "daemon answered 502", and a proxy out of reach made trigger
    # say "could not be reached; running in-process" beside the daemon
    daemon, proxy = servers
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{proxy.server_port}")
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    write_daemon(root, {"pid": os.getppid(), "host": "127.0.0.1",
                        "port": daemon.server_port, "root": str(root)})

    with serve_lock(root):
        result = CliRunner().invoke(cli, ["trigger", "revalidate_insights", "--root",
                                          str(root)])
        runtime = Runtime(root, Settings())
        try:
            asked = strategies_via_daemon(runtime)
        finally:
            runtime.close()
    assert result.exit_code == 0, result.output
    assert "[daemon]" in result.stdout

    assert asked is not None and asked.problem is None and asked.rows == []
    assert proxy.paths == []
    assert daemon.paths == ["/api/v1/ome/trigger", "/api/v1/ome/strategies"]
