"""A cluster two live narratives name (a merge's, and one a person wrote later naming the same
cluster) is consolidated by the other once the newer is deleted or archived by hand, as a
``reindex`` of the same Markdown seeds it with the newest live narrative. It was left
consolidated by none, the remaining narrative a live member of it, its history dropped."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.markdown import settling
from tests.reflect_fixtures import ANDREW, add_episode
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables, merged_root

pytestmark = pytest.mark.usefixtures("settle_at_once")


@pytest.mark.parametrize("how", ["deleted", "archived toward no entry"])
def test_the_newer_of_two_narratives_gone_leaves_the_other_consolidating_as_a_reindex(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    rt, _, narrative = merged_root(root)
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 0)
    try:
        [cid] = [r[0] for r in rt.db().execute(
            "SELECT cluster_id FROM clusters WHERE consolidated_entry_id=?", (narrative,))]
        later = add_episode(rt, ANDREW, "2026-11-20T10:00:00+00:00", "Andrew's dogs",
                            "Andrew has two dogs, Toby and Buddy, and walks them daily.",
                            parent_type="cluster", parent_id=cid)
        path = rt.store.path_for_id(ANDREW, later.id)
        Indexer(rt).sync_path(path)
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "two")

        text = path.read_text()
        if how == "deleted":
            block = rf"<!-- entry:{later.id} -->.*?<!-- /entry:{later.id} -->\n"
            path.write_text(re.sub(block, "", text, flags=re.S))
        else:
            path.write_text(text.replace(
                "---\n", f"---\ndeprecated_entries: {{{later.id}: ep_20200101_0001}}\n", 1))
        Indexer(rt).sync_path(path)

        assert [r[0] for r in rt.db().execute(
            "SELECT consolidated_entry_id FROM clusters WHERE cluster_id=?", (cid,))] == [
            narrative]
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "gone")
    finally:
        rt.close()
