"""Two live narratives of one user naming a cluster id another user's cluster held (a log
moved or copied by hand between folders) are both attached once that cluster lets the id go,
the newer consolidating it, as a ``reindex`` seeds the cluster with the newest and attaches
the other. Only the first (by id) was attached; the other stayed in no cluster."""

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

BOB = UserRef.of("u_bob")


def test_two_narratives_naming_a_freed_id_are_both_attached_as_a_reindex(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt, _, narrative = merged_root(root)
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 0)
    try:
        [cid] = [r[0] for r in rt.db().execute(
            "SELECT cluster_id FROM clusters WHERE consolidated_entry_id=?", (narrative,))]
        older, newer = (add_episode(rt, BOB, f"2026-10-0{d}T10:00:00+00:00", "Bob's dogs",
                                    f"Bob has two dogs and walks them, day {d}.",
                                    parent_type="cluster", parent_id=cid) for d in (1, 2))
        Indexer(rt).scan()  # Andrew holds the id: neither is attached
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "held")

        path = rt.store.path_for_id(ANDREW, narrative)  # Andrew's narrative deleted by hand
        block = rf"<!-- entry:{narrative} -->.*?<!-- /entry:{narrative} -->\n"
        path.write_text(re.sub(block, "", path.read_text(), flags=re.S))
        Indexer(rt).sync_path(path)

        assert {r[0]: r[1] for r in rt.db().execute(
            "SELECT entry_id, cluster_id FROM cluster_members WHERE user_id='u_bob'")} == {
            older.id: cid, newer.id: cid}
        assert [tuple(r) for r in rt.db().execute(
            "SELECT user_id, consolidated_entry_id FROM clusters WHERE cluster_id=?",
            (cid,))] == [("u_bob", newer.id)]
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "freed")
    finally:
        rt.close()
