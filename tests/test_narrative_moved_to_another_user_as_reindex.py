"""A narrative's log moved by hand into another user's folder, the old user still there,
leaves the clusters as a ``reindex`` of the same Markdown: the narrative's cluster is the new
user's.

Its ``parent_id`` names a cluster whose id hashes the old user in. The scan synced the new
user's log before it dropped the old one's: the narrative found its cluster held by the old
user and was attached nowhere, and nothing tried again once the old user's cluster was
deleted in the same scan, where a rebuild (the old log gone) attaches it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.markdown import settling
from tests.reflect_fixtures import ANDREW
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables, merged_root

pytestmark = pytest.mark.usefixtures("settle_at_once")


@pytest.mark.parametrize("synced", ["scan", "watcher"])
def test_a_narrative_moved_to_another_user_leaves_the_clusters_as_a_reindex(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, synced: str) -> None:
    rt, _, narrative = merged_root(root)
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 0)  # moved long after the writes
    try:
        path = rt.store.path_for_id(ANDREW, narrative)
        bob = path.parent.parent.parent / "u_bob" / "episodes"
        bob.mkdir(parents=True)
        os.rename(path, bob / path.name)

        if synced == "scan":
            Indexer(rt).scan()
        else:  # the watcher's batch of the move: the new path first, as it saw them
            Indexer(rt).sync_paths([bob / path.name, path])

        after = cluster_tables(rt)
        assert [(c[3], c[7]) for c in after["clusters"]] == [("u_bob", narrative)]
        assert after == as_reindexed(rt, tmp_path / "rebuilt")
    finally:
        rt.close()
