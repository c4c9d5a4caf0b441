"""A folder of the layout this account may not open (its mode, an ACL, another account's user
folder in a shared root) stopped `lint`, `status` and `reindex` with one line, "error:
Permission denied: …/carol/episodes", so nothing else was checked or rebuilt. Each is now
named as a problem and skipped; the rest is read as ever.

Permissions mean nothing to root, so the commands run as `nobody` (the tests run as root
where they can; elsewhere they are skipped)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime

SETPRIV = shutil.which("setpriv")
pytestmark = pytest.mark.skipif(os.geteuid() != 0 or SETPRIV is None,
                                reason="needs root and setpriv to run a command as nobody")
USERS = "default_app/default_project/users"
DENIED = ("not read: Permission denied: this folder may not be opened, so no log under it is "
          "read (nor written: add, Reflection, undo) until its permissions let this account in")


@pytest.fixture
def shared() -> Iterator[Path]:
    """A root nobody may reach (pytest's tmp folder is root's alone), with alice and carol."""
    top = Path(tempfile.mkdtemp(prefix="everos-denied-"))
    root = top / "root"
    rt = Runtime(root, embedder=HashEmbedder(16))
    for user in ("alice", "carol"):
        rt.store.append(UserRef.of(user), Kind.EPISODE, {"timestamp": "2026-10-12T09:00:00Z",
                                                      "parent_type": "memcell"},
                        {"Subject": "Pets", "Content": f"{user} has a cat."},
                        day=date(2026, 10, 12))
    rt.close()
    for folder, _, files in os.walk(top):
        os.chmod(folder, 0o777)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o666)
    yield root
    for folder, _, _ in os.walk(top):
        os.chmod(folder, 0o777)
    shutil.rmtree(top)


def _as_nobody(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVEROS_")}
    env["HOME"] = str(root.parent)
    return subprocess.run(
        [SETPRIV, "--reuid", "65534", "--regid", "65534", "--clear-groups", sys.executable,
         "-m", "everos_reflect.cli.main", *args, "--root", str(root)],
        capture_output=True, text=True, env=env, cwd=str(root.parent), timeout=120)


@pytest.mark.parametrize("denied", ["carol", "carol/episodes"])
def test_lint_names_a_folder_it_may_not_open_and_checks_the_rest(
        shared: Path, denied: str) -> None:
    os.chmod(shared / USERS / denied, 0)
    result = _as_nobody(shared, "lint", "--json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["files_checked"] == 1
    assert report["problems"] == [{"file": f"{USERS}/{denied}", "line": 0,
                                   "message": DENIED, "severity": "error"}]


def test_status_names_it_too(shared: Path) -> None:
    os.chmod(shared / USERS / "carol", 0)
    result = _as_nobody(shared, "status", "--json")
    assert result.returncode == 0, result.stderr
    problems = json.loads(result.stdout)["files_with_problems"]
    assert {"file": f"{USERS}/carol", "problems": [DENIED], "lines": [0]} in problems


def test_reindex_indexes_the_others_and_names_it(shared: Path) -> None:
    os.chmod(shared / USERS / "carol" / "episodes", 0)
    result = _as_nobody(shared, "reindex", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["entries_upserted"] == 1
    assert data["problems"] == {f"{USERS}/carol/episodes":
                                [f"{USERS}/carol/episodes: {DENIED}"]}
    assert "Traceback" not in result.stderr and "provenance" not in result.stderr
