"""A root replaced by another folder while ``serve`` runs (``mv ROOT ROOT.old && cp -a ROOT.old
ROOT``, a backup restored over an ``rm -rf``): the daemon's lock stayed on the old folder, so
a second ``serve --root ROOT`` started beside it, two daemons on one path. The first one now
sees the path names another folder, says so and stops with exit status 1."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.test_serve_e2e import free_port, wait_for

SERVE = [sys.executable, "-m", "everos_reflect.cli.main", "serve"]


def test_a_root_moved_away_is_not_replaced_until_another_folder_is_there(
        tmp_path: Path) -> None:
    from everos_reflect.serve import root_replaced

    root = tmp_path / "root"
    root.mkdir()
    st = os.stat(root)
    held = (st.st_dev, st.st_ino)
    assert not root_replaced(root, held)
    root.rename(tmp_path / "away")
    assert not root_replaced(root, held)  # gone for now: the watcher waits for it
    (tmp_path / "away").rename(root)
    assert not root_replaced(root, held)  # back
    root.rename(tmp_path / "old")
    root.mkdir()
    assert root_replaced(root, held)


def _copy(source: Path, target: Path) -> None:
    """``cp -a source target``, again should the daemon remove a file of its index as it is
    copied (a temp file of SQLite or LanceDB)."""
    for attempt in range(5):
        try:
            shutil.copytree(source, target, symlinks=True)
            return
        except shutil.Error:
            if attempt == 4:
                raise
            shutil.rmtree(target, ignore_errors=True)


@pytest.mark.slow
def test_serve_stops_with_status_1_when_its_root_is_replaced(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / ".index").mkdir(parents=True)
    port = free_port()
    env = {**os.environ, "HOME": str(tmp_path), "EVEROS_EMBEDDING__PROVIDER": "local",
           "EVEROS_LLM__PROVIDER": "extractive"}
    log_path = tmp_path / "serve.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen([*SERVE, "--root", str(root), "--port", str(port)], env=env,
                                stdout=log, stderr=subprocess.STDOUT)
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}/api/v1", timeout=30) as c:
                wait_for(lambda: c.get("/health").status_code == 200, 60, "the API")
            assert json.loads((root / ".index" / "daemon.json").read_text())["pid"] == proc.pid
            root.rename(tmp_path / "root.old")
            _copy(tmp_path / "root.old", root)
            code = proc.wait(60)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)
    output = log_path.read_text()
    message = (f"the memory root {root} was replaced by another folder while this daemon "
               "served it (its lock is on the folder it started on, no longer there): "
               "stopping; start serve again to serve the folder there now")
    assert code == 1, output
    assert f"ERROR everos_reflect.serve: {message}" in output, output
    assert output.rstrip().endswith(f"error: {message}"), output
    # the copy of its daemon.json cp took along names it: gone with it, as its own is
    assert not (root / ".index" / "daemon.json").exists()
