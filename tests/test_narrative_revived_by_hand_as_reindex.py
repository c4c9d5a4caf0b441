"""A narrative archived by hand and revived (its ``deprecated_entries`` key removed) is
attached to the cluster its ``parent_id`` names again, as a ``reindex`` of the same Markdown
attaches it: revived, it was placed by the similarity rule as an ordinary Episode (a cluster
of its own, not consolidated)."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from tests.reflect_fixtures import ANDREW
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables, hand_edited_merge

pytestmark = pytest.mark.usefixtures("settle_at_once")


@pytest.mark.parametrize("toward", ["no entry", "itself"])
def test_a_narrative_archived_and_revived_by_hand_is_attached_as_a_reindex_attaches_it(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toward: str) -> None:
    with hand_edited_merge(root, monkeypatch) as (rt, narrative):
        before = cluster_tables(rt)
        path = rt.store.path_for_id(ANDREW, narrative)
        text = path.read_text()
        target = "ep_20200101_0001" if toward == "no entry" else narrative
        path.write_text(text.replace("---\n", f"---\ndeprecated_entries: {{{narrative}: "
                                             f"{target}}}\n", 1))
        Indexer(rt).sync_path(path)
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "archived")

        path.write_text(text)
        Indexer(rt).sync_path(path)

        after = cluster_tables(rt)
        assert [(c[0], c[7]) for c in after["clusters"]] == [(c[0], c[7])
                                                             for c in before["clusters"]]
        assert after == as_reindexed(rt, tmp_path / "revived")
