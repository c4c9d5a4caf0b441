"""``undo --cascade`` of a merge a later update folded in, the user's folder renamed by hand
WHILE the inner undo (the later merge's) runs: the inner undo was finished where the folder
went (``_apply_here``), then the outer one looked its narrative up under the old name and
failed with "no entry … for user u_andrew", leaving the first merge's narrative live beside
the sources the inner undo had given back. The outer undo now follows the folder too: both
are finished in the renamed folder, and the answer names that user."""

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
def test_a_folder_renamed_during_the_inner_undo_of_a_cascade_gets_both_undone_there(
        root: Path, monkeypatch: pytest.MonkeyPatch, write: str) -> None:
    rt, first, fourth, update = update_merged(root)
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 0)
    real = getattr(rt.store, write)
    done: list[bool] = []

    def renaming(*args: Any, **kwargs: Any) -> Any:  # the inner undo's first such write
        if not done:
            done.append(True)
            shutil.move(users_folder(root) / "u_andrew", users_folder(root) / "u_bob")
        return real(*args, **kwargs)

    monkeypatch.setattr(rt.store, write, renaming)
    result = undo_merge(rt, ANDREW, first.id, cascade=True)
    monkeypatch.undo()
    try:
        assert done
        assert result.ref == BOB and result.merged_entry_id == first.id
        assert [(c.ref, c.merged_entry_id) for c in result.cascaded] == [(BOB, update.id)]
        assert result.archived == [first.id]
        assert sorted(result.restored) == sorted(first.sources)
        assert not (users_folder(root) / "u_andrew").exists()
        bob = entries_of(rt, BOB)
        assert bob[update.id].deprecated_by == bob[first.id].deprecated_by == UNDONE
        assert bob[fourth.id].deprecated_by is None
        assert all(bob[i].deprecated_by is None for i in first.sources)
        assert rt.db().execute("SELECT COUNT(*) FROM merge_journal").fetchone()[0] == 0
        assert sorted((r["merged_entry_id"], r["owner_id"], r["status"]) for r in reports(rt)) \
            == sorted([(first.id, "u_bob", "undone"), (update.id, "u_bob", "undone")])
    finally:
        rt.close()
