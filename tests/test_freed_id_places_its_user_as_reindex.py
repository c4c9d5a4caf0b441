"""A narrative attached once another user's cluster lets its id go (``_attach_freed``: a log
copied by hand into an earlier user's folder, then that copy archived or deleted) places its
user's Episodes as a rebuild does: a rebuild seeds the cluster with it first, so a live
Episode like it placed meanwhile in a cluster of its own joins it. It stayed where it was
until ``recluster``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.markdown import settling
from everos_reflect.model import UserRef
from tests.reflect_fixtures import ANDREW, add_episode
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables, merged_root

pytestmark = pytest.mark.usefixtures("settle_at_once")

AARON = UserRef.of("u_aaron")  # taken before u_andrew by a rebuild


def test_a_narrative_attached_to_a_freed_id_places_its_user_as_a_reindex(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt, _, narrative = merged_root(root)
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 0)
    try:
        [cid] = [r[0] for r in rt.db().execute(
            "SELECT cluster_id FROM clusters WHERE consolidated_entry_id=?", (narrative,))]
        dogs = add_episode(rt, ANDREW, "2026-09-10T10:00:00-07:00", "Andrew's two dogs",
                           "Andrew has two dogs now, Toby and Buddy, and walks both dogs.")
        Indexer(rt).scan()
        copy = add_episode(rt, AARON, "2026-09-12T10:00:00+00:00", "Aaron's notes",
                           "Aaron keeps notes about his garden and tomatoes.",
                           parent_type="cluster", parent_id=cid)
        Indexer(rt).scan()  # Aaron's narrative takes the id; Andrew's is attached nowhere
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "taken")

        path = rt.store.path_for_id(AARON, copy.id)
        block = rf"<!-- entry:{copy.id} -->.*?<!-- /entry:{copy.id} -->\n"
        path.write_text(re.sub(block, "", path.read_text(), flags=re.S))
        Indexer(rt).sync_path(path)

        placed = {r[0]: r[1] for r in rt.db().execute(
            "SELECT entry_id, cluster_id FROM cluster_members WHERE user_id='u_andrew' AND "
            "deprecated_by IS NULL")}
        assert placed[narrative] == cid
        assert placed[dogs.id] == cid  # like the narrative: its cluster, as rebuilt
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "freed")
    finally:
        rt.close()
