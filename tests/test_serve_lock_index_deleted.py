"""``rm -rf <root>/.index`` while ``serve`` runs (deleting the derived index is always safe)
took the serve lock file with it, and a second ``serve`` of the root then started beside the
running one: two watchers, two schedulers firing every cron job. The lock is on the root
folder itself now, which deleting the index cannot remove."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from everos_reflect.engine.daemon import (
    daemon_file,
    hold_serve_lock,
    read_daemon,
    serve_lock_held,
    serve_pid_file,
)
from everos_reflect.errors import EverosError


def test_a_second_serve_is_refused_after_the_index_was_deleted(root: Path) -> None:
    first = hold_serve_lock(root)
    try:
        shutil.rmtree(root / ".index")
        assert serve_lock_held(root)
        with pytest.raises(EverosError) as caught:
            os.close(hold_serve_lock(root))
        assert str(caught.value) == (f"another everos-reflect serve (pid not known yet) is "
                                     f"starting on or serving {root}: one daemon serves a root")
    finally:
        os.close(first)
    os.close(hold_serve_lock(root))  # the first one gone, the next one starts


def test_the_daemon_rebuilding_its_index_is_named_again(root: Path) -> None:
    first = hold_serve_lock(root)
    try:
        shutil.rmtree(root / ".index")
        # what serve does once the watcher rebuilt the index (note_serve_pid), here for the
        # pid its daemon.json names: this test's parent, as read_daemon skips its own pid
        serve_pid_file(root).parent.mkdir(parents=True)
        serve_pid_file(root).write_text(f"{os.getppid()}\n", "ascii")
        info = {"pid": os.getppid(), "host": "127.0.0.1", "port": 8123, "root": str(root)}
        daemon_file(root).write_text(json.dumps(info), "utf-8")
        assert read_daemon(root) == info
        with pytest.raises(EverosError) as caught:
            os.close(hold_serve_lock(root))
        assert str(caught.value) == (f"a daemon (pid {os.getppid()}) already serves {root} on "
                                     "127.0.0.1:8123")
    finally:
        os.close(first)


def test_a_root_that_is_gone_has_no_daemon(tmp_path: Path) -> None:
    assert serve_lock_held(tmp_path / "nowhere") is False
    assert read_daemon(tmp_path / "nowhere") is None


def test_another_programs_lock_on_the_root_is_not_blamed_on_a_serve_long_gone(
        root: Path) -> None:
    # The serve lock is an flock on the root folder, which other programs may flock too (a
    # backup script's `flock <root> rsync ...`). The pid note of the last serve stays behind
    # when it stops: a serve refused then named that long-gone process as serving the root.
    import fcntl
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    note = root / ".index" / "locks" / "serve.lock"
    note.parent.mkdir(parents=True, exist_ok=True)
    note.write_text(gone.stdout, "ascii")  # what the last serve noted, then stopped
    other = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another program's lock
        with pytest.raises(EverosError) as caught:
            os.close(hold_serve_lock(root))
    finally:
        os.close(other)
    pid = gone.stdout.strip()
    assert f"pid {pid}" not in str(caught.value)
    assert str(caught.value) == (
        f"another process holds a lock on {root}, and no everos-reflect serve noted there "
        "is alive (another program's flock on the folder?): one daemon serves a root")
    os.close(hold_serve_lock(root))  # the other program done, serve starts
