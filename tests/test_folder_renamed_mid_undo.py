"""A user's folder renamed by hand WHILE an ``undo`` of theirs runs (not killed): its next
write found the entries gone, and the undo failed with "no entry af_… for user u_andrew" (of
entries that had only moved), its journal row kept, while the renamed folder held the
narrative live beside the sources already restored until the next start finished it. The
undo is now finished where the folder went, at once, and answers for that user."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.markdown import settling
from everos_reflect.markdown.parser import UNDONE
from everos_reflect.model import UserRef
from everos_reflect.strategies.undo import undo_merge
from tests.reflect_fixtures import ANDREW, reports
from tests.test_merge_recovery_user_moved import entries_of, users_folder
from tests.test_undo_copied_half_done import update_merged

pytestmark = pytest.mark.usefixtures("settle_at_once")

BOB = UserRef.of("u_bob")


@pytest.mark.parametrize("write", ["undeprecate", "deprecate"])
def test_a_folder_renamed_while_its_undo_runs_gets_the_undo_finished_there(
        root: Path, monkeypatch: pytest.MonkeyPatch, write: str) -> None:
    rt, first, fourth, update = update_merged(root)
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 0)
    real = getattr(rt.store, write)
    done: list[bool] = []

    def renaming(*args: Any, **kwargs: Any) -> Any:  # just before the undo's first such write
        if not done:
            done.append(True)
            shutil.move(users_folder(root) / "u_andrew", users_folder(root) / "u_bob")
        return real(*args, **kwargs)

    monkeypatch.setattr(rt.store, write, renaming)
    result = undo_merge(rt, ANDREW, update.id)
    monkeypatch.undo()
    try:
        assert result.ref == BOB and result.archived == [update.id]
        assert sorted(result.restored) == sorted([first.id, fourth.id])
        assert not (users_folder(root) / "u_andrew").exists()
        bob = entries_of(rt, BOB)
        assert bob[update.id].deprecated_by == UNDONE
        assert bob[first.id].deprecated_by is bob[fourth.id].deprecated_by is None
        assert rt.db().execute("SELECT COUNT(*) FROM merge_journal").fetchone()[0] == 0
        assert [(r["owner_id"], r["status"]) for r in reports(rt)
                if r["merged_entry_id"] == update.id] == [("u_bob", "undone")]
    finally:
        rt.close()
