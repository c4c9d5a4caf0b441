"""A cluster denied an id another user's cluster held (:attr:`_Write.denied`) takes it once
that cluster lets it go in the same transaction, also when the sync itself let it go (the
cluster emptied by a deletion), not only a rename before COMMIT. Bob's narrative naming
Andrew's id was deleted by hand, leaving Bob's cluster (one Episode of Bob's) holding it; a
narrative of Bob's naming the id Andrew's cluster then held moved Andrew's cluster on, the id
of its own denied while Bob's held it; Bob's Episode deleted in the same flush freed it, but
:meth:`ClusterService._attach_freed` had dropped the ids it consumed before they were
compared with the denied ones: Andrew's cluster kept a third id, where a ``reindex`` gives it
its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.clustering.online import cluster_id_for
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.model import UserRef
from tests.reflect_fixtures import ANDREW, add_episode, make_runtime
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables, cut_by_hand

pytestmark = pytest.mark.usefixtures("settle_at_once")

BOB = UserRef.of("u_bob")  # taken after u_andrew by a rebuild
DOGS = "Andrew adopted a dog named Toby, then Buddy; he walks both dogs."


def test_a_cluster_denied_an_id_the_flush_frees_takes_it_as_a_reindex(
        root: Path, tmp_path: Path) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    try:
        dogs = add_episode(rt, ANDREW, "2026-08-01T10:00:00+00:00", "Andrew's dogs", DOGS)
        Indexer(rt).scan()
        own = cluster_id_for(ANDREW.app, ANDREW.project, ANDREW.user_id, dogs.id)
        narrative = add_episode(rt, BOB, "2026-08-02T10:00:00+00:00", "Andrew's dogs",
                                "Andrew adopted a dog named Toby, then Buddy.",
                                parent_type="cluster", parent_id=own)
        met = add_episode(rt, BOB, "2026-08-03T11:00:00+00:00", "Andrew's dogs",
                          "Andrew adopted a dog named Toby, then Buddy; Bob met them.")
        Indexer(rt).scan()  # Bob's narrative holds Andrew's id: Andrew's cluster takes the next
        [held] = [r[0] for r in rt.db().execute(
            "SELECT cluster_id FROM clusters WHERE user_id='u_andrew'")]
        assert held != own
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "named")

        # one flush: Bob's narrative deleted and another written naming the id Andrew's
        # cluster holds (one log), then Bob's Episode deleted (a later log)
        path = cut_by_hand(rt, BOB, narrative.id)
        add_episode(rt, BOB, "2026-08-02T12:00:00+00:00", "Andrew's dogs",
                    "Andrew adopted a dog named Toby, then Buddy.",
                    parent_type="cluster", parent_id=held)
        Indexer(rt).sync_paths([path, cut_by_hand(rt, BOB, met.id)])

        assert [tuple(r) for r in rt.db().execute(
            "SELECT cluster_id FROM clusters WHERE user_id='u_andrew'")] == [(own,)]
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "freed")
    finally:
        rt.close()
