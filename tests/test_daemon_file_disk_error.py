"""``daemon.json`` and the serve pid note are written through a temp file; one that cannot be
finished (a full disk) failed ``serve`` as it should, but left ``.daemon.json.<pid>.tmp``
behind in the index for good."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from everos_reflect.engine import daemon as daemon_module
from everos_reflect.engine.daemon import daemon_file, note_serve_pid, write_daemon


def _disk_full(*args: object) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("write", [
    lambda root: write_daemon(root, {"pid": os.getpid(), "port": 8000}),
    note_serve_pid,
], ids=["daemon.json", "pid note"])
def test_a_failed_write_leaves_no_temp_file(root: Path, monkeypatch: pytest.MonkeyPatch,
                                            write: object) -> None:
    monkeypatch.setattr(daemon_module.os, "replace", _disk_full)
    with pytest.raises(OSError):
        write(root)  # type: ignore[operator]
    monkeypatch.undo()
    assert [p.name for p in root.rglob("*.tmp")] == []
    assert not daemon_file(root).exists()
