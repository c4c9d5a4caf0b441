"""A disk error mid-``add`` (a full disk, an I/O error) fails the add and leaves the root as
it was: it left the new user's empty folders behind (a user from then on, to ``lint`` and the
listings) and ``.index/locks/md-….lock``. The CLI exits 1 naming the log; the API answers a
5xx naming it (507 for a full disk), not a 409 as for a client's mistake."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.markdown import store as store_module
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from tests.api_client import ApiClient

LOG = "default_app/default_project/users/{user}/episodes/episode-2026-10-12.md"


def _tree(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
            for p in sorted(root.rglob("*")) if ".index/sqlite" not in str(p)
            and ".index/lancedb" not in str(p)}


def _failing_disk(monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    """Writing a log's temp file fails at its fsync with ``code`` (other fsyncs work)."""
    real = os.fsync

    def fsync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".tmp"):
            raise OSError(code, os.strerror(code))
        real(fd)

    monkeypatch.setattr(store_module.os, "fsync", fsync)


def _add(root: Path, user: str) -> Any:
    return CliRunner().invoke(cli, ["add", "--root", str(root), "--user", user, "--subject",
                                    "pets", "--content", "Andrew adopted a dog.",
                                    "--timestamp", "2026-10-12T09:00:00+00:00"])


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO])
def test_a_failed_add_for_a_new_user_leaves_the_root_as_it_was(
        root: Path, monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    assert _add(root, "u_first").exit_code == 0  # the root and its index exist
    before = _tree(root)
    _failing_disk(monkeypatch, code)

    result = _add(root, "u_new")

    monkeypatch.undo()
    assert result.exit_code == 1
    assert result.stderr == f"error: {os.strerror(code)}: {LOG.format(user='u_new')}\n"
    assert _tree(root) == before


@pytest.mark.parametrize(("code", "status", "name"), [
    (errno.ENOSPC, 507, "insufficient_storage"),
    (errno.EIO, 500, "io_error"),
])
def test_the_api_answers_a_disk_error_with_a_5xx_naming_the_log(
        root: Path, monkeypatch: pytest.MonkeyPatch, code: int, status: int,
        name: str) -> None:
    rt = Runtime(root, Settings(), embedder=HashEmbedder(16))
    try:
        call = ApiClient(rt)
        _failing_disk(monkeypatch, code)
        resp = call("POST", "/api/v1/memory/episodes", json={
            "user_id": "u_new", "subject": "pets", "content": "Andrew adopted a dog.",
            "timestamp": "2026-10-12T09:00:00+00:00"})
    finally:
        monkeypatch.undo()
        rt.close()
    assert resp.status_code == status, resp.text
    assert resp.json()["error"] == {"code": name, "message": (
        f"{os.strerror(code)}: {LOG.format(user='u_new')}")}
    assert not (root / "default_app").exists()
