"""A narrative archived by hand toward a live Episode of its own cluster leaves the clusters
as a ``reindex``: the cluster is no longer consolidated (only a narrative consolidates one).

The retired narrative handed the cluster over to its successor when that was a live member,
narrative or not: the cluster stayed consolidated, held by an ordinary Episode, under the
narrative's id, where a rebuild names it after its first member and lists no history."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from tests.reflect_fixtures import ANDREW, add_episode
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables, merged_root

pytestmark = pytest.mark.usefixtures("settle_at_once")


def test_a_narrative_archived_toward_an_episode_of_its_cluster_leaves_it_as_a_reindex(
        root: Path, tmp_path: Path) -> None:
    rt, _, narrative = merged_root(root)
    try:
        later = add_episode(rt, ANDREW, "2026-09-10T10:00:00-07:00", "Andrew's dogs",
                            "Andrew now has two dogs, Toby and Buddy, and walks them daily.").id
        Indexer(rt).scan()
        cluster_of = {r[0]: r[1] for r in rt.db().execute(
            "SELECT entry_id, cluster_id FROM cluster_members WHERE deprecated_by IS NULL")}
        assert cluster_of[later] == cluster_of[narrative]
        path = rt.store.path_for_id(ANDREW, narrative)
        path.write_text(path.read_text().replace(
            "---\n", f"---\ndeprecated_entries: {{{narrative}: {later}}}\n", 1))
        Indexer(rt).sync_path(path)

        after = cluster_tables(rt)
        assert [c[7] for c in after["clusters"]] == [None]
        assert after == as_reindexed(rt, tmp_path / "rebuilt")
    finally:
        rt.close()
