"""A merge killed past its point of no return, then its narrative deleted by hand (its entry,
or the whole log of the day), before the next start recovers it.

Recovery wrote the narrative again under a new id: it stood live while its sources stayed
archived toward the deleted id (``deprecated_entries`` keys are never re-pointed, SPEC §3),
hidden from search behind a narrative no log holds, and an ``undo`` of the new narrative
brought nothing back. The deletion is a person's, as after a finished merge: nothing is
written again, the audit row says so, and ``undo`` of the deleted id brings the sources back.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.markdown import settling
from everos_reflect.model import Kind, UserRef
from everos_reflect.strategies import journal
from everos_reflect.strategies.undo import undo_merge
from tests.reflect_fixtures import ANDREW, all_entries, reports, run_reflection
from tests.test_merge_recovery_user_moved import entries_of, users_folder
from tests.test_reflect_crash import crashed, restart
from tests.test_undo import _delete_entry

#: single-threaded crash simulations: nothing else writes the logs (conftest.py)
pytestmark = pytest.mark.usefixtures("settle_at_once")


def narrative_deleted_after(root: Path, monkeypatch: pytest.MonkeyPatch, step: str,
                            how: str) -> tuple[set[str], str]:
    """The seed's merge killed after ``step``, then its narrative deleted by hand (``how``:
    its entry, or its log): the seed's entry ids and the narrative's id."""
    rt, original = crashed(root, monkeypatch, step)
    [(plan, _)] = journal.pending(rt.db())
    assert plan.merged_id is not None
    log = rt.store.log_path(plan.ref, Kind.EPISODE, plan.day_date)
    if how == "entry":
        _delete_entry(rt, rt.store.get(ANDREW, plan.merged_id))
    else:
        log.unlink()
    return original, plan.merged_id


@pytest.mark.parametrize("how", ["entry", "log"])
@pytest.mark.parametrize("step", [journal.DEPRECATED, journal.SYNCED])
def test_a_narrative_deleted_after_the_commit_is_not_written_again(
        root: Path, monkeypatch: pytest.MonkeyPatch, step: str, how: str) -> None:
    original, narrative = narrative_deleted_after(root, monkeypatch, step, how)
    sources = sorted(i for i in original if i.startswith("ep_"))

    run_reflection(restart(root))

    rt = restart(root)
    entries = all_entries(rt)
    assert original <= set(entries), "an entry was lost"
    assert not [e.id for e in entries.values() if e.parent_type == "cluster"]
    assert all(entries[s].deprecated_by == narrative for s in sources)
    (row,) = reports(rt)
    assert (row["status"], row["merged_entry_id"]) == ("ok", narrative)
    assert f"then narrative {narrative} was deleted by hand" in row["error"]
    assert not journal.has_pending(root)

    result = undo_merge(rt, ANDREW, narrative)  # as after a finished merge deleted by hand

    assert result.restored == sources
    assert all(all_entries(rt)[s].deprecated_by is None for s in sources)


def test_a_narrative_deleted_before_any_source_pointed_at_it_is_written_again(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    original, _ = narrative_deleted_after(root, monkeypatch, journal.ARCHIVING, "entry")

    run_reflection(restart(root))

    entries = all_entries(restart(root))
    assert original <= set(entries), "an entry was lost"
    [live] = [e for e in entries.values() if e.parent_type == "cluster"]
    assert live.sources and all(entries[s].deprecated_by == live.id for s in live.sources)


@pytest.mark.parametrize("step", [journal.DEPRECATED, journal.SYNCED])
def test_a_narrative_deleted_after_the_commit_then_its_folder_renamed_is_settled_there(
        root: Path, monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    """Its sources archived toward it tell where the folder went: it was ``abandoned`` under
    the old name ("the folder was removed or renamed"), though its sources stayed archived."""
    original, narrative = narrative_deleted_after(root, monkeypatch, step, "entry")
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 0)  # renamed long after the writes
    shutil.move(users_folder(root) / "u_andrew", users_folder(root) / "u_bob")

    run_reflection(restart(root))

    rt = restart(root)
    bob = UserRef.of("u_bob")
    assert not (users_folder(root) / "u_andrew").exists()
    entries = entries_of(rt, bob)
    assert original <= set(entries), "an entry was lost"
    (row,) = reports(rt)
    assert (row["status"], row["owner_id"]) == ("ok", "u_bob")
    assert f"then narrative {narrative} was deleted by hand" in row["error"]
    sources = sorted(i for i in original if i.startswith("ep_"))
    assert undo_merge(rt, bob, narrative).restored == sources


@pytest.mark.parametrize("stale", [False, True])
def test_the_facts_of_a_narrative_deleted_before_the_commit_are_withdrawn(
        root: Path, monkeypatch: pytest.MonkeyPatch, stale: bool) -> None:
    """Its facts were written and the index had read them (its ids are not given again):
    the merge written again under a new id, or abandoned (a source edited too; the run
    then merges the cluster anew), left them live, each fact twice in search, pointing at
    a narrative no log holds."""
    rt, original = crashed(root, monkeypatch, journal.FACTS)
    Indexer(rt).scan()
    [(plan, _)] = journal.pending(rt.db())
    _delete_entry(rt, rt.store.get(ANDREW, plan.merged_id))
    if stale:
        source = rt.store.path_for_id(ANDREW, plan.replaced[0])
        source.write_text(source.read_text().replace("Denver", "Boulder"))

    run_reflection(restart(root))

    entries = all_entries(restart(root))
    assert original <= set(entries), "an entry was lost"
    live = {e.id for e in entries.values()
            if e.parent_type == "cluster" and e.deprecated_by is None}
    assert len(live) == 1 and plan.merged_id not in live  # written again, or merged anew
    orphans = [e.id for e in entries.values() if e.kind is Kind.ATOMIC_FACT
               and e.deprecated_by is None and e.parent_id not in entries]
    assert orphans == []
    withdrawn = [e for e in entries.values()
                 if e.kind is Kind.ATOMIC_FACT and e.parent_id == plan.merged_id]
    assert withdrawn and all(e.deprecated_by == e.id for e in withdrawn)
