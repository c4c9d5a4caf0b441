"""A narrative written by hand naming in its ``parent_id`` a cluster id no cluster holds (a
fresh one, or one that is not a cluster id: its own id's cluster then) leaves the clusters a
``reindex`` of the same Markdown builds. A rebuild seeds that cluster with the narrative
before it places any Episode, so the user's Episodes like it join it (and the clusters
after them are founded and named as that makes them). Online the narrative founded a cluster
of its own and every Episode stayed where it was. The user is placed again only when one of
their live Episodes is close enough to the narrative to join it: a narrative like none of
them (most of a copied root's) costs no placing."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.clustering.service import ClusterService
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.model import UserRef
from everos_reflect.runtime import Runtime
from tests.reflect_fixtures import ANDREW, add_episode, make_runtime, seed_pets
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables

pytestmark = pytest.mark.usefixtures("settle_at_once")

PARENTS = {"fresh": "cl_0123456789ab", "not a cluster id": "my pets"}
TEXTS = {
    "like the pets": ("Andrew's dogs", "Andrew adopted a dog named Toby and a dog named Buddy; "
                                       "Andrew now has two dogs, Toby and Buddy."),
    "like no Episode": ("Quarterly tax filing",
                        "Receipts, invoices, VAT forms and accountant appointments."),
}


def _placed(monkeypatch: pytest.MonkeyPatch) -> list[UserRef]:
    """The users :meth:`ClusterService.place_after_merges` is asked to place, in order."""
    calls: list[UserRef] = []
    place = ClusterService.place_after_merges

    def spy(self: ClusterService, refs: list[UserRef]) -> None:
        refs = list(refs)
        calls.extend(refs)
        place(self, refs)

    monkeypatch.setattr(ClusterService, "place_after_merges", spy)
    return calls


def _clusters_of(rt: Runtime) -> dict[str, str]:
    return {r[0]: r[1] for r in rt.db().execute(
        "SELECT entry_id, cluster_id FROM cluster_members WHERE deprecated_by IS NULL")}


@pytest.mark.parametrize("how", ["scan", "one file"])
@pytest.mark.parametrize("text", sorted(TEXTS))
@pytest.mark.parametrize("parent", sorted(PARENTS))
def test_a_hand_written_narrative_naming_a_fresh_cluster_id_leaves_it_as_a_reindex(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parent: str, text: str,
        how: str) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    try:
        pets = seed_pets(rt)
        chess = add_episode(rt, ANDREW, "2026-09-05T10:00:00+00:00", "Andrew plays chess",
                            "Andrew played chess with Sam at the club every week.")
        Indexer(rt).scan()
        placed = _placed(monkeypatch)
        subject, content = TEXTS[text]
        narrative = add_episode(rt, ANDREW, "2026-09-20T10:00:00+00:00", subject, content,
                                parent_type="cluster", parent_id=PARENTS[parent])
        if how == "scan":
            Indexer(rt).scan()
        else:
            Indexer(rt).sync_path(rt.store.path_for_id(ANDREW, narrative.id))

        members = _clusters_of(rt)
        if text == "like the pets":  # a rebuild seeds its cluster first: the pets join it
            assert {members[e.id] for e in pets} == {members[narrative.id]}
            assert placed == [ANDREW]
        else:
            assert members[narrative.id] not in {members[e.id] for e in [*pets, chess]}
            assert placed == []
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "rebuilt")
    finally:
        rt.close()
