"""An undo finishes or rolls back whole, and says which, in the copies of its folder and in
the index too (session 51, helper B).

- An interrupted undo finished at a start, whose folder was copied by hand while it was half
  done: the copy's log refusing the undo (it is rolled back there) made the start say the
  undo itself "cannot be finished" and drop its row, though it was finished; an I/O error in
  the copy said the same of it ("cannot finish the interrupted undo … yet").
- A roll back left the index to the watcher: the sources an interrupted undo had restored
  (synced by the watcher meanwhile) stayed live in the index after the start rolled the undo
  back, so ``search`` and ``status`` read them as restored until a scan.
- ``undo --cascade`` with the folder copied by hand during the later merge's undo: the later
  undo was finished in the copy, the earlier one only where it began, so the copy stopped
  between the two undos (the earlier narrative live again, its sources archived toward it).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.errors import MarkdownError
from everos_reflect.index.sync import Indexer
from everos_reflect.markdown.parser import UNDONE
from everos_reflect.model import UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import journal
from everos_reflect.strategies.undo import undo_merge
from tests.reflect_fixtures import ANDREW, all_entries, check_invariants, reports
from tests.test_folder_copied_mid_merge import BOB, state
from tests.test_folder_copied_mid_undo import copied_at_first_archive
from tests.test_undo import REF, SETTINGS, _undo_killed_after_restoring, deprecated_in_markdown
from tests.test_undo_copied_half_done import copy_to_bob, kill_undo_after_restoring, update_merged
from tests.test_undo_refused_half_way import merged, pasted_twice

pytestmark = pytest.mark.usefixtures("settle_at_once")


def journal_rows(rt: Runtime) -> int:
    return rt.db().execute("SELECT COUNT(*) FROM merge_journal").fetchone()[0]


def refusing_in(rt: Runtime, monkeypatch: pytest.MonkeyPatch, user: UserRef,
                error: type[Exception]) -> None:
    """``user``'s logs refuse the undo's archive (``undone``) with ``error``; every other
    write, the roll back's among them, goes through."""
    real = rt.store.deprecate

    def refusing(ref: UserRef, mapping: dict[str, str], *args: Any, **kwargs: Any) -> Any:
        if ref == user and UNDONE in mapping.values():
            if error is MarkdownError:
                raise MarkdownError("log.md", 3, "not undoing in this file: duplicate entry id")
            raise error(28, "No space left on device")
        return real(ref, mapping, *args, **kwargs)

    monkeypatch.setattr(rt.store, "deprecate", refusing)


def undo_said(caplog: pytest.LogCaptureFixture, narrative: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "everos_reflect.strategies.undo"
            and r.levelno >= logging.WARNING and narrative in r.getMessage()]


COPY_OUTCOMES = [
    pytest.param(MarkdownError, 0, "is finished there, but not in the logs of {copy}",
                 ("rolled back", "undo it there with --user u_bob"),
                 ("cannot be finished", "cannot finish"), False, id="refused-rolled-back-there"),
    pytest.param(OSError, 1, "is finished; a copy of its folder taken by hand while it was "
                 "half done cannot be finished yet", ("the next start finishes it",),
                 ("cannot finish",), True, id="io-error-row-kept-for-the-copy"),
]


@pytest.mark.parametrize(("error", "rows_left", "said_first", "said_also", "not_said",
                          "copy_undone"), COPY_OUTCOMES)
def test_a_copy_refusing_or_failing_the_undo_is_said_apart_from_the_finished_undo(
        root: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        error: type[Exception], rows_left: int, said_first: str, said_also: tuple[str, ...],
        not_said: tuple[str, ...], copy_undone: bool) -> None:
    """A copy whose log refuses the undo has it rolled back there (nothing left to do); one
    failing on I/O keeps the row, and the next start finishes the undo there."""
    rt, first, fourth, update = update_merged(root)
    try:
        kill_undo_after_restoring(rt, monkeypatch, update)
        copy_to_bob(rt)
        Indexer(rt).scan()
        refusing_in(rt, monkeypatch, BOB, error)

        with caplog.at_level(logging.WARNING):
            journal.recover(rt, Indexer(rt))
        monkeypatch.undo()

        andrew = all_entries(rt, ANDREW)
        assert andrew[update.id].deprecated_by == UNDONE  # finished where it began
        assert andrew[fourth.id].deprecated_by is andrew[first.id].deprecated_by is None
        assert journal_rows(rt) == rows_left
        said = undo_said(caplog, update.id)
        assert not any(words in m for m in said for words in not_said), said
        [copy] = said
        assert copy.startswith(f"the interrupted undo of {update.id} ({ANDREW}) "
                               + said_first.format(copy=BOB)), copy
        assert all(words in copy for words in said_also), copy

        journal.recover(rt, Indexer(rt))  # the next start (the disk has room again)
        assert journal_rows(rt) == 0
        bob = check_invariants(rt, BOB)
        assert (bob[update.id].deprecated_by == UNDONE) is copy_undone
        assert {bob[fourth.id].deprecated_by, bob[first.id].deprecated_by} \
            == ({None} if copy_undone else {update.id})  # rolled back: the merge whole
        if copy_undone:
            assert state(bob) == state(all_entries(rt, ANDREW))
    finally:
        rt.close()


def indexed_deprecation(rt: Runtime, ids: list[str]) -> dict[str, str | None]:
    marks = "?" * len(ids)
    return dict(rt.db().execute(
        f"SELECT id, deprecated_by FROM entries WHERE user_id=? AND id IN ({','.join(marks)})",
        (REF.user_id, *ids)).fetchall())


def test_a_roll_back_at_start_re_indexes_what_it_archived_again(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = Runtime(root, SETTINGS, embedder=HashEmbedder(64))
    try:
        sources, narrative = _undo_killed_after_restoring(rt, monkeypatch)
        ids = [e.id for e in sources]
        Indexer(rt).scan()  # the watcher syncs the restored sources
        assert indexed_deprecation(rt, ids) == dict.fromkeys(ids)
        pasted_twice(rt, narrative.id)

        journal.recover(rt, Indexer(rt))  # the start rolls the undo back: no scan after it

        assert all(deprecated_in_markdown(rt)[i] == narrative.id for i in ids)
        assert indexed_deprecation(rt, ids) == dict.fromkeys(ids, narrative.id)
        members = dict(rt.db().execute(
            "SELECT entry_id, deprecated_by FROM cluster_members WHERE entry_id IN (?, ?)",
            ids).fetchall())
        assert members == dict.fromkeys(ids, narrative.id)
    finally:
        rt.close()


def test_a_roll_back_of_an_undo_re_indexes_what_it_archived_again(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The forward path: the logs written and written back; the index agrees with them and
    lists no log as changed since it was read."""
    rt = Runtime(root, SETTINGS, embedder=HashEmbedder(64))
    try:
        sources, narrative = merged(rt)
        ids = [e.id for e in sources]
        real = rt.store.undeprecate

        def pasting(*args: object, **kwargs: object) -> object:
            restored = real(*args, **kwargs)  # type: ignore[arg-type]
            Indexer(rt).scan()  # a watcher that ran between the two writes
            pasted_twice(rt, narrative.id)
            return restored

        monkeypatch.setattr(rt.store, "undeprecate", pasting)
        with pytest.raises(MarkdownError, match="rolled back"):
            undo_merge(rt, REF, narrative.id)
        monkeypatch.undo()
        assert indexed_deprecation(rt, ids) == dict.fromkeys(ids, narrative.id)
    finally:
        rt.close()


def test_a_folder_copied_during_the_inner_undo_of_a_cascade_gets_both_undone_there(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt, first, fourth, update = update_merged(root)
    try:
        copied_at_first_archive(rt, monkeypatch)  # the inner (later) undo's archive
        result = undo_merge(rt, ANDREW, first.id, cascade=True)
        monkeypatch.undo()

        assert [c.merged_entry_id for c in result.cascaded] == [update.id]
        andrew, bob = check_invariants(rt, ANDREW), check_invariants(rt, BOB)
        assert andrew[first.id].deprecated_by == andrew[update.id].deprecated_by == UNDONE
        assert bob[first.id].deprecated_by == bob[update.id].deprecated_by == UNDONE
        assert all(bob[i].deprecated_by is None for i in [*first.sources, fourth.id])
        assert state(bob) == state(andrew)
        assert journal_rows(rt) == 0
        assert sorted((r["merged_entry_id"], r["owner_id"], r["status"]) for r in reports(rt)) \
            == sorted([(first.id, "u_andrew", "undone"), (update.id, "u_andrew", "undone")])
    finally:
        rt.close()


def test_a_cascade_leaves_a_copy_made_before_it_whole(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy taken before the cascade began is a whole merge of that user's: left as is."""
    rt, first, _, _ = update_merged(root)
    try:
        copy_to_bob(rt)
        Indexer(rt).scan()
        before = state(all_entries(rt, BOB))
        undo_merge(rt, ANDREW, first.id, cascade=True)
        assert state(check_invariants(rt, BOB)) == before
    finally:
        rt.close()
