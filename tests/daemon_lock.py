"""What a test pretending a daemon serves a root holds besides its ``daemon.json``: the root's
serve lock and the pid note, as a live ``serve`` does (a ``daemon.json`` alone names no daemon,
nor one whose pid the serve lock's note does not name)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from everos_reflect.engine.daemon import daemon_file, hold_serve_lock, serve_pid_file


@contextmanager
def serve_lock(root: Path) -> Iterator[None]:
    """The lock, noted under the pid the root's ``daemon.json`` names (the serve that wrote
    it), if it has one."""
    fd = hold_serve_lock(root)
    try:
        try:
            pid = int(json.loads(daemon_file(root).read_text("utf-8"))["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            pid = None
        if pid is not None:
            serve_pid_file(root).write_text(f"{pid}\n", "ascii")
        yield
    finally:
        os.close(fd)
