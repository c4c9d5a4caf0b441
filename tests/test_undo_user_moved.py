"""An undo interrupted by a crash, then its user's folder renamed or removed by hand, before
the next start finishes it. Finished under the old user's name, the undo failed at every start,
for ever, and left the narrative live beside its restored sources."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import journal
from tests.test_undo import _undo_killed_after_restoring, report_status

ZED = UserRef.of("u_zed")


def users(rt: Runtime) -> Path:
    return rt.root / "default_app" / "default_project" / "users"


def marks(rt: Runtime, ref: UserRef) -> dict[str, str | None]:
    return {e.id: e.deprecated_by for kind in (Kind.EPISODE, Kind.ATOMIC_FACT)
            for e in rt.store.entries(ref, kind)}


def journal_rows(rt: Runtime) -> int:
    return rt.db().execute("SELECT COUNT(*) FROM merge_journal").fetchone()[0]


def test_an_undo_whose_folder_was_renamed_is_finished_in_the_new_folder(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    sources, narrative = _undo_killed_after_restoring(rt, monkeypatch)
    shutil.move(users(rt) / "u_andrew", users(rt) / "u_zed")

    journal.recover(rt, Indexer(rt))

    assert sorted(p.name for p in users(rt).iterdir()) == ["u_zed"]
    marked = marks(rt, ZED)
    assert marked[narrative.id] == "undone"
    assert all(marked[e.id] is None for e in sources)
    assert report_status(rt, narrative.id) == "undone"
    assert journal_rows(rt) == 0
    indexed = {r["user_id"]: r["deprecated_by"] for r in rt.db().execute(
        "SELECT user_id, deprecated_by FROM entries WHERE id=?", (narrative.id,))}
    assert indexed == {"u_zed": "undone"}  # the index knows the move and the undo


def test_an_undo_whose_folder_was_removed_is_dropped_with_a_warning(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    _undo_killed_after_restoring(rt, monkeypatch)
    shutil.rmtree(users(rt) / "u_andrew")

    with caplog.at_level(logging.WARNING):
        journal.recover(rt, Indexer(rt))

    assert list(users(rt).iterdir()) == []  # nothing written for a user nobody has
    assert journal_rows(rt) == 0
    assert "user's folder was removed by hand" in caplog.text


def test_an_undo_whose_narrative_two_users_hold_now_is_kept_and_named(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    _, narrative = _undo_killed_after_restoring(rt, monkeypatch)
    shutil.copytree(users(rt) / "u_andrew", users(rt) / "u_yan")
    shutil.move(users(rt) / "u_andrew", users(rt) / "u_zed")

    with caplog.at_level(logging.ERROR):
        journal.recover(rt, Indexer(rt))

    assert journal_rows(rt) == 1  # not guessed: finished once a person says where
    assert marks(rt, ZED)[narrative.id] is None
    assert f"narrative {narrative.id} of those sources is in the logs of" in caplog.text
    assert "u_yan" in caplog.text and "u_zed" in caplog.text
