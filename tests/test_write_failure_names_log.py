"""A daily log that cannot be written (a full disk, a read-only folder) fails the command naming
that log, exit 1, and the log is left as it was; the temp file a write goes through is an
implementation detail nobody asked about, and none is left behind."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.markdown import store as store_module

LOG = "default_app/default_project/users/u1/episodes/episode-2026-10-12.md"


def _add(root: Path, content: str) -> Any:
    return CliRunner().invoke(cli, ["add", "--root", str(root), "--user", "u1", "--subject",
                                    "pets", "--content", content, "--importance", "5",
                                    "--timestamp", "2026-10-12T09:00:00+00:00"])


def _disk_full_at(monkeypatch: pytest.MonkeyPatch, call: str) -> None:
    """``os.<call>`` of the store's temp file fails as on a full disk (``open`` with the temp
    file's name, as the kernel names it; ``fsync`` with none)."""
    real = getattr(os, call)

    def failing(*args: Any, **kwargs: Any) -> Any:
        if call == "fsync" or str(args[0]).endswith(".tmp"):
            name = args[0] if call == "open" else None
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), name)
        return real(*args, **kwargs)

    monkeypatch.setattr(store_module.os, call, failing)


@pytest.mark.parametrize("call", ["open", "fsync"])
def test_a_log_that_cannot_be_written_is_named_and_left_as_it_was(
        root: Path, monkeypatch: pytest.MonkeyPatch, call: str) -> None:
    # it failed naming ".episode-2026-10-12.md.454882ba9600.tmp" (a read-only folder), or
    # naming no file at all ("[Errno 28] No space left on device")
    first = _add(root, "Andrew adopted a dog named Toby.")
    assert first.exit_code == 0, first.output
    before = (root / LOG).read_bytes()
    _disk_full_at(monkeypatch, call)

    result = _add(root, "Andrew adopted a second dog.")

    assert result.exit_code == 1
    assert result.stderr == f"error: No space left on device: {LOG}\n"
    monkeypatch.undo()
    assert (root / LOG).read_bytes() == before
    assert not [p for p in root.rglob("*.tmp")]
