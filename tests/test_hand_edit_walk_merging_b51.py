"""``bench/hand_edit_walk.py`` feeds its Reflection steps: most of them merged nothing (305
of 344 for seed 54300 in session 50: the walk's Episodes spread over three topics, users and
days), so merges, undos and hand edits rarely interleaved. A Reflection step now first
writes two Episodes of one topic for one user (``--no-merging``: as before), and the walk
says what it exercised: Reflection steps and those that merged, merges, undos and the merges
they cascaded to, hand edits."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.model import UserRef
from tests.reflect_fixtures import add_episode
from tests.test_hand_edit_walk_noop_steps import Picks, bench

pytestmark = pytest.mark.usefixtures("settle_at_once")


def one_log(walk: Any) -> None:
    """One Episode of a topic of its own in the root (a walk's first step on an empty root
    is an add), indexed: alone, a cluster of one, which no run merges."""
    add_episode(walk.rt, UserRef.of("u_andrew"), "2026-07-30T10:00:00+00:00", "Garden",
                "Andrew planted tomatoes along the fence.")
    Indexer(walk.rt).scan()


def test_a_fed_reflection_step_merges_and_an_undo_after_it_is_counted(root: Path) -> None:
    walk_mod = bench()
    walk = walk_mod.Walk(root, Picks("reflect"), merging=True)
    try:
        one_log(walk)
        touched = walk.step()
        assert touched  # the fed logs, for the walk's sync
        assert walk.steps[0].startswith("reflect (fed u_andrew Andrew's dogs: ")
        assert walk.exercised == Counter({"reflect": 1, "reflect merging": 1, "merges": 1})

        walk.rng = Picks("undo")
        walk.step()
        assert walk.steps[-1].startswith("undo u_andrew ep_")
        assert walk.exercised["undos"] == 1
    finally:
        walk.close()


def test_an_unfed_reflection_step_on_a_new_root_merges_nothing(root: Path) -> None:
    walk = bench().Walk(root, Picks("reflect"))
    try:
        one_log(walk)
        assert walk.step() == []
        assert walk.steps[0].endswith(" (no-op: no log changed)")
        assert walk.exercised == Counter({"reflect": 1, "reflect merging": 0, "merges": 0})
    finally:
        walk.close()


def test_the_exercised_line_counts_hand_edits_that_changed_a_log() -> None:
    walk_mod = bench()
    kinds = Counter({"add": 4, "edit": 2, "edit (no-op)": 3, "dup": 1, "reflect": 2,
                     "undo": 1, "late-add": 1})
    exercised = Counter({"reflect": 2, "reflect merging": 1, "merges": 2, "undos": 1,
                         "cascaded": 1})
    assert walk_mod.exercised_line(exercised, kinds) == (
        "exercised: 2 Reflection steps, 1 of them merging (2 merges); 1 undos (1 later "
        "merges cascaded to); 3 hand edits")
