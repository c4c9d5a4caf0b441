"""Store faults shared by tests: a log the daemon may not open.

Tests run as root, where ``chmod 000`` blocks no read, so the store's own open is refused.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest

import everos_reflect.markdown.store as store_module


def refuse_reads(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    """Make every open of ``path`` by the store fail as a log without read permission does."""
    opened = store_module.open_regular

    def refused(where: Any, *args: Any, **kwargs: Any) -> Any:
        if Path(where) == path:
            raise PermissionError(errno.EACCES, "Permission denied", str(where))
        return opened(where, *args, **kwargs)

    monkeypatch.setattr(store_module, "open_regular", refused)
