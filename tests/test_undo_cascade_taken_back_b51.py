"""``undo --cascade`` refused at the earlier merge once it has undone the later one: the
later undo is taken back, so the cascade leaves the logs, the audit and the index as before
it. It left the later merge undone and the earlier not, the error saying of the earlier
one alone "rolled back: the logs are as before it". The refusal here comes from a log
changed by hand while the cascade ran (an id pasted twice into a log of the earlier merge's,
after every log was checked): what no check made before the first write can see. When
taking the later undo back is refused too (the log it would write is the one a person broke),
the error says the later undo stays done and what finishes the cascade."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.errors import MarkdownError
from everos_reflect.index.sync import Indexer
from everos_reflect.markdown.parser import UNDONE
from everos_reflect.model import Entry
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.undo import undo_merge
from tests.reflect_fixtures import ANDREW, all_entries, check_invariants, reports
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables
from tests.test_folder_copied_mid_merge import state
from tests.test_undo_copied_half_done import update_merged

pytestmark = pytest.mark.usefixtures("settle_at_once")


def paste_twice(rt: Runtime, entry_id: str) -> Path:
    """The block of ``entry_id`` pasted again at the end of its log (its id twice)."""
    path = rt.store.path_for_id(ANDREW, entry_id)
    text = path.read_text()
    block = re.search(rf"<!-- entry:{entry_id} -->.*?<!-- /entry:{entry_id} -->\n", text,
                      flags=re.S)
    assert block is not None
    path.write_text(text + "\n" + block.group(0))
    return path


def unpaste(path: Path) -> None:
    path.write_text(path.read_text().rsplit("\n<!-- entry:", 1)[0] + "\n")


def pasted_at_the_earlier_restore(rt: Runtime, monkeypatch: pytest.MonkeyPatch,
                                  entry_id: str) -> list[Path]:
    """``entry_id`` pasted twice by hand as the cascade begins the earlier undo (its restore,
    the second restore of the run): after every check, after the later undo."""
    real = rt.store.undeprecate
    pasted: list[Path] = []
    calls: list[int] = []

    def pasting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            pasted.append(paste_twice(rt, entry_id))
        return real(*args, **kwargs)

    monkeypatch.setattr(rt.store, "undeprecate", pasting)
    return pasted


def audit(rt: Runtime) -> list[tuple[str, str, str]]:
    return [(r["merged_entry_id"], r["mode"], r["status"]) for r in reports(rt)]


def indexed(rt: Runtime) -> dict[str, str | None]:
    return dict(rt.db().execute(
        "SELECT id, deprecated_by FROM entries WHERE user_id='u_andrew'").fetchall())


def test_a_cascade_refused_at_the_earlier_merge_takes_the_later_undo_back(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt, first, fourth, update = update_merged(root)
    try:
        source = first.sources[0]
        before, rows, index = state(all_entries(rt)), audit(rt), indexed(rt)
        pasted = pasted_at_the_earlier_restore(rt, monkeypatch, source)

        with pytest.raises(MarkdownError) as refused:
            undo_merge(rt, ANDREW, first.id, cascade=True)
        monkeypatch.undo()

        assert pasted, "the cascade never reached the earlier undo"
        said = str(refused.value)
        assert "duplicate entry id" in said
        assert (f"the undo of {update.id} this --cascade did first is taken back (it live "
                "again, its sources archived toward it)") in said
        unpaste(pasted[0])
        now = all_entries(rt)
        assert now[update.id].deprecated_by is None
        assert now[first.id].deprecated_by == now[fourth.id].deprecated_by == update.id
        assert state(now) == before  # every entry as before the cascade
        assert audit(rt) == rows  # the later merge's row `ok` again
        assert indexed(rt) == index
        assert rt.db().execute("SELECT COUNT(*) FROM merge_journal").fetchone()[0] == 0
        Indexer(rt).scan()
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "rebuilt")
        check_invariants(rt)

        result = undo_merge(rt, ANDREW, first.id, cascade=True)  # the log fixed: both undone
        assert [c.merged_entry_id for c in result.cascaded] == [update.id]
        assert all_entries(rt)[first.id].deprecated_by == UNDONE
    finally:
        rt.close()


def test_a_later_undo_that_cannot_be_taken_back_is_said_with_what_finishes_the_cascade(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The earlier narrative's own log broken: its undo is rolled back, and taking the later
    undo back (which archives that narrative toward the later one again) is refused too."""
    rt, first, fourth, update = update_merged(root)
    try:
        pasted = pasted_at_the_earlier_restore(rt, monkeypatch, first.id)

        with pytest.raises(MarkdownError) as refused:
            undo_merge(rt, ANDREW, first.id, cascade=True)
        monkeypatch.undo()

        said = str(refused.value)
        assert "is taken back" not in said
        assert (f"the undo of {update.id} this --cascade did first stays done: taking it "
                f"back was refused too (by the same log, {rt.store.rel(pasted[0])})") in said
        assert f"then undo {first.id} again to finish the cascade" in said
        unpaste(pasted[0])
        now: dict[str, Entry] = all_entries(rt)
        assert now[update.id].deprecated_by == UNDONE  # as said: the later undo done
        assert now[first.id].deprecated_by is None
        assert now[fourth.id].deprecated_by is None
        assert all(now[s].deprecated_by == first.id for s in first.sources)

        undo_merge(rt, ANDREW, first.id)  # what the message says finishes it
        now = check_invariants(rt)
        assert now[first.id].deprecated_by == now[update.id].deprecated_by == UNDONE
    finally:
        rt.close()


def test_a_copy_the_later_undo_was_finished_in_is_taken_back_too(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The folder copied by hand during the later undo (which is then finished in the copy
    too), and the earlier undo refused: the later undo is taken back in both folders."""
    from tests.test_folder_copied_mid_merge import BOB
    from tests.test_folder_copied_mid_undo import copied_at_first_archive

    rt, first, _, update = update_merged(root)
    try:
        before = state(all_entries(rt))
        copied_at_first_archive(rt, monkeypatch)  # the later undo's archive
        pasted = pasted_at_the_earlier_restore(rt, monkeypatch, first.sources[0])

        with pytest.raises(MarkdownError, match="is taken back"):
            undo_merge(rt, ANDREW, first.id, cascade=True)
        monkeypatch.undo()

        unpaste(pasted[0])
        assert state(all_entries(rt)) == before
        bob = all_entries(rt, BOB)
        assert bob[update.id].deprecated_by is None
        assert bob[first.id].deprecated_by == update.id
        assert state(bob) == before
    finally:
        rt.close()
