"""A user's folder copied by hand while a merge ran, the copy FINISHED AFTER the merge
deleted its journal row: the merge's look-up for copies (``journal.settle_copies_of``) ran
before the copy held anything of it, and no row was left to look again. The copy kept a part
of the merge without its narrative for good: sources archived toward an id none of its
entries held (hidden from search), or the merge's facts live of a narrative it did not hold.
Recovery now finds such a copy from the index (entries archived toward a missing id, facts
missing their Episode) and settles it from the first folder's finished merge
(``journal.settle_copies_left``), also when it is killed between any two of its writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.llm.extractive import ExtractiveLLM
from everos_reflect.model import Kind
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import journal
from everos_reflect.strategies.reflect import ReflectEpisodes
from tests.copy_fixtures import bob_holds_the_finished_merge, copy_as_bob
from tests.reflect_fixtures import (
    ANDREW,
    Crash,
    all_entries,
    check_invariants,
    make_runtime,
    merge_on,
    run_reflection,
)
from tests.test_copy_lookups_bounded import DAY, edit_a_source
from tests.test_copy_over_several_writes import logs
from tests.test_folder_copied_mid_merge import BOB, pets, state, users

pytestmark = pytest.mark.usefixtures("settle_at_once")

#: which of Andrew's logs the copy took at which step of the merge; the rest it took after
#: the merge was settled and its row gone
CASES = {
    "sources archived, narrative not": {"narrative": journal.PLANNED},
    "facts written, narrative and the last source not": {"narrative": journal.PLANNED,
                                                 "last source": journal.PLANNED,
                                                 "facts": journal.FACTS},
}


def copy_after_the_row(rt: Runtime, monkeypatch: pytest.MonkeyPatch,
                       taken: dict[str, str], *, then_at: str | None = None,
                       then: object = None) -> dict[Path, str | None]:
    """Arm the hook that keeps each of Andrew's logs named in ``taken`` as it is at its
    step; returns the texts kept (filled while the merge runs)."""
    kept: dict[Path, str | None] = {}

    def hook(reached: str) -> None:
        folder = users(rt) / "u_andrew"
        for which, step in taken.items():
            if reached == step:
                [rel] = logs(rt, {which})
                if rel not in kept:
                    kept[rel] = (folder / rel).read_text() if (folder / rel).exists() else None
        if reached == then_at and callable(then):
            then()

    monkeypatch.setattr(journal, "checkpoint", hook)
    return kept


def merged_then_copy_finished(root: Path, monkeypatch: pytest.MonkeyPatch,
                              taken: dict[str, str]) -> Runtime:
    """Andrew's pets merged while his folder was being copied into Bob's, the logs of
    ``taken`` copied at their steps (:func:`copy_after_the_row`); the copy finishes after
    the merge is settled and its row gone: Andrew's folder as it is then, but for those
    logs, made Bob's. Not synced yet."""
    merge_on(monkeypatch, DAY)
    rt = pets(root, update=False)
    kept = copy_after_the_row(rt, monkeypatch, taken)
    assert run_reflection(rt, run_id="run_2")["merged"] == 1
    monkeypatch.setattr(journal, "checkpoint", lambda reached: None)
    copy_as_bob(rt, kept)
    return rt


def hidden_or_orphaned(rt: Runtime) -> list[str]:
    """Bob's entries archived toward an id he has no entry for, and his live facts of a
    narrative he does not hold."""
    bob = all_entries(rt, BOB)
    return sorted([i for i, e in bob.items() if e.deprecated_by not in (None, i)
                   and e.deprecated_by not in bob]
                  + [i for i, e in bob.items() if e.kind is Kind.ATOMIC_FACT
                     and e.parent_type == "episode" and e.deprecated_by is None
                     and e.parent_id not in bob])


@pytest.mark.parametrize("case", list(CASES))
def test_a_copy_finished_after_the_row_went_is_settled_by_the_next_recovery(
        root: Path, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    rt = merged_then_copy_finished(root, monkeypatch, CASES[case])
    Indexer(rt).scan()  # the watcher, or the run's own scan
    assert hidden_or_orphaned(rt)  # what the copy holds before a recovery
    try:
        counts = ReflectEpisodes().recover(rt)
        assert counts.get("recovered_copy_settled") == 1, counts
        assert hidden_or_orphaned(rt) == []
        bob_holds_the_finished_merge(rt)
        assert ReflectEpisodes().recover(rt) == {}  # settled: nothing left to find
    finally:
        rt.close()


def test_a_withdrawn_merges_facts_in_a_copy_finished_after_its_row_are_withdrawn(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The facts' log copied while the facts were live, then a source edited in the first
    folder: the merge is withdrawn there and its row goes; the copy, finished after, held the
    facts live of a narrative it did not hold. They are withdrawn there too."""
    merge_on(monkeypatch, DAY)
    rt = pets(root, update=False)
    kept = copy_after_the_row(rt, monkeypatch, {"narrative": journal.PLANNED,
                                                "facts": journal.FACTS},
                              then_at=journal.FACTS, then=lambda: edit_a_source(rt))
    assert run_reflection(rt, run_id="run_2").get("merged", 0) == 0
    monkeypatch.setattr(journal, "checkpoint", lambda reached: None)
    copy_as_bob(rt, kept)
    Indexer(rt).scan()
    assert hidden_or_orphaned(rt)
    try:
        assert ReflectEpisodes().recover(rt).get("recovered_copy_settled") == 1
        assert hidden_or_orphaned(rt) == []
        bob = check_invariants(rt, BOB)
        assert not [e for e in bob.values() if e.parent_type == "cluster"]
        assert not [e for e in bob.values() if e.kind is Kind.ATOMIC_FACT
                    and e.meta.get("reflection") and e.deprecated_by is None]
    finally:
        rt.close()


#: the writes of settling one copy (``journal.COPY_FACTS``, ``COPY_ARCHIVED``, ``COPY_NARRATIVE``)
COPY_STEPS = ["copy_facts", "copy_archived", "copy_narrative"]


@pytest.mark.parametrize("step", COPY_STEPS)
@pytest.mark.parametrize("case", list(CASES))
def test_settling_a_copy_left_killed_at_each_write_is_finished_by_the_next_start(
        root: Path, monkeypatch: pytest.MonkeyPatch, case: str, step: str) -> None:
    rt = merged_then_copy_finished(root, monkeypatch, CASES[case])
    Indexer(rt).scan()

    def kill(reached: str) -> None:
        if reached == step:
            raise Crash(reached)

    assert [journal.COPY_FACTS, journal.COPY_ARCHIVED, journal.COPY_NARRATIVE] == COPY_STEPS
    monkeypatch.setattr(journal, "copy_checkpoint", kill)
    with pytest.raises(Crash):
        ReflectEpisodes().recover(rt)
    monkeypatch.setattr(journal, "copy_checkpoint", lambda reached: None)
    rt.close()
    rt = make_runtime(root, ExtractiveLLM())
    try:
        Indexer(rt).scan()  # the next start: what the killed process wrote is synced
        ReflectEpisodes().recover(rt)
        assert hidden_or_orphaned(rt) == []
        assert state(check_invariants(rt, BOB)) == state(check_invariants(rt, ANDREW))
    finally:
        rt.close()


def test_the_next_run_settles_a_copy_its_recovery_did_not_know_yet(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No sync since the copy finished (no watcher): the next run's recovery, before its
    scan, does not know the copy; the run settles it right after its scan, before it merges
    anything (the copy's live sources would have been merged again in the copy)."""
    rt = merged_then_copy_finished(
        root, monkeypatch, CASES["facts written, narrative and the last source not"])
    try:
        counts = run_reflection(rt, run_id="run_3")
        assert counts.get("recovered_copy_settled") == 1 and not counts.get("merged"), counts
        assert hidden_or_orphaned(rt) == []
        assert state(check_invariants(rt, BOB)) == state(check_invariants(rt, ANDREW))
    finally:
        rt.close()
