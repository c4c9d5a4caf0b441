"""End to end against a real ``everos-reflect serve`` process on loopback: add Episodes over
HTTP, wait for the watcher to index them, trigger Reflection with force, search, SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

STRATEGY = "reflect_episodes"
SERVE = [sys.executable, "-m", "everos_reflect.cli.main", "serve"]

EPISODES = [
    ("2026-08-10T10:00:00+00:00", "Andrew has no pets", "Andrew has no pets yet."),
    ("2026-08-12T10:00:00+00:00", "Andrew adopted a dog", "Andrew adopted a dog named Toby."),
    ("2026-08-14T10:00:00+00:00", "Andrew adopted another dog",
     "Andrew also adopted a second dog named Buddy."),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
        except httpx.TransportError:
            value = None
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.mark.slow
def test_serve_end_to_end(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / ".index").mkdir(parents=True)  # a memory root, as `init` or any earlier use leaves
    port = free_port()
    env = {**os.environ, "HOME": str(tmp_path), "EVEROS_ROOT": str(root),
           "EVEROS_EMBEDDING__PROVIDER": "local", "EVEROS_LLM__PROVIDER": "extractive"}
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen([*SERVE, "--root", str(root), "--port", str(port)],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/api/v1"
    try:
        with httpx.Client(base_url=base, timeout=30) as client:
            wait_for(lambda: client.get("/health").status_code == 200, 60, "the API")
            info = json.loads((root / ".index" / "daemon.json").read_text())
            assert (info["pid"], info["port"]) == (proc.pid, port)

            ids = []
            for ts, subject, content in EPISODES:
                resp = client.post("/memory/episodes", json={
                    "user_id": "u_andrew", "subject": subject, "content": content,
                    "timestamp": ts})
                assert resp.status_code == 201, resp.text
                ids.append(resp.json()["data"]["id"])

            def indexed() -> list[dict]:
                hits = client.post("/memory/search", json={
                    "query": "Andrew dog", "top_k": 10, "user_id": "u_andrew",
                    "include_deprecated": True}).json()["data"]["episodes"]
                return hits if {h["id"] for h in hits} >= set(ids) else []

            wait_for(indexed, 60, "the watcher to index the episodes")

            resp = client.post("/ome/trigger", json={"name": STRATEGY, "force": True,
                                                     "timeout": 120})
            assert resp.status_code == 200, resp.text
            outcome = resp.json()
            assert (outcome["status"], outcome["name"]) == ("ok", STRATEGY), outcome
            runs = client.get("/ome/runs").json()["data"]["runs"]
            assert runs[0]["id"] == outcome["run_id"]
            assert (runs[0]["status"], runs[0]["trigger"]) == ("ok", "api")

            hits = client.post("/memory/search", json={
                "query": "how many dogs does Andrew have", "user_id": "u_andrew"}
            ).json()["data"]["episodes"]
            assert hits, "search found nothing after the run"
            assert all(h["deprecated_by"] is None for h in hits)

            assert client.post("/ome/trigger", json={"name": "nope"}).status_code == 404
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(60)
        finally:
            if proc.poll() is None:
                proc.kill()
            log.close()
    output = (tmp_path / "serve.log").read_text()
    assert code == 0, output
    assert "stopped" in output
    assert not (root / ".index" / "daemon.json").exists()
