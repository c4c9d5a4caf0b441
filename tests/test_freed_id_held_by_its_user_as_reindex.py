"""A narrative left unattached while another user's cluster held the id it names is attached
once that cluster lets the id go, also when another narrative of its own user took the id in
the same transaction (synced after the other user's log was dropped): it was passed over, the
id being held, and stayed in no cluster where a ``reindex`` attaches it (the newer of the two
consolidating the cluster)."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.model import UserRef
from tests.reflect_fixtures import ANDREW, add_episode
from tests.test_cluster_history_as_reindex import (
    as_reindexed,
    cluster_tables,
    cut_by_hand,
    hand_edited_merge,
    narrative_cluster,
)

pytestmark = pytest.mark.usefixtures("settle_at_once")

BOB = UserRef.of("u_bob")


def test_a_narrative_passed_over_is_attached_when_its_user_took_the_freed_id(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with hand_edited_merge(root, monkeypatch) as (rt, narrative):
        cid = narrative_cluster(rt, narrative)
        passed_over, taker = (add_episode(rt, BOB, f"2026-10-0{d}T10:00:00+00:00", "Bob's dogs",
                                    f"Bob has two dogs and walks them, day {d}.",
                                    parent_type="cluster", parent_id=cid) for d in (2, 1))
        Indexer(rt).sync_path(rt.store.path_for_id(BOB, passed_over.id))  # Andrew holds the id

        path = cut_by_hand(rt, ANDREW, narrative)  # Andrew's narrative deleted by hand
        Indexer(rt).sync_paths([path, rt.store.path_for_id(BOB, taker.id)])

        assert {r[0]: r[1] for r in rt.db().execute(
            "SELECT entry_id, cluster_id FROM cluster_members WHERE user_id='u_bob'")} == {
            passed_over.id: cid, taker.id: cid}
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "freed")
