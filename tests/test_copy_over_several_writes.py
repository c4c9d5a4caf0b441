"""A user's folder copied by hand while SEVERAL writes of one merge's commit overlap the copy:
the copy catches one log after the merge wrote it and another before. Taken with its episode
log of the merge day before the narrative was written, and a source's log after that source
was archived toward the narrative (or the facts' log after the facts were written), the copy
held a source hidden behind an id no entry of its user holds, or facts live of a narrative it
does not hold, for good: the look-up for copies read the narrative's log alone, and found
none. The copy is now settled as a copy of the finished merge: the narrative written there
under its own id, its facts and its sources' archiving finished, as a copy taken after."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.llm.extractive import ExtractiveLLM
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import journal
from tests.copy_fixtures import bob_holds_the_finished_merge, copy_as_bob, killed_at
from tests.reflect_fixtures import (
    ANDREW,
    Crash,
    check_invariants,
    make_runtime,
    merge_on,
    reports,
    run_reflection,
    seed_pets,
)
from tests.test_copy_lookups_bounded import DAY, edit_a_source
from tests.test_folder_copied_mid_merge import BOB, pets, state, users

pytestmark = pytest.mark.usefixtures("settle_at_once")

CAROL = UserRef.of("u_carol")

#: which of Andrew's logs the copy took before the merge wrote anything (the rest after
#: ``step``): its narrative's log (``narrative``), its facts' log (``facts``), the log of its
#: last source (``last source``)
CASES = {
    "sources archived, narrative not": (journal.DEPRECATED, {"narrative"}),
    "facts written, narrative not": (journal.FACTS, {"narrative"}),
    "sources archived, facts and narrative not": (journal.DEPRECATED, {"narrative", "facts"}),
    "narrative and a source archived, the last source not": (journal.DEPRECATED,
                                                             {"last source"}),
}


def logs(rt: Runtime, which: set[str]) -> list[Path]:
    """Andrew's logs named by ``which`` (see :data:`CASES`), relative to his folder."""
    folder = users(rt) / "u_andrew"
    named = {"narrative": rt.store.log_path(ANDREW, Kind.EPISODE, DAY),
             "facts": rt.store.log_path(ANDREW, Kind.ATOMIC_FACT, DAY),
             "last source": max(p for p in (folder / Kind.EPISODE.folder).glob("*.md")
                                if p != rt.store.log_path(ANDREW, Kind.EPISODE, DAY))}
    return [named[w].relative_to(folder) for w in which]


def copy_over(rt: Runtime, monkeypatch: pytest.MonkeyPatch, step: str, before: set[str],
              *, then: Callable[[], None] | None = None) -> None:
    """The copy's logs named by ``before`` as they were when the commit began, the rest as
    they are at ``step``; made Bob's (every ``owner_id`` rewritten). ``then`` runs right
    after the copy."""
    early: dict[Path, str | None] = {}

    def hook(reached: str) -> None:
        folder = users(rt) / "u_andrew"
        if reached == journal.PLANNED and not early:
            for rel in logs(rt, before):
                early[rel] = (folder / rel).read_text() if (folder / rel).exists() else None
        if reached == step and early and not (users(rt) / "u_bob").exists():
            copy_as_bob(rt, early)
            if then is not None:
                then()

    monkeypatch.setattr(journal, "checkpoint", hook)


@pytest.mark.parametrize("case", list(CASES))
def test_a_copy_over_several_writes_of_a_merge_is_a_copy_of_the_finished_merge(
        root: Path, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    merge_on(monkeypatch, DAY)
    rt = pets(root, update=False)
    step, before = CASES[case]
    copy_over(rt, monkeypatch, step, before)
    assert run_reflection(rt, run_id="run_2")["merged"] == 1
    try:
        assert (users(rt) / "u_bob").exists()
        bob_holds_the_finished_merge(rt)
        assert {r["owner_id"] for r in reports(rt)} == {"u_andrew"}
        assert rt.db().execute("SELECT COUNT(*) FROM merge_journal").fetchone()[0] == 0
    finally:
        rt.close()


def test_a_copy_holding_the_facts_alone_of_a_stale_merge_is_withdrawn_there_too(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The facts' log copied after the facts were written, the narrative's before, then a
    source edited in the first folder: the merge is withdrawn there, and so is the copy (its
    facts were live, of a narrative it did not hold)."""
    merge_on(monkeypatch, DAY)
    rt = pets(root, update=False)
    copy_over(rt, monkeypatch, journal.FACTS, {"narrative"}, then=lambda: edit_a_source(rt))
    assert run_reflection(rt, run_id="run_2").get("merged", 0) == 0
    try:
        andrew, bob = check_invariants(rt, ANDREW), check_invariants(rt, BOB)
        assert {i: e.deprecated_by for i, e in bob.items()} == {
            i: e.deprecated_by for i, e in andrew.items()}
        assert not [e for e in bob.values() if e.kind is Kind.ATOMIC_FACT
                    and e.parent_type == "episode" and e.meta.get("reflection")
                    and e.deprecated_by is None]
    finally:
        rt.close()


def test_a_copy_over_several_writes_killed_with_the_merge_is_settled_by_the_next_start(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same copy (sources archived, narrative not), the merge then killed before its row
    went: the next start's recovery settles the copy."""
    merge_on(monkeypatch, DAY)
    rt = pets(root, update=False)
    copy_over(rt, monkeypatch, journal.DEPRECATED, {"narrative"})
    killed_at(monkeypatch, journal.SYNCED)  # before the copies are looked for
    with pytest.raises(Crash):
        run_reflection(rt)
    monkeypatch.setattr(journal, "checkpoint", lambda reached: None)
    rt.close()
    rt = make_runtime(root, ExtractiveLLM())
    run_reflection(rt, run_id="run_3")
    try:
        assert state(check_invariants(rt, BOB)) == state(check_invariants(rt, ANDREW))
    finally:
        rt.close()


def test_another_user_who_merged_the_same_sources_ids_that_day_is_no_copy(
        root: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Ids are unique per user only: Carol, with the same Episodes (the same ids and text),
    merged in the same batch holds a narrative of the same id and sources archived toward
    it. Her logs are no copy of Andrew's merge, nor his of hers: nothing is written there for
    the other's merge, and no error is logged."""
    merge_on(monkeypatch, DAY)
    rt = make_runtime(root, ExtractiveLLM())
    seed_pets(rt)
    seed_pets(rt, CAROL)
    Indexer(rt).scan()
    with caplog.at_level(logging.WARNING, logger="everos_reflect"):
        assert run_reflection(rt, run_id="run_1")["merged"] == 2
    try:
        andrew, carol = check_invariants(rt, ANDREW), check_invariants(rt, CAROL)
        assert sorted(andrew) == sorted(carol)
        for entries in (andrew, carol):
            assert len([e for e in entries.values() if e.parent_type == "cluster"]) == 1
        assert not [r for r in caplog.records if "copied" in r.getMessage()], caplog.text
    finally:
        rt.close()
