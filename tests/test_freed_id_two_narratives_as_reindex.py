"""Two live narratives of one user naming a cluster id another user's cluster held (a log
moved or copied by hand between folders) are both attached once that cluster lets the id go,
the newer consolidating it, as a ``reindex`` seeds the cluster with the newest and attaches
the other. Only the first (by id) was attached; the other stayed in no cluster. Also when
one of them took the id in the same transaction (synced after the other user's log was
dropped): the other, passed over while the id was held, stayed in no cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.model import Entry, UserRef
from everos_reflect.runtime import Runtime
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


def bobs_narratives(rt: Runtime, cid: str, days: tuple[int, ...]) -> list[Entry]:
    """Bob's narratives naming Andrew's cluster ``cid``, one a day of October."""
    return [add_episode(rt, BOB, f"2026-10-0{d}T10:00:00+00:00", "Bob's dogs",
                        f"Bob has two dogs and walks them, day {d}.",
                        parent_type="cluster", parent_id=cid) for d in days]


def bobs_members(rt: Runtime) -> dict[str, str]:
    return {r[0]: r[1] for r in rt.db().execute(
        "SELECT entry_id, cluster_id FROM cluster_members WHERE user_id='u_bob'")}


def test_two_narratives_naming_a_freed_id_are_both_attached_as_a_reindex(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with hand_edited_merge(root, monkeypatch) as (rt, narrative):
        cid = narrative_cluster(rt, narrative)
        older, newer = bobs_narratives(rt, cid, (1, 2))
        Indexer(rt).scan()  # Andrew holds the id: neither is attached
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "held")

        # Andrew's narrative deleted by hand
        Indexer(rt).sync_path(cut_by_hand(rt, ANDREW, narrative))

        assert bobs_members(rt) == {older.id: cid, newer.id: cid}
        assert [tuple(r) for r in rt.db().execute(
            "SELECT user_id, consolidated_entry_id FROM clusters WHERE cluster_id=?",
            (cid,))] == [("u_bob", newer.id)]
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "freed")


def test_a_narrative_passed_over_is_attached_when_its_user_took_the_freed_id(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with hand_edited_merge(root, monkeypatch) as (rt, narrative):
        cid = narrative_cluster(rt, narrative)
        passed_over, taker = bobs_narratives(rt, cid, (2, 1))
        Indexer(rt).sync_path(rt.store.path_for_id(BOB, passed_over.id))  # Andrew holds the id

        path = cut_by_hand(rt, ANDREW, narrative)  # Andrew's narrative deleted by hand
        Indexer(rt).sync_paths([path, rt.store.path_for_id(BOB, taker.id)])

        assert bobs_members(rt) == {passed_over.id: cid, taker.id: cid}
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "freed")
