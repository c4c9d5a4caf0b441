"""What a test pretending a daemon serves a root holds besides its ``daemon.json``: the root's
serve lock, as a live ``serve`` does (a ``daemon.json`` alone names no daemon)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from everos_reflect.engine.daemon import hold_serve_lock


@contextmanager
def serve_lock(root: Path) -> Iterator[None]:
    fd = hold_serve_lock(root)
    try:
        yield
    finally:
        os.close(fd)
