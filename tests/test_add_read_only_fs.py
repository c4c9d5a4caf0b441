"""A root whose file system turns read-only while the daemon serves it (remounted read-only
after disk errors, a snapshot mount swapped in): an ``add`` through the API answered 409
``file_error``, a conflict for the client to resolve. It is the server's disk: a 503
``read_only_file_system`` naming the file, as a full disk is a 507. The CLI exits 1 naming it
too, and nothing is written."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from tests.api_client import ApiClient

EPISODE = {"subject": "pets", "content": "Andrew adopted a dog.",
           "timestamp": "2026-10-12T09:00:00+00:00"}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _tree(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
            for p in sorted(root.rglob("*")) if ".index/sqlite" not in str(p)
            and ".index/lancedb" not in str(p)}


def _mount_read_only(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    """Every change under ``root`` through ``os`` fails with EROFS, as on a read-only mount
    (the SQLite and LanceDB files, written by C code, stay writable)."""
    top = str(root) + os.sep

    def refusing(real: Callable[..., Any],
                 writes: Callable[..., bool] = lambda *a, **k: True) -> Callable[..., Any]:
        def call(path: Any, *args: Any, **kwargs: Any) -> Any:
            if (isinstance(path, (str, bytes, os.PathLike))
                    and os.path.abspath(os.fsdecode(path)).startswith(top)
                    and writes(path, *args, **kwargs)):
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fsdecode(path))
            return real(path, *args, **kwargs)
        return call

    monkeypatch.setattr(os, "open", refusing(
        os.open, lambda path, flags, *a, **k: bool(flags & _WRITE_FLAGS)))
    for name in ("mkdir", "replace", "rename", "unlink", "rmdir", "chmod"):
        monkeypatch.setattr(os, name, refusing(getattr(os, name)))


@pytest.mark.parametrize("user", ["u_known", "u_new"])
def test_the_api_answers_an_add_on_a_read_only_file_system_with_a_503(
        root: Path, monkeypatch: pytest.MonkeyPatch, user: str) -> None:
    rt = Runtime(root, Settings(), embedder=HashEmbedder(16))
    try:
        call = ApiClient(rt)
        resp = call("POST", "/api/v1/memory/episodes", json={"user_id": "u_known", **EPISODE})
        assert resp.status_code == 201, resp.text
        before = _tree(root)
        _mount_read_only(monkeypatch, root)
        resp = call("POST", "/api/v1/memory/episodes", json={"user_id": user, **EPISODE})
    finally:
        monkeypatch.undo()
        rt.close()
    assert resp.status_code == 503, resp.text
    error = resp.json()["error"]
    assert error["code"] == "read_only_file_system"
    assert error["message"].startswith("Read-only file system: ")
    assert _tree(root) == before


def test_the_cli_add_on_a_read_only_file_system_exits_1_naming_it(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    args = ["add", "--root", str(root), "--user", "u_known", "--subject", EPISODE["subject"],
            "--content", EPISODE["content"], "--timestamp", EPISODE["timestamp"]]
    assert CliRunner().invoke(cli, args).exit_code == 0
    before = _tree(root)
    _mount_read_only(monkeypatch, root)
    result = CliRunner().invoke(cli, args)
    monkeypatch.undo()
    assert result.exit_code == 1, result.output
    [line] = result.stderr.splitlines()
    assert line.startswith("error: Read-only file system: "), line
    assert _tree(root) == before
