"""A daily log moved by hand into another user's folder.

Its frontmatter and entries still say ``user_id: alice`` / ``owner_id: alice``, but the index
reads a log's user from its folder: alice's Episodes silently became bob's (bob's searches and
briefings answered with them) and neither ``status`` nor ``lint`` said a word. The parser now
warns that the file's user_id is not its folder's; nothing is dropped.
"""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path

from everos_reflect.embedding import HashEmbedder
from everos_reflect.index.sync import Indexer
from everos_reflect.lint import lint_report
from everos_reflect.markdown.parser import parse_log
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime

ALICE, BOB = UserRef.of("alice"), UserRef.of("bob")
DAY = date(2026, 10, 12)
USERS = "default_app/default_project/users"


def add(rt: Runtime, ref: UserRef, content: str) -> str:
    return rt.store.append(ref, Kind.EPISODE, {"timestamp": "2026-10-12T10:00:00+00:00",
                                              "parent_type": "memcell"},
                           {"Subject": "Pets", "Content": content}, day=DAY).id


def test_a_log_moved_into_another_users_folder_is_reported_and_still_read(root: Path) -> None:
    rt = Runtime(root, embedder=HashEmbedder(16))
    try:
        add(rt, ALICE, "Alice adopted a dog.")
        moved = root / USERS / "bob/episodes/episode-2026-10-12.md"
        moved.parent.mkdir(parents=True)
        shutil.move(root / USERS / "alice/episodes/episode-2026-10-12.md", moved)
        report = Indexer(rt).scan()
        label = f"{USERS}/bob/episodes/episode-2026-10-12.md"
        [problem] = report.problems[label]
        assert "user_id 'alice' is not the user of the folder it is in ('bob')" in problem
        assert not lint_report(root)["ok"]
        rows = rt.db().execute("SELECT user_id, text FROM entries").fetchall()
        assert [tuple(r) for r in rows] == [("bob", "Alice adopted a dog.")]
    finally:
        rt.close()


def test_a_log_in_its_own_users_folder_has_no_such_warning(root: Path) -> None:
    rt = Runtime(root, embedder=HashEmbedder(16))
    try:
        add(rt, ALICE, "Alice adopted a dog.")
        path = rt.store.log_path(ALICE, Kind.EPISODE, DAY)
        log = parse_log(path.read_text(), f"{USERS}/alice/episodes/episode-2026-10-12.md")
        assert log.diagnostics == []
        assert Indexer(rt).scan().problems == {}
    finally:
        rt.close()
