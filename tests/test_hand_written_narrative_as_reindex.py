"""A narrative written by hand into a log, naming in its ``parent_id`` a cluster its user
already has, leaves the clusters a ``reindex`` of the same Markdown builds: a rebuild seeds
that cluster with the narrative and places every other Episode after it by the rule, so the
cluster's Episodes that are unlike the narrative found a cluster of their own (the first of
them under the next free id: the named one is the narrative's). Attached online, they stayed
live beside the narrative until ``recluster``."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.runtime import Runtime
from tests.reflect_fixtures import ANDREW, add_episode, make_runtime, seed_pets
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables

pytestmark = pytest.mark.usefixtures("settle_at_once")

TEXTS = {
    "unlike its members": ("Andrew plays chess",
                           "Andrew played chess with Sam at the club every week."),
    "like its members": ("Andrew's dogs",
                         "Andrew adopted Toby and Buddy; he now has two dogs."),
}


def _pets_cluster(rt: Runtime) -> str:
    seed_pets(rt)
    Indexer(rt).scan()
    [cid] = [r[0] for r in rt.db().execute("SELECT cluster_id FROM clusters")]
    return cid


def _clusters_of(rt: Runtime) -> dict[str, str]:
    return {r[0]: r[1] for r in rt.db().execute(
        "SELECT entry_id, cluster_id FROM cluster_members WHERE deprecated_by IS NULL")}


@pytest.mark.parametrize("how", ["scan", "one file"])
@pytest.mark.parametrize("text", sorted(TEXTS))
def test_a_hand_written_narrative_naming_a_cluster_of_its_user_leaves_it_as_a_reindex(
        root: Path, tmp_path: Path, text: str, how: str) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    try:
        cid = _pets_cluster(rt)
        subject, content = TEXTS[text]
        narrative = add_episode(rt, ANDREW, "2026-09-20T10:00:00+00:00", subject, content,
                                parent_type="cluster", parent_id=cid)
        if how == "scan":
            Indexer(rt).scan()
        else:
            Indexer(rt).sync_path(rt.store.path_for_id(ANDREW, narrative.id))

        placed = _clusters_of(rt)
        assert placed[narrative.id] == cid
        consolidated = {r[0]: r[1] for r in rt.db().execute(
            "SELECT cluster_id, consolidated_entry_id FROM clusters")}
        assert consolidated[cid] == narrative.id
        if text == "unlike its members":  # the pets found a cluster of their own
            assert {c for e, c in placed.items() if e != narrative.id} == {
                c for c in consolidated if c != cid}
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "rebuilt")
    finally:
        rt.close()
