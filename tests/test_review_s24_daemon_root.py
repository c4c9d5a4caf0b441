"""A ``daemon.json`` that names the daemon of another root: the root was copied with its
``.index`` (``cp -r root copy``, as the example root's README advises before running
Reflection) or an ``.index`` copied in from another root, while that root's daemon runs.

Before, ``trigger`` on the copy asked the other root's daemon, which ran the strategy there
(a Reflection on the very root the copy was made to keep pristine), answered "[daemon]" ok,
and ``serve`` on the copy refused to start, saying a daemon already served it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.engine.daemon import daemon_file, read_daemon
from tests.daemon_lock import serve_lock


def _advertise(root: Path, served: Path) -> dict[str, object]:
    """A daemon.json in ``root`` naming a live process serving ``served``."""
    info = {"pid": os.getppid(), "host": "127.0.0.1", "port": 8000, "root": str(served)}
    daemon_file(root).write_text(json.dumps(info), "utf-8")
    return info


def test_a_daemon_json_copied_from_another_root_names_no_daemon_of_this_one(
        root: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _advertise(root, root)
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)

    assert read_daemon(copy) is None
    assert f"ignoring {daemon_file(copy)}: it names the daemon of {root}" in caplog.text


def test_trigger_on_a_copied_root_runs_here_not_in_the_original_roots_daemon(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx

    _advertise(root, root)
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    calls: list[object] = []
    monkeypatch.setattr(httpx, "post", lambda *a, **k: calls.append((a, k)))

    result = CliRunner().invoke(cli, ["trigger", "revalidate_insights", "--force", "--root",
                                      str(copy)])

    assert result.exit_code == 0, result.output
    assert calls == []
    assert "[in-process]" in result.stdout


def test_the_daemon_of_this_root_is_found_by_another_path_to_it(
        root: Path, tmp_path: Path) -> None:
    info = _advertise(root, root)
    link = tmp_path / "link"
    link.symlink_to(root, target_is_directory=True)

    with serve_lock(root):
        assert read_daemon(link) == info


def test_a_daemon_json_naming_a_path_not_found_here_is_still_read(root: Path) -> None:
    """A daemon in a container names the root by its path there: nothing says it is another."""
    info = _advertise(root, Path("/no/such/root/in/this/namespace"))

    with serve_lock(root):
        assert read_daemon(root) == info
