"""The take-back of an undo (a ``--cascade`` refused at the earlier merge, session 51) is
crash-safe as the undo is, keeps the audit statuses an undo finished by a start had, and an
undo finished at a start says what became of it in each copy of its folder (session 52,
helper B).

- ``_take_back`` wrote no journal row: a kill between its two patches left the later merge's
  narrative live beside its sources for good (duplicates in search), one after them its
  audit rows ``undone``, and nothing finished it at the next start. It now writes a row
  before its first patch; the start finishes it, the logs, audit and index as before the
  cascade.
- The audit statuses an undo sets back when taken back were read when its rows were set
  ``undone``: an undo interrupted after that and finished by a start kept none, and taking it
  back left its rows ``undone``. They are now read before the undo's first write and kept in
  its journal row.
- A copy of the folder failing on I/O stopped the start at that copy: the copies before it
  were finished but said of no one, those after it not tried.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.llm.extractive import ExtractiveLLM
from everos_reflect.markdown.parser import UNDONE
from everos_reflect.model import UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import journal, undo
from everos_reflect.strategies.undo import undo_merge
from tests.reflect_fixtures import ANDREW, all_entries, check_invariants, make_runtime
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables
from tests.test_folder_copied_mid_merge import state
from tests.test_undo_cascade_taken_back_b51 import (
    audit,
    indexed,
    pasted_at_the_earlier_restore,
    unpaste,
)
from tests.test_undo_copied_half_done import kill_undo_after_restoring, update_merged
from tests.test_undo_whole_b51 import journal_rows, refusing_in, undo_said

pytestmark = pytest.mark.usefixtures("settle_at_once")

STEPS = ["journaled", "live_again", "archived_again", "audit", "indexed"]


class Killed(BaseException):
    """The process killed: nothing in it catches this."""


def killed_at(monkeypatch: pytest.MonkeyPatch, step: str) -> list[str]:
    """The take-back killed once it reaches ``step``; returns the steps it reached."""
    reached: list[str] = []

    def checkpoint(at: str) -> None:
        reached.append(at)
        if at == step:
            raise Killed(at)

    monkeypatch.setattr(undo, "take_back_checkpoint", checkpoint)
    return reached


def restarted(rt: Runtime, root: Path) -> Runtime:
    """The process is gone; the next one recovers at its start."""
    rt.close()
    rt = make_runtime(root, ExtractiveLLM())
    journal.recover(rt, Indexer(rt))
    return rt


@pytest.mark.parametrize("step", STEPS)
def test_a_take_back_killed_at_any_step_is_finished_by_the_next_start(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    rt, first, fourth, update = update_merged(root)
    before, rows, index = state(all_entries(rt)), audit(rt), indexed(rt)
    pasted = pasted_at_the_earlier_restore(rt, monkeypatch, first.sources[0])
    reached = killed_at(monkeypatch, step)

    with pytest.raises(Killed):
        undo_merge(rt, ANDREW, first.id, cascade=True)
    monkeypatch.undo()
    assert reached == STEPS[:STEPS.index(step) + 1]
    assert journal_rows(rt) == 1  # the take-back's row, for the next start
    unpaste(pasted[0])

    rt = restarted(rt, root)
    try:
        now = all_entries(rt)
        assert now[update.id].deprecated_by is None
        assert now[first.id].deprecated_by == now[fourth.id].deprecated_by == update.id
        assert state(now) == before  # every entry as before the cascade
        assert audit(rt) == rows  # the later merge's rows `ok` again
        assert indexed(rt) == index
        assert journal_rows(rt) == 0
        Indexer(rt).scan()
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "rebuilt")
        check_invariants(rt)
    finally:
        rt.close()


def test_a_take_back_failing_on_io_says_the_next_start_finishes_it(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An I/O error between the take-back's two patches: the narrative live beside its
    sources; it said "stays done: taking it back was refused too", false, and nothing
    finished it."""
    rt, first, _, update = update_merged(root)
    before = state(all_entries(rt))
    pasted = pasted_at_the_earlier_restore(rt, monkeypatch, first.sources[0])

    def full(at: str) -> None:
        if at == "live_again":
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(undo, "take_back_checkpoint", full)
    with pytest.raises(Exception) as refused:
        undo_merge(rt, ANDREW, first.id, cascade=True)
    monkeypatch.undo()
    said = str(refused.value)
    assert "stays done" not in said and "is taken back" not in said
    assert (f"taking back the undo of {update.id} this --cascade did first stopped half-way "
            "(No space left on device): the next start") in said
    assert journal_rows(rt) == 1
    unpaste(pasted[0])

    rt = restarted(rt, root)
    try:
        assert state(check_invariants(rt)) == before
        assert journal_rows(rt) == 0
    finally:
        rt.close()


def test_an_undo_finished_by_a_start_keeps_the_audit_status_its_take_back_sets_again(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The undo killed once its audit rows were set ``undone`` (re-indexing its logs), then
    finished by a start: taking it back set nothing back, its rows staying ``undone`` beside
    a live narrative. The only command path that takes back an undo a start finished is a
    ``--cascade`` whose inner undo's folder was renamed by hand mid-way (``_apply_here``);
    the take-back is driven directly here."""
    rt, _, _, update = update_merged(root)
    rows = audit(rt)

    def killed(*args: object, **kwargs: object) -> None:
        raise Killed("resync")

    monkeypatch.setattr(undo, "_resync", killed)
    with pytest.raises(Killed):
        undo_merge(rt, ANDREW, update.id)
    monkeypatch.undo()
    assert ("undone" in [status for _, _, status in audit(rt)]) and journal_rows(rt) == 1

    rt.close()
    rt = make_runtime(root, ExtractiveLLM())
    try:
        [result] = undo.finish_interrupted(rt)
        assert result.merged_entry_id == update.id
        assert set(result.prior_status.values()) == {"ok"}
        undo._take_back(rt, result)
        assert audit(rt) == rows
        assert all_entries(rt)[update.id].deprecated_by is None
    finally:
        rt.close()


def copy_to(rt: Runtime, user: str) -> UserRef:
    users = rt.root / "default_app" / "default_project" / "users"
    shutil.copytree(users / "u_andrew", users / user)
    for log in (users / user).rglob("*.md"):
        log.write_text(log.read_text().replace("u_andrew", user))
    return UserRef.of(user)


def test_a_copy_failing_on_io_leaves_the_other_copies_finished_and_each_said(
        root: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    rt, _, _, update = update_merged(root)
    try:
        kill_undo_after_restoring(rt, monkeypatch, update)
        bob, carol, dave = (copy_to(rt, u) for u in ("u_bob", "u_carol", "u_dave"))
        Indexer(rt).scan()
        refusing_in(rt, monkeypatch, carol, OSError)  # copy 2 of 3

        with caplog.at_level(logging.WARNING):
            journal.recover(rt, Indexer(rt))
        monkeypatch.undo()

        andrew = all_entries(rt, ANDREW)
        assert andrew[update.id].deprecated_by == UNDONE
        assert state(all_entries(rt, bob)) == state(andrew)
        assert state(all_entries(rt, dave)) == state(andrew)  # tried after carol's failed
        assert all_entries(rt, carol)[update.id].deprecated_by is None
        assert journal_rows(rt) == 1  # kept for carol alone
        said = undo_said(caplog, update.id)
        assert len(said) == 3, said
        assert any(f"is finished in the logs of {bob} too" in m for m in said), said
        assert any(f"is finished in the logs of {dave} too" in m for m in said), said
        [failed] = [m for m in said if str(carol) in m]
        assert failed.startswith(f"the interrupted undo of {update.id} ({ANDREW}) is finished; "
                                 "a copy of its folder taken by hand while it was half done "
                                 f"cannot be finished yet: the logs of {carol} (")
        assert "No space left on device" in failed

        journal.recover(rt, Indexer(rt))  # the disk has room again: carol's copy too
        assert journal_rows(rt) == 0
        assert state(check_invariants(rt, carol)) == state(andrew)
        assert state(all_entries(rt, bob)) == state(all_entries(rt, dave)) == state(andrew)
    finally:
        rt.close()


def test_a_cascade_whose_take_back_succeeds_leaves_no_row(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The row is the take-back's own: dropped once it is done, none left for a start."""
    rt, first, _, _ = update_merged(root)
    try:
        pasted = pasted_at_the_earlier_restore(rt, monkeypatch, first.sources[0])
        reached = killed_at(monkeypatch, "never")
        with pytest.raises(Exception, match="is taken back"):
            undo_merge(rt, ANDREW, first.id, cascade=True)
        monkeypatch.undo()
        unpaste(pasted[0])
        assert reached == STEPS
        assert journal_rows(rt) == 0
    finally:
        rt.close()


def test_undo_help_says_what_a_failure_leaves() -> None:
    """``undo --help`` said exit 1 was "refused or failed (nothing changed)": not so of an
    I/O error half-way (the next start finishes the undo) nor of a --cascade whose later
    undo a log refuses to take back (it stays done)."""
    from click.testing import CliRunner

    from everos_reflect.cli.main import cli

    said = " ".join(CliRunner().invoke(cli, ["undo", "--help"]).output.split())
    assert "(nothing changed)" not in said
    assert "An I/O error half-way leaves the undo to the next command that writes" in said
    assert "one a log refuses to take back stays done" in said
    assert "With --cascade the later merges built on it are undone first" in said
