"""Copies of a merge finished after its journal row went (``journal.settle_copies_left``):
the two kinds session 51's look-up missed.

- **The narrative live beside its live sources**: Andrew's folder copied into Bob's after
  the narrative (and its facts) were written, and before the sources were archived. Nothing
  in Bob's logs pointed at a missing id, so nothing found it. The merge withdrawn in
  Andrew's folder since, Bob held the withdrawn narrative and its sources live side by side
  for good: it is withdrawn there too. (The merge finished in Andrew's folder, the next run
  folds Bob's narrative into its merge of those sources, as it folds a copy whose sources
  a person made live again: tests/test_copied_narrative_folded.py; archiving them again,
  the look-up undid that edit.)
- **A merge undone since**: Andrew's merge undone after the copy was taken. The look-up
  left such a copy as it was (no one state to bring it to): its sources hidden behind an id
  no entry of Bob's held, or facts live of a narrative he did not hold, or the narrative
  live beside its sources. It is brought to the state the undo left Andrew's folder in:
  the sources live, the facts (and the narrative, where Bob holds it) archived ``undone``.

Each is also killed between any two of its writes and finished by the next start.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.llm.extractive import ExtractiveLLM
from everos_reflect.markdown.parser import UNDONE
from everos_reflect.model import Entry, Kind
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import journal
from everos_reflect.strategies.reflect import ReflectEpisodes
from everos_reflect.strategies.undo import undo_merge
from tests.copy_fixtures import copy_as_bob
from tests.reflect_fixtures import (
    ANDREW,
    Crash,
    all_entries,
    check_invariants,
    make_runtime,
    merge_on,
    run_reflection,
)
from tests.test_copy_finished_after_row import hidden_or_orphaned
from tests.test_copy_lookups_bounded import DAY
from tests.test_folder_copied_mid_merge import BOB, pets, state, users

pytestmark = pytest.mark.usefixtures("settle_at_once")

#: the writes of settling one copy, in order
COPY_STEPS = [journal.COPY_FACTS, journal.COPY_ARCHIVED, journal.COPY_NARRATIVE]


def merge_day_logs(rt: Runtime) -> set[Path]:
    """Andrew's logs of the merge day (the narrative's and the facts'), relative to his
    folder."""
    return {rt.store.log_path(ANDREW, kind, DAY).relative_to(users(rt) / "u_andrew")
            for kind in (Kind.EPISODE, Kind.ATOMIC_FACT)}


def keep_at(rt: Runtime, monkeypatch: pytest.MonkeyPatch, step: str, *,
            beside: bool) -> dict[Path, str | None]:
    """Arm the merge's checkpoint to keep, at ``step``, Andrew's logs the copy takes then:
    with ``beside``, every log but those of the merge day (the sources' logs, not archived
    yet); else the merge day's episode log (without the narrative). Returns them, filled
    as the merge runs."""
    kept: dict[Path, str | None] = {}
    folder = users(rt) / "u_andrew"

    def hook(reached: str) -> None:
        if reached != step or kept:
            return
        day = merge_day_logs(rt)
        if beside:
            rels = {p.relative_to(folder) for p in folder.rglob("*.md")} - day
        else:
            rels = {rt.store.log_path(ANDREW, Kind.EPISODE, DAY).relative_to(folder)}
        for rel in rels:
            kept[rel] = (folder / rel).read_text() if (folder / rel).exists() else None

    monkeypatch.setattr(journal, "checkpoint", hook)
    return kept


def narrative_of(entries: dict[str, Entry]) -> Entry:
    [narrative] = [e for e in entries.values() if e.parent_type == "cluster"]
    return narrative


def copied(root: Path, monkeypatch: pytest.MonkeyPatch, *, beside: bool,
           undone: bool) -> Runtime:
    """Andrew's pets merged while his folder was being copied into Bob's (see
    :func:`keep_at`: ``beside``, the narrative and facts taken once the merge was settled,
    the sources before they were archived; else the sources archived and facts written, the
    narrative's log taken before it); with ``undone``, the merge then undone in Andrew's
    folder, the copy having taken every log before that; the copy finishes after all
    that, and is synced."""
    merge_on(monkeypatch, DAY)
    rt = pets(root, update=False)
    kept = keep_at(rt, monkeypatch, journal.FACTS if beside else journal.PLANNED,
                   beside=beside)
    assert run_reflection(rt, run_id="run_2")["merged"] == 1
    monkeypatch.setattr(journal, "checkpoint", lambda reached: None)
    folder = users(rt) / "u_andrew"
    if beside:  # the merge day's logs, taken once the merge was settled
        kept.update({rel: (folder / rel).read_text() for rel in merge_day_logs(rt)})
    if undone:  # every other log taken before the undo too
        for log in folder.rglob("*.md"):
            kept.setdefault(log.relative_to(folder), log.read_text())
        undo_merge(rt, ANDREW, narrative_of(all_entries(rt, ANDREW)).id)
    copy_as_bob(rt, kept)
    Indexer(rt).scan()
    return rt


def live(entries: dict[str, Entry]) -> dict[str, tuple[object, ...]]:
    return {i: v for i, v in state(entries).items() if v[0] is None}


def assert_settled(rt: Runtime, *, beside: bool, undone: bool) -> None:
    """Bob's copy is in the state Andrew's merge is in: every entry alike (where archived to,
    and text); without ``beside`` (Bob never held the narrative) and ``undone``, the live
    ones alike, and the facts archived ``undone`` as Andrew's."""
    andrew, bob = check_invariants(rt, ANDREW), check_invariants(rt, BOB)
    assert [i for i in hidden_or_orphaned(rt) if bob[i].deprecated_by != UNDONE] == []
    if beside or not undone:
        assert state(bob) == state(andrew)
    else:
        assert live(bob) == live(andrew)
        facts = {i for i, e in andrew.items() if e.deprecated_by == UNDONE
                 and e.kind is Kind.ATOMIC_FACT}
        assert facts and {i for i in facts if bob[i].deprecated_by == UNDONE} == facts
    narrative = narrative_of(andrew)
    assert narrative.deprecated_by == (UNDONE if undone else None)
    if beside:
        indexed = rt.db().execute("SELECT deprecated_by FROM entries WHERE user_id=? AND id=?",
                                  ("u_bob", narrative.id)).fetchall()
        assert [tuple(r) for r in indexed] == [(narrative.deprecated_by,)]


CASES = {
    "narrative beside its sources, the merge undone since": (True, True),
    "sources archived without the narrative, the merge undone since": (False, True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_copy_is_brought_to_the_first_folders_state_by_the_next_recovery(
        root: Path, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    beside, undone = CASES[case]
    rt = copied(root, monkeypatch, beside=beside, undone=undone)
    try:
        bob = all_entries(rt, BOB)
        if beside:  # what Bob holds before: the narrative live beside live sources
            narrative = narrative_of(bob)
            assert narrative.deprecated_by is None
            assert [s for s in narrative.meta["sources"] if bob[s].deprecated_by is None]
        else:
            assert hidden_or_orphaned(rt)
        counts = ReflectEpisodes().recover(rt)
        assert counts.get("recovered_copy_settled") == 1, counts
        assert_settled(rt, beside=beside, undone=undone)
        assert ReflectEpisodes().recover(rt) == {}  # settled: nothing left to find
    finally:
        rt.close()


@pytest.mark.parametrize("step", COPY_STEPS)
@pytest.mark.parametrize("case", list(CASES))
def test_settling_it_killed_at_each_write_is_finished_by_the_next_start(
        root: Path, monkeypatch: pytest.MonkeyPatch, case: str, step: str) -> None:
    beside, undone = CASES[case]
    rt = copied(root, monkeypatch, beside=beside, undone=undone)

    def kill(reached: str) -> None:
        if reached == step:
            raise Crash(reached)

    monkeypatch.setattr(journal, "copy_checkpoint", kill)
    with pytest.raises(Crash):
        ReflectEpisodes().recover(rt)
    monkeypatch.setattr(journal, "copy_checkpoint", lambda reached: None)
    rt.close()
    rt = make_runtime(root, ExtractiveLLM())
    try:
        Indexer(rt).scan()  # the next start: what the killed process wrote is synced
        ReflectEpisodes().recover(rt)
        assert_settled(rt, beside=beside, undone=undone)
    finally:
        rt.close()


def test_the_first_folder_is_never_taken_for_a_copy_of_its_copy(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bob holds a full copy of Andrew's finished merge; a person then makes one of Andrew's
    sources live again by hand (removes its ``deprecated_entries`` key): Andrew's narrative
    is live beside it, Bob's is not. Andrew's folder holds the merge's audit row: it is the
    first folder, not a copy of Bob's, and the hand edit is left as it is."""
    from tests.test_folder_copied_mid_merge import copy_to_bob

    merge_on(monkeypatch, DAY)
    rt = pets(root, update=False)
    assert run_reflection(rt, run_id="run_2")["merged"] == 1
    copy_to_bob(rt)
    Indexer(rt).scan()
    narrative = narrative_of(all_entries(rt, ANDREW))
    source = narrative.meta["sources"][0]
    rt.store.undeprecate(ANDREW, [source])
    Indexer(rt).scan()
    try:
        assert ReflectEpisodes().recover(rt) == {}
        assert all_entries(rt, ANDREW)[source].deprecated_by is None
    finally:
        rt.close()


def test_a_narrative_deleted_by_hand_is_not_written_again_from_a_copy_of_the_folder(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bob holds a full copy of Andrew's finished merge; Andrew then deletes his narrative
    by hand: his sources point at an id none of his entries holds, as after any narrative a
    person deleted (``undo`` of the id brings them back). Andrew's folder, which holds the
    merge's audit row, was taken for a copy of Bob's and the narrative written again."""
    from tests.test_folder_copied_mid_merge import copy_to_bob
    from tests.test_undo import _delete_entry

    merge_on(monkeypatch, DAY)
    rt = pets(root, update=False)
    assert run_reflection(rt, run_id="run_2")["merged"] == 1
    copy_to_bob(rt)
    Indexer(rt).scan()
    narrative = narrative_of(all_entries(rt, ANDREW))
    _delete_entry(rt, narrative)
    Indexer(rt).scan()
    try:
        assert ReflectEpisodes().recover(rt) == {}
        assert narrative.id not in all_entries(rt, ANDREW)
    finally:
        rt.close()


def test_a_copy_of_a_merge_withdrawn_since_is_withdrawn_beside_its_sources(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every log copied once the narrative and facts were written, before the sources were
    archived; then a source edited in Andrew's folder: the merge is withdrawn there. Bob's
    narrative, live beside his live sources, and its facts are withdrawn too."""
    from tests.test_copy_lookups_bounded import edit_a_source

    merge_on(monkeypatch, DAY)
    rt = pets(root, update=False)
    folder = users(rt) / "u_andrew"
    kept: dict[Path, str | None] = {}

    def hook(reached: str) -> None:
        if reached == journal.FACTS and not kept:
            kept.update({log.relative_to(folder): log.read_text()
                         for log in folder.rglob("*.md")})
            edit_a_source(rt)

    monkeypatch.setattr(journal, "checkpoint", hook)
    assert run_reflection(rt, run_id="run_2").get("merged", 0) == 0
    monkeypatch.setattr(journal, "checkpoint", lambda reached: None)
    copy_as_bob(rt, kept)
    Indexer(rt).scan()
    try:
        assert narrative_of(all_entries(rt, BOB)).deprecated_by is None
        assert ReflectEpisodes().recover(rt).get("recovered_copy_settled") == 1
        bob = check_invariants(rt, BOB)
        narrative = narrative_of(bob)
        assert narrative.deprecated_by == narrative.id
        assert not [e for e in bob.values() if e.kind is Kind.ATOMIC_FACT
                    and e.meta.get("reflection") and e.deprecated_by is None]
        assert {i for i, e in bob.items() if e.deprecated_by is None} == {
            i for i, e in all_entries(rt, ANDREW).items() if e.deprecated_by is None}
    finally:
        rt.close()


def test_a_copy_of_a_finished_merge_beside_its_sources_is_left_to_the_next_runs_fold(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The merge finished in Andrew's folder: recovery leaves Bob's narrative beside its
    sources (the same Markdown as sources a person made live again by hand in a copy), and
    the next run folds it into its merge of them: nothing stays live beside it."""
    rt = copied(root, monkeypatch, beside=True, undone=False)
    try:
        assert ReflectEpisodes().recover(rt) == {}
        assert run_reflection(rt, run_id="run_3").get("merged") == 1
        check_invariants(rt, BOB)  # every live narrative's sources archived toward it
        copied_narrative = narrative_of(all_entries(rt, ANDREW))
        assert all_entries(rt, BOB)[copied_narrative.id].deprecated_by not in (None, UNDONE)
    finally:
        rt.close()
