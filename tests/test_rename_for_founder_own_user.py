"""A cluster renamed after its founder (``_rename_for_founder``) takes no id another user's
cluster holds, and takes its founder's own id back once that cluster lets it go, in the same
transaction. Bob's narrative naming Andrew's cluster id (Andrew's cluster took the next id),
then archived or deleted by hand, left Bob's cluster (joined by another Episode of Bob's)
holding it until renamed: Andrew's took it first, both held it, and Bob's rename, looking
the id up alone, renamed Andrew's cluster after Bob's hash of its member, an id a
``reindex`` gives no cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.clustering.online import cluster_id_for
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.model import UserRef
from tests.reflect_fixtures import ANDREW, add_episode, make_runtime
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables

pytestmark = pytest.mark.usefixtures("settle_at_once")

BOB = UserRef.of("u_bob")  # taken after u_andrew by a rebuild


@pytest.mark.parametrize("how", ["archived by hand", "deleted"])
def test_a_cluster_id_taken_back_by_its_founder_keeps_its_founder_s_name(
        root: Path, tmp_path: Path, how: str) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    try:
        dogs = add_episode(rt, ANDREW, "2026-08-01T10:00:00+00:00", "Andrew's dogs",
                           "Andrew adopted a dog named Toby, then Buddy; he walks both dogs.")
        Indexer(rt).scan()
        own = cluster_id_for(ANDREW.app, ANDREW.project, ANDREW.user_id, dogs.id)
        narrative = add_episode(rt, BOB, "2026-08-02T10:00:00+00:00", "Andrew's dogs",
                                "Andrew adopted a dog named Toby, then Buddy.",
                                parent_type="cluster", parent_id=own)
        add_episode(rt, BOB, "2026-08-02T11:00:00+00:00", "Andrew's dogs",
                    "Andrew adopted a dog named Toby, then Buddy; Bob met them.")
        Indexer(rt).scan()  # Bob's narrative holds Andrew's id: Andrew's cluster takes the next
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "named")

        path = rt.store.path_for_id(BOB, narrative.id)
        text = path.read_text()
        if how == "deleted":
            head, _, rest = text.partition(f"<!-- entry:{narrative.id} -->")
            path.write_text(head + rest.partition(f"<!-- /entry:{narrative.id} -->\n")[2])
        else:
            path.write_text(text.replace(
                "---\n", f"---\ndeprecated_entries: {{{narrative.id}: ep_20200101_0001}}\n", 1))
        Indexer(rt).sync_path(path)

        assert [tuple(r) for r in rt.db().execute(
            "SELECT cluster_id, user_id FROM clusters WHERE cluster_id=?", (own,))] == [
            (own, "u_andrew")]
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "let go")
    finally:
        rt.close()
