"""An ``undo`` leaves the cluster tables a ``reindex`` of the same Markdown builds.

Revived one by one, a merge's sources went back to their cluster, and the Episodes synced
after the merge stayed where they joined (beside the narrative, or in a cluster founded next
to it), where a rebuild places them after the restored sources: a source's centroid may take
an Episode the narrative's did not. Found by ``bench/hand_edit_walk.py`` with an undo step
counted as a difference (the steps below are one such walk's).
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.model import Kind
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.undo import undo_merge
from tests.reflect_fixtures import ANDREW, make_runtime, run_reflection
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables

pytestmark = pytest.mark.usefixtures("settle_at_once")

DOGS = ("Andrew's dogs", "Andrew adopted a dog named Toby, then Buddy; he walks both dogs.")
WALKER = ("Andrew's dogs", "Andrew now has two dogs, Toby and Buddy, and a new dog walker.")
TAX = ("Tax filing", "The quarterly tax filing was sent after the accountant meeting.")
TRAINING = ("Marathon", "Andrew trains for the city marathon, running long miles on Sundays.")
TAPER = ("Marathon", "Andrew finished the marathon training block and tapers this week.")


def add(rt: Runtime, when: str, topic: tuple[str, str]) -> None:
    rt.store.append(ANDREW, Kind.EPISODE, {"timestamp": f"2026-08-{when}:00:00+00:00",
                                           "parent_type": "memcell", "parent_id": "mc_1"},
                    {"Subject": topic[0], "Content": topic[1]}, day=date(2026, 8, int(when[:2])))


def live_narratives(rt: Runtime) -> set[str]:
    return {r[0] for r in rt.db().execute(
        "SELECT id FROM entries WHERE kind='episode' AND parent_type='cluster' AND "
        "deprecated_by IS NULL")}


def test_undoing_a_merge_places_the_later_episodes_as_a_reindex(
        root: Path, tmp_path: Path) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    try:
        for when, topic in [("02T15", TAPER), ("03T21", WALKER), ("12T05", DOGS),
                            ("13T11", TAX), ("14T17", TAPER)]:
            add(rt, when, topic)
        Indexer(rt).scan()
        run_reflection(rt, "run_1")
        first = live_narratives(rt)
        for when, topic in [("14T22", TRAINING), ("14T23", TAPER), ("15T04", TAX)]:
            add(rt, when, topic)
        Indexer(rt).scan()
        run_reflection(rt, "run_2")
        for when, topic in [("15T09", DOGS), ("15T14", DOGS)]:
            add(rt, when, topic)
        Indexer(rt).scan()
        undone = sorted(live_narratives(rt) - first)
        assert undone, "the second run merged nothing"

        undo_merge(rt, ANDREW, undone[-1], cascade=True)

        assert undone[-1] not in live_narratives(rt)
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "rebuilt")
    finally:
        rt.close()
