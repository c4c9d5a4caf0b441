"""A narrative made a plain Episode by hand is told from a real Episode by what the index held
(its ``parent_type`` before the sync: :attr:`events.ChangeSet.unparented`), not by a rule of
thumb. The rule was "the member consolidating its cluster, or one with no similarity in a
consolidated cluster": a deletion applied before it in the same flush (in the same save, or
in another log synced with it) recomputed its cluster, which gave the former narrative (plain
in ``entries`` by then) a similarity, and the sync read it as an unchanged member: it stayed
in the cluster its ``parent_id`` had named, where a ``reindex`` places it by the rule."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.clustering.service import ClusterService
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.model import Entry, UserRef
from everos_reflect.runtime import Runtime
from tests.reflect_fixtures import add_episode, make_runtime
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables
from tests.test_narrative_unparented_by_hand_as_reindex import unparent

pytestmark = pytest.mark.usefixtures("settle_at_once")

BOB = UserRef.of("u_bob")
CID = "cl_0123456789ab"
DOGS = "Bob adopted a dog named Toby, then Buddy; he walks both dogs."


def two_narratives(rt: Runtime, member_day: int) -> tuple[Entry, Entry]:
    """Bob's older narrative (about the marathon) and a dog Episode (on ``member_day``) in
    the cluster a newer dog narrative consolidates: the older narrative and the member."""
    older = add_episode(rt, BOB, "2026-08-02T09:00:00+00:00", "Marathon",
                        "Bob trains for the city marathon, running long miles on Sundays.",
                        parent_type="cluster", parent_id=CID)
    member = add_episode(rt, BOB, f"2026-08-0{member_day}T10:00:00+00:00", "Bob's dogs", DOGS)
    add_episode(rt, BOB, "2026-08-03T10:00:00+00:00", "Bob's dogs",
                "Bob adopted a dog named Toby and walks him every day.",
                parent_type="cluster", parent_id=CID)
    return older, member


def delete(rt: Runtime, entry_id: str) -> Path:
    path = rt.store.path_for_id(BOB, entry_id)
    path.write_text(re.sub(rf"<!-- entry:{entry_id} -->.*?<!-- /entry:{entry_id} -->\n", "",
                           path.read_text(), flags=re.S))
    return path


def member_of(rt: Runtime, entry_id: str) -> str:
    return rt.db().execute("SELECT cluster_id FROM cluster_members WHERE entry_id=?",
                           (entry_id,)).fetchone()[0]


@pytest.mark.parametrize("where", ["the same save", "another log of the flush"])
def test_an_older_narrative_made_plain_beside_a_deletion_is_placed_as_a_reindex(
        root: Path, tmp_path: Path, where: str) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    try:
        older, member = two_narratives(rt, 2 if where == "the same save" else 1)
        Indexer(rt).scan()
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "before")
        assert member_of(rt, member.id) == member_of(rt, older.id) == CID

        paths = sorted({delete(rt, member.id), unparent(rt, BOB, older.id)})
        Indexer(rt).sync_paths(paths)

        assert member_of(rt, older.id) != CID  # unlike the cluster: one of its own
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "after")
    finally:
        rt.close()


def test_a_plain_episode_with_no_similarity_in_a_consolidated_cluster_stays_on_an_edit(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The exact rule leaves a real Episode alone: one whose row has no similarity in a
    consolidated cluster (its narrative's vector missing when the cluster was recomputed)
    edited in its metadata alone stays where it is, as a metadata-only edit does; the rule
    of thumb took it out and placed it again."""
    rt = make_runtime(root, ExtractiveLLM())
    try:
        _, member = two_narratives(rt, 2)
        Indexer(rt).scan()
        rt.db().execute("UPDATE cluster_members SET similarity=NULL WHERE entry_id=?",
                        (member.id,))
        rt.db().commit()
        path = rt.store.path_for_id(BOB, member.id)
        path.write_text(path.read_text().replace("parent_id: mc_0802\n",
                                                 "parent_id: mc_0802\nimportance: 0.9\n", 1))
        outcome: dict[str, str] = {}
        real = ClusterService.on_entries_indexed

        def noted(self: ClusterService, *args: Any, **kw: Any) -> dict[str, str]:
            out = real(self, *args, **kw)
            outcome.update(out)
            return out

        monkeypatch.setattr(ClusterService, "on_entries_indexed", noted)
        Indexer(rt).sync_path(path)

        assert outcome == {member.id: "unchanged"}
        assert member_of(rt, member.id) == CID
    finally:
        rt.close()
