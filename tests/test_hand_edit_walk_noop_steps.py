"""``bench/hand_edit_walk.py`` marks a step that left every log as it was: it printed such a
step (a narrative "made plain" that an edit of the same sync had made plain already, an
edit writing the text the entry had, an undo refused) as a change, counted it among the
steps made, and took its kind for the documented step a difference after it was excused by;
a sync after a round that recorded no step was tagged onto the step before it."""

from __future__ import annotations

import importlib.util
import random
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.model import UserRef
from tests.reflect_fixtures import add_episode

pytestmark = pytest.mark.usefixtures("settle_at_once")

BENCH = Path(__file__).resolve().parents[1] / "bench" / "hand_edit_walk.py"
BOB = UserRef.of("u_bob")


def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("hand_edit_walk_under_test", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class Picks(random.Random):
    """Picks ``op`` where the walk draws its kind of step, the first item elsewhere."""

    def __init__(self, op: str) -> None:
        super().__init__(0)
        self.op = op

    def choice(self, seq: Any) -> Any:
        return self.op if self.op in seq else seq[0]


def test_a_step_that_changed_no_log_is_marked_and_one_that_did_is_not(root: Path) -> None:
    walk_mod = bench()
    walk = walk_mod.Walk(root, Picks("unparent"), unparent=1)
    try:
        narrative = add_episode(walk.rt, BOB, "2026-08-01T10:00:00+00:00", "Bob's dogs",
                                "Bob adopted a dog named Toby.", parent_type="cluster",
                                parent_id="cl_0123456789ab")
        Indexer(walk.rt).scan()

        walk.step()  # its parent_type lines taken out: a change
        assert walk.steps == [f"unparent u_bob {narrative.id}"]
        walk.step()  # not synced yet: the index still holds it as a narrative, the log not
        assert walk.steps[-1] == f"unparent u_bob {narrative.id}{walk_mod.NO_OP}"
    finally:
        walk.close()


def test_an_edit_that_writes_the_text_the_entry_had_is_marked(root: Path) -> None:
    walk_mod = bench()
    walk = walk_mod.Walk(root, Picks("edit"))
    try:
        subject, content = walk_mod.TOPICS[0]  # what Picks draws for the new text
        add_episode(walk.rt, BOB, "2026-08-01T10:00:00+00:00", subject, content)
        Indexer(walk.rt).scan()
        before = walk.markdown()

        walk.step()

        assert walk.markdown() == before
        assert walk.steps[-1].endswith(walk_mod.NO_OP)
    finally:
        walk.close()


def test_a_round_closes_with_its_no_op_steps_counted_apart() -> None:
    walk_mod = bench()
    kinds: Counter[str] = Counter()
    steps = ["add u_bob ep_1 x [scan]", "edit a.md first content -> y",
             f"unparent u_bob ep_2{walk_mod.NO_OP}"]

    ops = walk_mod.close_round(steps, 1, "one", kinds)

    assert ops == ["edit"]  # the no-op excuses no difference
    assert kinds == Counter({"edit": 1, "unparent (no-op)": 1})
    assert steps == ["add u_bob ep_1 x [scan]",
                     f"edit a.md first content -> y + unparent u_bob ep_2{walk_mod.NO_OP} [one]"]


def test_a_round_that_recorded_no_step_is_not_tagged_onto_the_step_before() -> None:
    walk_mod = bench()
    kinds: Counter[str] = Counter()
    steps = ["delete a.md ep_1 [scan]"]

    assert walk_mod.close_round(steps, 1, "scan", kinds) == []

    assert steps == ["delete a.md ep_1 [scan]", "no edit [scan]"]
    assert kinds == Counter()
