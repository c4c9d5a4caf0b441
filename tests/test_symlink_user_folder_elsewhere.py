"""A user folder linked to a folder of the root that is no user folder (``users/carol ->
../users``, the users folder itself, or one of another user's kind folders) is refused, as a
link to another user's folder is. ``add --user carol`` wrote ``users/episodes/episode-….md``,
a misplaced file of no user, and ``search --user carol`` then answered with it as carol's."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from everos_reflect.cli.main import cli
from everos_reflect.embedding import HashEmbedder
from everos_reflect.errors import MarkdownError
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings

ANN = UserRef.of("u_ann")
CAROL = UserRef.of("carol")
USERS = "default_app/default_project/users"
CAROL_LOG = """\
---
type: episode_daily
schema_version: 1
user_id: carol
date: '2026-10-12'
---
<!-- entry:ep_20261012_0001 -->
---
owner_id: carol
timestamp: 2026-10-12T09:00:00+00:00
parent_type: memcell
---
## Subject
Tea

## Content
Carol drinks tea.
<!-- /entry:ep_20261012_0001 -->
"""
#: Where carol's folder leads, and where her log of 2026-10-12 really is through it.
TARGETS = {".": f"{USERS}/episodes/episode-2026-10-12.md",
           "u_ann/episodes": f"{USERS}/u_ann/episodes/episodes/episode-2026-10-12.md"}


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def tree(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): None if p.is_dir() else p.read_bytes()
            for p in sorted(root.rglob("*")) if ".index" not in p.parts}


def linked_carol(root: Path, target: str) -> Runtime:
    rt = Runtime(root, Settings(), embedder=HashEmbedder(32))
    rt.store.append(ANN, Kind.EPISODE, {"timestamp": "2026-10-12T09:00:00+00:00",
                                        "parent_type": "memcell"},
                    {"Subject": "Cats", "Content": "Ann has a cat."}, day=date(2026, 10, 12))
    (root / USERS / "carol").symlink_to(target, target_is_directory=True)
    return rt


@pytest.mark.parametrize("target", list(TARGETS))
def test_add_through_a_user_folder_linked_to_no_user_folder_is_refused_writing_nothing(
        root: Path, target: str) -> None:
    rt = linked_carol(root, target)
    before = tree(root)
    added = run("add", "--root", str(root), "--user", "carol", "--subject", "Tea",
                "--content", "Carol drinks tea.", "--timestamp", "2026-10-12T10:00:00+00:00")
    assert added.exit_code == 1, added.output
    assert f"not writing this file: its path leads through a symlink to {TARGETS[target]}" \
        in added.output
    with pytest.raises(MarkdownError, match="not a daily log of this root"):
        rt.store.append(CAROL, Kind.EPISODE, {"timestamp": "2026-10-13T10:00:00+00:00",
                                              "parent_type": "memcell"},
                        {"Subject": "Tea", "Content": "Carol drinks tea."},
                        day=date(2026, 10, 13))
    assert tree(root) == before


@pytest.mark.parametrize("target", list(TARGETS))
def test_a_log_found_through_such_a_folder_is_not_read_as_the_users_and_lint_names_it(
        root: Path, target: str) -> None:
    rt = linked_carol(root, target)
    there = root / TARGETS[target]
    there.parent.mkdir(parents=True, exist_ok=True)
    there.write_text(CAROL_LOG)  # as the add wrote it before
    assert rt.store.entries(CAROL, Kind.EPISODE) == []
    assert [e.id for e in rt.store.entries(ANN, Kind.EPISODE)] == ["ep_20261012_0001"]

    found = run("search", "tea", "--root", str(root), "--user", "carol", "--json")
    assert found.exit_code == 0, found.output
    assert "Carol drinks tea" not in found.stdout

    lint = run("lint", "--root", str(root), "--json")
    assert lint.exit_code == 1
    named = {p["file"]: p["message"] for p in json.loads(lint.stdout)["problems"]}
    message = named[f"{USERS}/carol/episodes/episode-2026-10-12.md"]
    assert f"symlink to {TARGETS[target]}" in message, message
    assert there.read_text() == CAROL_LOG
