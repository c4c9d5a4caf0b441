"""A user's folder copied by hand into another user's WHILE an ``undo`` runs (not killed), once
it has restored the merge's sources and before it archives the narrative: the copy held the
narrative live beside the entries it merged, live again, for good (an update merge's are its
previous narrative and one new Episode, which no run selects), and nothing settled it, as the
undo's row was gone once it finished. A copy must read as a copy of the finished undo (or of
the state before it), never of half: the undo now finishes every such copy before its row
goes, as the start after a kill does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from everos_reflect.markdown.parser import UNDONE
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.undo import undo_merge
from tests.reflect_fixtures import ANDREW, all_entries, check_invariants, reports
from tests.test_folder_copied_mid_merge import BOB, copy_to_bob, state
from tests.test_undo_copied_half_done import update_merged


def copied_at_first_archive(rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    """The folder copied as the undo is about to archive (its sources are restored)."""
    real = rt.store.deprecate
    done: list[bool] = []

    def copying(*args: Any, **kwargs: Any) -> Any:
        if not done:
            done.append(True)
            copy_to_bob(rt)
        return real(*args, **kwargs)

    monkeypatch.setattr(rt.store, "deprecate", copying)


def test_a_folder_copied_while_an_undo_runs_is_a_copy_of_the_finished_undo(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt, first, fourth, update = update_merged(root)
    copied_at_first_archive(rt, monkeypatch)
    undo_merge(rt, ANDREW, update.id)
    monkeypatch.undo()
    try:
        andrew, bob = check_invariants(rt, ANDREW), check_invariants(rt, BOB)
        assert bob[update.id].deprecated_by == UNDONE
        assert bob[fourth.id].deprecated_by is bob[first.id].deprecated_by is None
        assert state(bob) == state(andrew)
        indexed = dict(rt.db().execute(
            "SELECT user_id, deprecated_by FROM entries WHERE id=?", (update.id,)).fetchall())
        assert indexed == {"u_andrew": UNDONE, "u_bob": UNDONE}
        # the audit stays the first user's, as for a copy made after the undo
        assert [(r["owner_id"], r["mode"], r["status"]) for r in reports(rt)] == [
            ("u_andrew", "init", "ok"), ("u_andrew", "update", "undone")]
        assert rt.db().execute("SELECT COUNT(*) FROM merge_journal").fetchone()[0] == 0
    finally:
        rt.close()


def test_a_folder_copied_before_the_undo_keeps_its_merge(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Copied before the undo's first write: a whole merge of the copy's user, left as is."""
    rt, _, _, update = update_merged(root)
    copy_to_bob(rt)
    before = state(all_entries(rt, BOB))
    undo_merge(rt, ANDREW, update.id)
    try:
        assert state(check_invariants(rt, BOB)) == before
    finally:
        rt.close()
