"""A narrative refused its cluster (another user's narrative holds the id it names), then
archived by hand, leaves the cluster tables a ``reindex`` of the same Markdown builds: a
third user's cluster whose own id (``#0``, hashed from its first Episode) those narratives
name takes it back once none names it, whatever the order the logs came in."""

from __future__ import annotations

from datetime import date
from itertools import permutations
from pathlib import Path

import pytest

from everos_reflect.clustering.online import cluster_id_for
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.model import Entry, Kind, UserRef
from everos_reflect.runtime import Runtime
from tests.reflect_fixtures import add_episode, make_runtime
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables

pytestmark = pytest.mark.usefixtures("settle_at_once")

HOLDER, REFUSED, THIRD = UserRef.of("u_andrew"), UserRef.of("u_bob"), UserRef.of("u_cy")
FIRST = "ep_20260901_0001"
#: the id THIRD's first Episode founds (attempt 0), named by both narratives
OWN_ID = cluster_id_for(THIRD.app, THIRD.project, THIRD.user_id, FIRST)


def narrative(rt: Runtime, ref: UserRef, day: int) -> Entry:
    return rt.store.append(ref, Kind.EPISODE, {"timestamp": f"2026-09-0{day}T10:00:00+00:00",
                                               "parent_type": "cluster", "parent_id": OWN_ID},
                           {"Subject": "Andrew's dogs",
                            "Content": "Andrew has two dogs, Toby and Buddy."},
                           day=date(2026, 9, day))


def archive_by_hand(rt: Runtime, ref: UserRef, entry: Entry) -> None:
    path = rt.store.path_for_id(ref, entry.id)
    path.write_text(path.read_text().replace(
        "---\n", f"---\ndeprecated_entries: {{{entry.id}: ep_20200101_0001}}\n", 1))
    Indexer(rt).sync_path(path)


@pytest.mark.parametrize("order", list(permutations(["third", "holder", "refused"])))
def test_a_refused_narrative_archived_by_hand_leaves_the_ids_as_a_reindex(
        root: Path, tmp_path: Path, order: tuple[str, ...]) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    try:
        made: dict[str, Entry] = {}
        for step in order:
            if step == "third":
                made[step] = add_episode(rt, THIRD, "2026-09-01T10:00:00+00:00",
                                         "Andrew's dogs", "Andrew adopted a dog named Toby.")
            else:
                made[step] = narrative(rt, HOLDER if step == "holder" else REFUSED,
                                       2 if step == "holder" else 3)
            Indexer(rt).scan()
        assert made["third"].id == FIRST
        held = {c[3]: c[0] for c in cluster_tables(rt)["clusters"]}
        assert held[HOLDER.user_id] == OWN_ID != held[THIRD.user_id]
        assert REFUSED.user_id not in held  # refused: the holder's narrative names it first

        archive_by_hand(rt, REFUSED, made["refused"])
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "refused_archived")

        archive_by_hand(rt, HOLDER, made["holder"])
        after = cluster_tables(rt)
        assert [(c[0], c[3]) for c in after["clusters"]] == [(OWN_ID, THIRD.user_id)]
        assert after == as_reindexed(rt, tmp_path / "both_archived")
    finally:
        rt.close()
