"""A narrative's log copied by hand into the folder of a user a ``reindex`` takes first (users
in sorted order) leaves the clusters as that ``reindex``: the copy's owner holds the cluster
its ``parent_id`` names, and the user it was copied from keeps no cluster by that id.

Online the copy was refused as naming another user's cluster, so the later user kept it,
where a rebuild seeds it for the first user whose narrative names it and attaches the later
user's narrative nowhere."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.model import Kind, UserRef
from tests.reflect_fixtures import ANDREW, make_runtime, run_reflection, seed_pets
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables

pytestmark = pytest.mark.usefixtures("settle_at_once")

BOB = UserRef.of("u_bob")


@pytest.mark.parametrize("synced", ["scan", "one path"])
def test_a_narrative_copied_to_an_earlier_user_s_folder_leaves_the_clusters_as_a_reindex(
        root: Path, tmp_path: Path, synced: str) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    try:
        seed_pets(rt, BOB)
        Indexer(rt).scan()
        assert run_reflection(rt)["merged"] == 1
        [narrative] = [e for e in rt.store.entries(BOB, Kind.EPISODE)
                       if e.parent_type == "cluster"]
        path = rt.store.path_for_id(BOB, narrative.id)
        copy = path.parents[2] / ANDREW.user_id / "episodes" / path.name
        copy.parent.mkdir(parents=True)
        shutil.copyfile(path, copy)

        if synced == "scan":
            Indexer(rt).scan()
        else:
            Indexer(rt).sync_paths([copy])

        after = cluster_tables(rt)
        assert [(c[3], c[7]) for c in after["clusters"] if c[0] == narrative.parent_id] == [
            (ANDREW.user_id, narrative.id)]
        assert after == as_reindexed(rt, tmp_path / "rebuilt")
    finally:
        rt.close()
