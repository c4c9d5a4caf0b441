"""The invariants the Reflection tests check hold for an undone merge too, and a broken one is
named: the narrative and its facts archived ``undone`` (Markdown and index), its sources live
again, its audit row ``undone``, no cluster consolidated by it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from pathlib import Path

import pytest

from everos_reflect.llm import ExtractiveLLM
from everos_reflect.model import Entry, Kind
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.undo import undo_merge
from tests.reflect_fixtures import (
    ANDREW,
    add_fact,
    all_entries,
    check_invariants,
    make_runtime,
    merge_on,
    run_reflection,
    seed_pets,
)


@pytest.fixture
def undone(root: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Runtime, Entry]:
    """A root whose one merge (the pets, with one source fact) was undone."""
    merge_on(monkeypatch, date(2026, 10, 12))
    rt = make_runtime(root, ExtractiveLLM())
    sources = seed_pets(rt)
    add_fact(rt, ANDREW, sources[2], "Andrew adopted another dog named Buddy.")
    assert run_reflection(rt)["merged"] == 1
    narrative = next(e for e in all_entries(rt).values() if e.parent_type == "cluster")
    undo_merge(rt, ANDREW, narrative.id)
    yield rt, narrative
    rt.close()


def test_an_undone_merge_holds_every_invariant(undone: tuple[Runtime, Entry]) -> None:
    # the check failed on any undone merge: "archived toward missing undone"
    rt, narrative = undone
    entries = check_invariants(rt)
    assert entries[narrative.id].deprecated_by == "undone"
    assert all(entries[s].deprecated_by is None for s in narrative.sources)


def _rearchive_a_source(rt: Runtime, narrative: Entry) -> None:
    rt.store.deprecate(ANDREW, {narrative.sources[0]: narrative.id})


def _revive_a_fact(rt: Runtime, narrative: Entry) -> None:
    fact = next(e for e in all_entries(rt).values()
                if e.kind is Kind.ATOMIC_FACT and e.parent_id == narrative.id)
    path = rt.store.path_for_id(ANDREW, fact.id)
    path.write_text(path.read_text().replace(f"  {fact.id}: undone\n", ""))


def _revive_the_narrative(rt: Runtime, narrative: Entry) -> None:
    path = rt.store.path_for_id(ANDREW, narrative.id)
    path.write_text(path.read_text().replace(f"  {narrative.id}: undone\n", ""))


def _sql(statement: str) -> Callable[[Runtime, Entry], None]:
    def run(rt: Runtime, narrative: Entry) -> None:
        with rt.db():
            rt.db().execute(statement, (narrative.id,))
    return run


BROKEN = {
    "a source archived toward it again": (
        _rearchive_a_source, "is archived toward {id}, a merge that was undone"),
    "one of its facts live again": (
        _revive_a_fact, "of the undone narrative {id} is live, not undone"),
    "its audit row not marked": (
        _sql("UPDATE reflection_report SET status='ok' WHERE merged_entry_id=?"),
        "merge {id} was undone but its audit row says ok"),
    "the index has it live": (
        _sql("UPDATE entries SET deprecated_by=NULL WHERE id=?"),
        "merge {id} was undone but the index has it live"),
    "the index archives a source toward it": (
        _sql("UPDATE entries SET deprecated_by=? WHERE id LIKE 'ep_20260802_%'"),
        "the index archives ep_20260802_0001 toward {id}, a merge that was undone"),
    "a cluster consolidated by it": (
        _sql("UPDATE clusters SET consolidated_entry_id=?"),
        "is consolidated by {id}, a merge that was undone"),
    "the narrative live again, the audit undone": (
        _revive_the_narrative, "the audit marks the merge {id} undone but it is live"),
}


@pytest.mark.parametrize("breaking", BROKEN, ids=list(BROKEN))
def test_a_broken_undone_merge_is_named(undone: tuple[Runtime, Entry], breaking: str) -> None:
    rt, narrative = undone
    breaks, words = BROKEN[breaking]
    breaks(rt, narrative)
    with pytest.raises(AssertionError) as failed:
        check_invariants(rt)
    assert words.format(id=narrative.id) in str(failed.value)
