"""`undo` with the wrong --user: "no such entry for this user", naming whose merge it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.errors import UnknownEntry
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.model import EntryId, Kind, UserRef
from everos_reflect.strategies.undo import undo_merge
from tests.reflect_fixtures import ANDREW, make_runtime, run_reflection, seed_pets

BEA = UserRef.of("u_bea")


def test_undo_for_another_user_says_no_such_entry_for_this_user(root: Path) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    seed_pets(rt)
    assert run_reflection(rt)["merged"] == 1
    (narrative,) = [e for e in rt.store.entries(ANDREW, Kind.EPISODE)
                    if e.parent_type == "cluster"]
    with pytest.raises(UnknownEntry, match=(
            rf"no such entry for this user: no entry {narrative.id} for user {BEA} \(it is a "
            rf"merge of {ANDREW}: check --user\)")):
        undo_merge(rt, BEA, narrative.id)


def test_a_same_id_ordinary_entry_of_the_wrong_user_is_not_called_a_non_merge(
    root: Path,
) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    seed_pets(rt)
    run_reflection(rt)
    (narrative,) = [e for e in rt.store.entries(ANDREW, Kind.EPISODE)
                    if e.parent_type == "cluster"]
    day = EntryId.parse(narrative.id).day
    while True:  # Bea's ordinary episodes of that day, up to the same id
        entry = rt.store.append(BEA, Kind.EPISODE, {"timestamp": f"{day}T09:00:00+00:00",
                                                    "parent_type": "memcell"},
                                {"Subject": "s", "Content": "c"}, day=day)
        if entry.id == narrative.id:
            break
    Indexer(rt).scan()
    with pytest.raises(UnknownEntry, match="no such entry for this user"):
        undo_merge(rt, BEA, narrative.id)
