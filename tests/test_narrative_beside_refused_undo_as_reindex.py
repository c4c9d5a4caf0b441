"""A narrative written by hand into a cluster whose undo was interrupted half-way places its
user's Episodes as a ``reindex`` places them. The interrupted undo keeps its journal row (the
next recovery finishes it; an undo a log refuses no longer keeps one since session 50: it is
refused before its first write, or rolled back, tests/test_undo_refused_half_way.py, so it is
interrupted here by an I/O error), and the sync read that row as a Reflection merge
of the cluster under way, whose run places the user at its end: no run was under way, and an
Episode like the new narrative stayed out of its cluster until a ``recluster`` (found by
``bench/hand_edit_walk.py --together 4 --files 2``, seed 49543)."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.clustering import service
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.model import UserRef
from everos_reflect.strategies import journal
from everos_reflect.strategies.undo import undo_merge
from tests.reflect_fixtures import add_episode, make_runtime
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables

pytestmark = pytest.mark.usefixtures("settle_at_once")

BOB = UserRef.of("u_bob")
CID = "cl_0123456789ab"
TAX = "Quarterly tax filing reminder for the accountant meeting on Friday."
RUN = "Bob trains for the city marathon, running long miles on Sundays."


def full(*args: object, **kwargs: object) -> None:
    raise OSError(28, "No space left on device")


def test_a_narrative_by_hand_beside_a_refused_undo_is_placed_as_a_reindex(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    try:
        taxes = add_episode(rt, BOB, "2026-08-01T09:00:00+00:00", "Tax filing", TAX)
        first = add_episode(rt, BOB, "2026-08-01T10:00:00+00:00", "Marathon", RUN,
                            parent_type="cluster", parent_id=CID)
        Indexer(rt).scan()
        with monkeypatch.context() as m:  # the disk full as it archives
            m.setattr(rt.store, "deprecate", full)
            with pytest.raises(OSError, match="No space left"):
                undo_merge(rt, BOB, first.id, cascade=True)
        assert rt.db().execute("SELECT COUNT(*) FROM merge_journal").fetchone()[0] == 1

        later = add_episode(rt, BOB, "2026-08-02T10:00:00+00:00", "Tax filing", TAX,
                            parent_type="cluster", parent_id=CID)
        Indexer(rt).sync_path(rt.store.path_for_id(BOB, later.id))

        assert rt.db().execute("SELECT cluster_id FROM cluster_members WHERE entry_id=?",
                               (taxes.id,)).fetchone()[0] == CID
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "after")
    finally:
        rt.close()


def test_the_undo_step_clustering_reads_is_the_journal_s() -> None:
    assert service._UNDOING == journal.UNDOING
