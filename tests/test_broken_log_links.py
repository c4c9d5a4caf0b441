"""A symlink loop or a dangling symlink where a daily log goes: no log is read there and every
write to that day's log fails on it, so ``lint`` and ``status`` name it (``lint`` exits 1);
they said all was well while ``add`` failed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.link_fixtures import indexed_ann_root, run

LOG = "default_app/default_project/users/u_ann/episodes/episode-2026-10-12.md"
GOES = ("where a daily log goes: not read, and nothing is written to this log (add, "
        "Reflection, undo) until it is moved away")


@pytest.fixture
def indexed(root: Path) -> Path:
    """Ann's root with one Episode, indexed."""
    return indexed_ann_root(root)


@pytest.mark.parametrize(("target", "said"), [
    ("episode-2026-10-12.md", "a symlink loop"),
    ("gone.md", f"a symlink to {Path(LOG).parent}/gone.md, which does not exist,"),
], ids=["loop", "dangling"])
def test_lint_and_status_name_a_broken_link_where_a_log_goes(
        indexed: Path, target: str, said: str) -> None:
    (indexed / LOG).symlink_to(target)
    lint = run("lint", "--root", str(indexed), "--json")
    assert lint.exit_code == 1, lint.output
    problems = json.loads(lint.stdout)["problems"]
    assert [(p["file"], p["message"]) for p in problems] == [(LOG, f"{said} {GOES}")]

    status = run("status", "--root", str(indexed), "--json")
    document = json.loads(status.stdout)
    assert {"file": LOG, "problems": [f"{said} {GOES}"], "lines": [0]} in \
        document["files_with_problems"]

    add = run("add", "--root", str(indexed), "--user", "u_ann", "--subject", "s",
              "--content", "c", "--timestamp", "2026-10-12T10:00:00+00:00")
    assert add.exit_code == 1 and LOG in add.stderr
    assert (indexed / LOG).is_symlink() and not (indexed / LOG).exists()
