"""A narrative whose ``parent_id`` is not a cluster id names its own id's cluster (the hash of
its user and its id, session 47). The checks that read which user's narrative names an id
(``_founded_before``, ``_NAMED_ELSEWHERE``, ``_narrative_namers``) read ``parent_id`` as
written; each case here is one where that literal read and the hashed id part, compared with
a ``reindex`` of a copy. ``_NAMED_ELSEWHERE`` and ``_narrative_namers`` keep an Episode from
founding an id another user's narrative names: a hashed own id hashes that other user in,
and no Episode of this user founds it, so only the literal ids count there; the rename case
below shows it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from everos_reflect.clustering.online import cluster_id_for
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.markdown import settling
from everos_reflect.model import UserRef
from everos_reflect.runtime import Runtime
from tests.reflect_fixtures import ANDREW, add_episode, make_runtime
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables, cut_by_hand
from tests.test_freed_own_id_narrative_as_reindex import BOB, DOGS, own_id_held_by_andrew

pytestmark = pytest.mark.usefixtures("settle_at_once")

CY = UserRef.of("u_cy")  # after u_bob in a rebuild


def holders(rt: Runtime) -> list[tuple[str, str, str | None]]:
    """Each cluster's id, user and consolidating narrative."""
    return [tuple(r) for r in rt.db().execute(
        "SELECT cluster_id, user_id, consolidated_entry_id FROM clusters ORDER BY cluster_id")]


def test_an_own_id_freed_while_a_later_user_claims_it_goes_to_the_earlier_narrative(
        root: Path, tmp_path: Path) -> None:
    """Bob's narrative names no cluster id; Andrew's, taken first, names Bob's own id by
    hand and holds it. In one flush Andrew's is cut and Cy's, naming that id by hand too, is
    added: a rebuild seeds it with Bob's (before Cy), and Cy's is attached nowhere.
    ``_founded_before`` read ``parent_id`` as written: Bob's named no id, Cy's took it, and
    Bob's stayed in no cluster."""
    rt = make_runtime(root, ExtractiveLLM())
    try:
        bobs, own, andrews = own_id_held_by_andrew(rt, tmp_path)

        cut = cut_by_hand(rt, ANDREW, andrews.id)
        cys = add_episode(rt, CY, "2026-08-03T10:00:00+00:00", *DOGS, parent_type="cluster",
                          parent_id=own)
        Indexer(rt).sync_paths([cut, rt.store.path_for_id(CY, cys.id)])  # one flush

        assert holders(rt) == [(own, "u_bob", bobs.id)]
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "freed")
    finally:
        rt.close()



def test_an_own_id_left_by_a_renamed_folder_goes_to_the_narrative_naming_it_by_hand(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bob's narrative names no cluster id: its cluster is the hash of u_bob and its id, and
    Cy's, naming that id by hand, is attached nowhere. ``mv users/u_bob users/u_dan`` moves
    Bob's to the hash of u_dan: the old id is Cy's, as a rebuild gives it (the moved
    narrative, read as written, names no id; hashed, it names u_dan's)."""
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 0)  # renamed long after the writes
    rt = make_runtime(root, ExtractiveLLM())
    try:
        bobs = add_episode(rt, BOB, "2026-08-01T10:00:00+00:00", *DOGS, parent_type="cluster",
                           parent_id="my notes")
        own = cluster_id_for(BOB.app, BOB.project, BOB.user_id, bobs.id)
        cys = add_episode(rt, CY, "2026-08-03T10:00:00+00:00", *DOGS, parent_type="cluster",
                          parent_id=own)
        Indexer(rt).scan()
        assert holders(rt) == [(own, "u_bob", bobs.id)]
        users = rt.root / BOB.app / BOB.project / "users"
        os.rename(users / BOB.user_id, users / "u_dan")

        Indexer(rt).scan()

        assert holders(rt) == sorted([
            (own, "u_cy", cys.id),
            (cluster_id_for(BOB.app, BOB.project, "u_dan", bobs.id), "u_dan", bobs.id)])
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "renamed")
    finally:
        rt.close()
