"""A cluster id is held by one cluster, whatever the user: users' folders renamed by hand
leave the clusters as a ``reindex`` of the same Markdown.

An id hashes the founding user in (``cl_`` + sha256 of app/project/user/first member), and a
consolidated cluster keeps the id its narrative's ``parent_id`` names, user folder renamed or
not. u_bob's narrative names ``hash(u_bob, ep_1)``; u_bob's folder renamed u_cy, u_cy's
cluster keeps that id; u_andrew's folder then renamed u_bob, its first Episode (the same id
``ep_1``) hashes to that id again. The founding test looked at the founding user's clusters
only, so two clusters held one id, where a rebuild (every cluster id in one namespace) gives
the later one the next free id."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.model import UserRef
from everos_reflect.runtime import Runtime
from tests.reflect_fixtures import ANDREW, add_episode, make_runtime, run_reflection, seed_pets
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables

pytestmark = pytest.mark.usefixtures("settle_at_once")

BOB = UserRef.of("u_bob")


def bob_merged_beside_andrew(root: Path) -> tuple[Runtime, Path]:
    """u_bob's pets merged, beside u_andrew's one Episode (whose id is that of Bob's first):
    the runtime, and the folder of the users' folders."""
    rt = make_runtime(root, ExtractiveLLM())
    seed_pets(rt, BOB)
    add_episode(rt, ANDREW, "2026-08-02T10:00:00+00:00", "Andrew plays chess",
                "Andrew played chess with Sam at the club.")
    Indexer(rt).scan()
    assert run_reflection(rt)["merged"] == 1
    return rt, rt.store.path_for_id(BOB, "ep_20260802_0001").parents[2]


def renamed(rt: Runtime, *moves: tuple[Path, Path]) -> None:
    """Each folder renamed by hand (``old``, ``new``) in turn, the index scanning after each."""
    for old, new in moves:
        os.rename(old, new)
        Indexer(rt).scan()


def test_a_user_folder_renamed_onto_a_moved_user_s_name_keeps_cluster_ids_unique(
        root: Path, tmp_path: Path) -> None:
    rt, users = bob_merged_beside_andrew(root)
    try:
        renamed(rt, (users / "u_bob", users / "u_cy"), (users / "u_andrew", users / "u_bob"))

        after = cluster_tables(rt)
        ids = [c[0] for c in after["clusters"]]
        assert len(ids) == len(set(ids)) == 2
        assert after == as_reindexed(rt, tmp_path / "rebuilt")
    finally:
        rt.close()


def test_a_narrative_naming_an_id_an_episode_of_another_user_founded_takes_it_and_gives_it_back(
        root: Path, tmp_path: Path) -> None:
    """The other order: the Episode founded the id first (no narrative named it then), the
    narrative's folder comes back after; and then goes again."""
    rt, users = bob_merged_beside_andrew(root)
    try:
        renamed(rt, (users / "u_bob", tmp_path / "away"), (users / "u_andrew", users / "u_bob"))
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "founded")
        os.rename(tmp_path / "away", users / "u_cy")
        Indexer(rt).scan()

        after = cluster_tables(rt)
        assert sorted((c[3], c[7] is not None) for c in after["clusters"]) == [
            ("u_bob", False), ("u_cy", True)]
        assert len({c[0] for c in after["clusters"]}) == 2
        assert after == as_reindexed(rt, tmp_path / "back")

        os.rename(users / "u_cy", tmp_path / "gone")
        Indexer(rt).scan()

        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "gone_again")
    finally:
        rt.close()
