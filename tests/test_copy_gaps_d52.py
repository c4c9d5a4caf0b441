"""Copies of a merge in another user's folder: the gaps session 51 left (helper D, s52).

- A merge killed past its point of no return, its narrative then deleted by hand, ends as a
  finished merge whose narrative a person deleted (``journal._deleted_after_commit``). Its
  copy that could not be settled was said only in the log on that path: the other paths put
  it in the audit row and the run record (``copy_conflicts``), this one dropped it.
- A copy conflict found by the recovery a run makes first was counted but not named in the
  run's error, and a run that did nothing but that recovery read "failed: every unit failed"
  although the recovery had settled the merge itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.engine.registry import judge_counts
from everos_reflect.index.sync import Indexer
from everos_reflect.llm.extractive import ExtractiveLLM
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import journal
from everos_reflect.strategies.reflect import ReflectEpisodes
from tests.copy_fixtures import killed_at
from tests.reflect_fixtures import ANDREW, Crash, make_runtime, merge_on, reports, run_reflection
from tests.test_copy_lookups_bounded import DAY
from tests.test_copy_narrative_id_taken import put_in_bobs_log
from tests.test_copy_over_several_writes import copy_over
from tests.test_folder_copied_mid_merge import pets
from tests.test_undo import _delete_entry

pytestmark = pytest.mark.usefixtures("settle_at_once")

#: an Episode of Bob's own (not the merge's), written by hand under the narrative's id
BOBS_HIKE_META = {"owner_id": "u_bob", "timestamp": "2026-09-10T08:00:00+00:00",
                  "parent_type": "memcell", "parent_id": "mc_9"}
BOBS_HIKE = {"Subject": "Bob went hiking", "Content": "Bob went hiking."}


def killed_with_a_copy_then_narrative_deleted(root: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> Runtime:
    """Andrew's merge copied into Bob's folder after its facts were written and before its
    narrative's log was (Bob holds the facts, not the narrative), then killed once its
    sources were archived; then Andrew's narrative deleted by hand. A new runtime, as the
    next start opens it."""
    merge_on(monkeypatch, DAY)
    rt = pets(root, update=False)
    copy_over(rt, monkeypatch, journal.FACTS, {"narrative"})
    killed_at(monkeypatch, journal.DEPRECATED)
    with pytest.raises(Crash):
        run_reflection(rt)
    monkeypatch.setattr(journal, "checkpoint", lambda reached: None)
    [(plan, _)] = journal.pending(rt.db())
    assert plan.merged_id is not None
    _delete_entry(rt, rt.store.get(ANDREW, plan.merged_id))
    rt.close()
    return make_runtime(root, ExtractiveLLM())


def test_a_copy_problem_of_a_merge_whose_narrative_was_deleted_reaches_the_record(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = killed_with_a_copy_then_narrative_deleted(root, monkeypatch)
    try:
        [outcome] = journal.recover(rt, Indexer(rt))
        assert outcome.status == "ok"
        [problem] = outcome.copy_problems
        assert "u_bob" in problem and "gone from the first folder too" in problem
        [report] = reports(rt)
        assert "was deleted by hand" in report["error"]
        assert problem in report["error"]
        assert not journal.has_pending(root)
    finally:
        rt.close()


def test_the_recovery_counts_the_copy_problem_of_a_deleted_narratives_merge(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = killed_with_a_copy_then_narrative_deleted(root, monkeypatch)
    try:
        counts = ReflectEpisodes().recover(rt)
        assert counts == {"recovered_ok": 1, "copy_conflicts": 1}
        assert judge_counts(ReflectEpisodes(), counts)[0] == "partial"
    finally:
        rt.close()


def test_a_run_that_only_recovered_names_the_copy_conflict_and_is_partial(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The merge killed once its sources were archived, Bob's copy (taken then, without the
    narrative) holding one of his own Episodes under the narrative's id: the next run's
    recovery finishes the merge and cannot settle the copy. The run has nothing else to do:
    its record was "failed: every unit failed (copy_conflicts=1)", naming nothing; it is
    partial, and names the copy, its user, the id and why, as the recovery's."""
    from everos_reflect.engine.engine import Engine

    merge_on(monkeypatch, DAY)
    rt = pets(root, update=False)
    taken: dict[str, str] = {}

    def bobs_own_episode_under_the_narratives_id() -> None:
        [(plan, _)] = journal.pending(rt.db())
        assert plan.merged_id is not None
        taken["narrative"] = plan.merged_id
        put_in_bobs_log(rt, plan.merged_id, BOBS_HIKE_META, BOBS_HIKE)

    copy_over(rt, monkeypatch, journal.DEPRECATED, {"narrative"},
              then=bobs_own_episode_under_the_narratives_id)
    killed_at(monkeypatch, journal.DEPRECATED)
    with pytest.raises(Crash):
        run_reflection(rt)
    monkeypatch.setattr(journal, "checkpoint", lambda reached: None)
    rt.close()
    (root / "ome.toml").write_text("[strategies.reflect_episodes]\nenabled = true\n")
    rt = make_runtime(root, ExtractiveLLM())
    try:
        outcome = Engine(rt).trigger("reflect_episodes", timeout=120)
        assert outcome.counts.get("recovered_ok") == 1, outcome
        assert outcome.counts.get("copy_conflicts") == 1, outcome
        assert not outcome.counts.get("merged"), outcome
        assert outcome.status == "partial", outcome
        error = outcome.error or ""
        assert "every unit failed" not in error
        assert "1 of 2 units failed" in error
        assert "recovered (ok)" in error and "u_bob" in error and taken["narrative"] in error
        assert "another entry's" in error
        [run] = Engine(rt, recover=False).runs(limit=1)
        assert run["status"] == "partial" and run["error"] == error
    finally:
        rt.close()


def test_a_merge_the_recovery_cannot_settle_is_named_in_the_run_record(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A merge killed after its facts, its narrative's log then broken by hand: the recovery
    before the run keeps its row; the run record counted it and named nothing."""
    from everos_reflect.engine.engine import Engine
    from everos_reflect.model import Kind
    from tests.test_reflect_crash import crashed, restart

    rt, _ = crashed(root, monkeypatch, journal.FACTS)
    [(plan, _)] = journal.pending(rt.db())
    broken = rt.store.log_path(plan.ref, Kind.EPISODE, plan.day_date)
    broken.write_bytes(broken.read_bytes() + b"\xff\xfe not UTF-8\n")
    rt.close()
    fresh = restart(root)
    (root / "ome.toml").write_text("[strategies.reflect_episodes]\nenabled = true\n")
    try:
        outcome = Engine(fresh).trigger("reflect_episodes", timeout=120)
        assert outcome.status == "failed", outcome
        assert f"merge {plan.id} of {plan.ref}: interrupted, not recovered yet" in (
            outcome.error or "")
    finally:
        fresh.close()


def _looked_from(rt: Runtime) -> str | None:
    from everos_reflect.index import copies_left

    return copies_left.synced_since(rt.db())


def test_the_look_for_copies_left_is_recorded_only_when_its_window_moves(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``settle_copies_left`` runs at every recovery and run: it wrote ``index_meta`` each
    time, nothing synced since or not. Now the first look is recorded, a look with nothing
    synced since is not (the next reads the same logs either way), and one after a sync is.
    (No slack for other processes' clocks here: with it, a look within two seconds of a
    sync reads that sync's logs again, and is recorded.)"""
    from everos_reflect.model import UserRef
    from tests.reflect_fixtures import add_episode, seed_pets

    monkeypatch.setattr(journal, "MTIME_SLACK_NS", 0)
    rt = make_runtime(root, ExtractiveLLM())
    try:
        seed_pets(rt)
        Indexer(rt).scan()
        assert journal.settle_copies_left(rt, Indexer(rt)) == []
        first = _looked_from(rt)
        assert first is not None
        changes = rt.db().total_changes
        assert journal.settle_copies_left(rt, Indexer(rt)) == []
        assert _looked_from(rt) == first
        assert rt.db().total_changes == changes  # nothing written at all
        add_episode(rt, UserRef.of("u_carol"), "2026-09-11T09:00:00+00:00", "Tea",
                    "Carol drank tea.")
        Indexer(rt).scan()
        assert journal.settle_copies_left(rt, Indexer(rt)) == []
        later = _looked_from(rt)
        assert later is not None and later > first
    finally:
        rt.close()


def test_the_look_for_copies_left_writes_nothing_on_a_read_only_index(
        root: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A root whose index this process cannot write (a read-only mount, another user's
    root): its connection is read-only, and recording the look raised "attempt to write a
    readonly database" out of the recovery. Now nothing is looked for nor written, and the
    log says so."""
    import logging

    from tests.reflect_fixtures import seed_pets

    rt = make_runtime(root, ExtractiveLLM())
    seed_pets(rt)
    Indexer(rt).scan()
    rt.close()
    monkeypatch.setattr("everos_reflect.runtime.index_read_only", lambda path: True)
    ro = make_runtime(root, ExtractiveLLM())
    try:
        assert ro.read_only
        with caplog.at_level(logging.INFO, logger="everos_reflect.strategies.journal"):
            assert journal.settle_copies_left(ro, Indexer(ro)) == []
        assert "nothing is written" in caplog.text
        assert _looked_from(ro) is None
    finally:
        ro.close()
