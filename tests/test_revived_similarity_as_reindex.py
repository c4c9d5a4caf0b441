"""Members revived by ``undo``, or by removing their ``deprecated_entries`` line by hand, hold
the similarity a ``reindex`` gives them.

A member's archived row has no similarity; revived, it kept that NULL, and the members after
one that left the cluster (the narrative an undo archives) kept their cosine with a centroid
that still held it, where a ``reindex`` replays the cluster as it is now.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.undo import undo_merge
from tests.reflect_fixtures import ANDREW
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables, merged_root

pytestmark = pytest.mark.usefixtures("settle_at_once")


def similarities(rt: Runtime) -> dict[str, float | None]:
    """Each live member's similarity."""
    return {r[0]: r[1] for r in rt.db().execute(
        "SELECT entry_id, similarity FROM cluster_members WHERE deprecated_by IS NULL")}


def test_an_undone_merge_leaves_the_clusters_as_a_reindex(root: Path, tmp_path: Path) -> None:
    rt, sources, narrative = merged_root(root)
    try:
        undo_merge(rt, ANDREW, narrative)

        first, *rest = sorted(sources, key=lambda e: e.id)
        got = similarities(rt)
        assert got[first.id] is None  # it founded the cluster
        assert all(got[e.id] is not None for e in rest)
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "rebuilt")
    finally:
        rt.close()


@pytest.mark.parametrize("how_many", [1, 3])
def test_sources_revived_by_hand_leave_the_clusters_as_a_reindex(
        root: Path, tmp_path: Path, how_many: int) -> None:
    rt, sources, narrative = merged_root(root)
    try:
        revived = sorted(sources, key=lambda e: e.id)[-how_many:]
        assert rt.store.undeprecate(ANDREW, [e.id for e in revived])  # the line, by hand
        Indexer(rt).sync_paths(sorted({rt.store.path_for_id(ANDREW, e.id) for e in revived}))

        got = similarities(rt)
        assert narrative in got and all(got[e.id] is not None for e in revived)
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "rebuilt")
    finally:
        rt.close()
