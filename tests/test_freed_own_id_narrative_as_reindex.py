"""A narrative whose ``parent_id`` is not a cluster id names its own id's cluster (the hash of
its user and its id). Passed over while a narrative of a user a rebuild takes first held that
id (naming it by hand), it is attached once that one lets it go, as a ``reindex`` seeds it
then. ``_attach_freed`` looked the freed ids up in the ``parent_id`` column only: it stayed in
no cluster (found by ``hand_edit_walk.py --fresh``, seed 49339)."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.clustering.online import cluster_id_for
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.model import Entry, UserRef
from everos_reflect.runtime import Runtime
from tests.reflect_fixtures import ANDREW, add_episode, make_runtime
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables, cut_by_hand

pytestmark = pytest.mark.usefixtures("settle_at_once")

BOB = UserRef.of("u_bob")  # taken after u_andrew by a rebuild
DOGS = ("Andrew's dogs", "Andrew adopted a dog named Toby, then Buddy; he walks both dogs.")


def own_id_held_by_andrew(rt: Runtime, tmp_path: Path) -> tuple[Entry, str, Entry]:
    """Bob's narrative naming no cluster id (its cluster: the hash of u_bob and its id), then
    Andrew's naming that id by hand: Andrew's, taken first by a rebuild, holds it. Returns
    Bob's narrative, the id and Andrew's."""
    bobs = add_episode(rt, BOB, "2026-08-01T10:00:00+00:00", *DOGS, parent_type="cluster",
                       parent_id="my notes")
    Indexer(rt).scan()
    own = cluster_id_for(BOB.app, BOB.project, BOB.user_id, bobs.id)
    andrews = add_episode(rt, ANDREW, "2026-08-02T10:00:00+00:00", *DOGS,
                          parent_type="cluster", parent_id=own)
    Indexer(rt).scan()
    assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "held")
    return bobs, own, andrews


def test_a_narrative_naming_no_cluster_id_takes_its_own_id_once_freed_as_a_reindex(
        root: Path, tmp_path: Path) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    try:
        mine, own, andrews = own_id_held_by_andrew(rt, tmp_path)

        Indexer(rt).sync_path(cut_by_hand(rt, ANDREW, andrews.id))

        assert [tuple(r) for r in rt.db().execute(
            "SELECT cluster_id, user_id, consolidated_entry_id FROM clusters")] == [
            (own, "u_bob", mine.id)]
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "freed")
    finally:
        rt.close()
