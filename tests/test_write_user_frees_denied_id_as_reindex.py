"""``_write_user`` (a user placed again as a rebuild places them) replaces the user's clusters
whole: an id one of the old ones held and none of the new ones does is let go without being
noted as freed. Another user's cluster denied that id in the same transaction (its rename
to it refused while the first user's cluster held it) is asked again only for the ids
noted, so it kept the id after it where a ``reindex`` gives it the one let go."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.clustering.online import cluster_id_for
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.model import UserRef
from everos_reflect.runtime import Runtime
from tests.reflect_fixtures import add_episode, make_runtime
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables, cut_by_hand

pytestmark = pytest.mark.usefixtures("settle_at_once")

AMY = UserRef.of("u_amy")  # taken before u_quinn by a rebuild
PAT = UserRef.of("u_pat")
QUINN = UserRef.of("u_quinn")
RITA = UserRef.of("u_rita")
GARDEN = ("Quinn's garden", "Quinn planted tomatoes and basil in the garden beds.")
HIKE = ("Quinn hikes", "Quinn hiked the ridge trail with his brother on Sunday.")


def clusters_of(rt: Runtime) -> dict[str, set[str]]:
    """Each user's cluster ids."""
    out: dict[str, set[str]] = {}
    for cid, user in rt.db().execute("SELECT cluster_id, user_id FROM clusters"):
        out.setdefault(user, set()).add(cid)
    return out


def test_an_id_let_go_by_a_user_placed_again_goes_to_the_cluster_denied_it(
        root: Path, tmp_path: Path) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    try:
        e1 = add_episode(rt, PAT, "2026-08-01T10:00:00+00:00", "Pat's cat",
                         "Pat's cat Miso sleeps on the windowsill all afternoon.")
        Indexer(rt).scan()
        first = cluster_id_for(PAT.app, PAT.project, PAT.user_id, e1.id)
        then = cluster_id_for(PAT.app, PAT.project, PAT.user_id, e1.id, 1)
        # Quinn's narrative names Pat's next id by hand, and an Episode of Quinn joins it;
        # another names an id Amy's narrative will name
        mine = add_episode(rt, QUINN, "2026-08-02T10:00:00+00:00", *GARDEN,
                           parent_type="cluster", parent_id=then)
        add_episode(rt, QUINN, "2026-08-03T10:00:00+00:00", *GARDEN)
        add_episode(rt, QUINN, "2026-08-04T10:00:00+00:00", *HIKE, parent_type="cluster",
                    parent_id="cl_0123456789ab")
        Indexer(rt).scan()
        assert then in clusters_of(rt)["u_quinn"]
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "before")

        # one flush: Quinn's narrative cut (its cluster keeps the Episode), Rita's narrative
        # naming Pat's id (Pat's cluster asks for the next, which Quinn's still holds), and
        # Amy's naming Quinn's other id (Quinn is placed again: ``then`` let go)
        paths = [cut_by_hand(rt, QUINN, mine.id)]
        rita = add_episode(rt, RITA, "2026-08-05T10:00:00+00:00", "Rita's notes",
                           "Rita wrote about cats and windowsills.", parent_type="cluster",
                           parent_id=first)
        amy = add_episode(rt, AMY, "2026-08-06T10:00:00+00:00", *HIKE, parent_type="cluster",
                          parent_id="cl_0123456789ab")
        paths += [rt.store.path_for_id(RITA, rita.id), rt.store.path_for_id(AMY, amy.id)]
        Indexer(rt).sync_paths(paths)

        assert clusters_of(rt)["u_pat"] == {then}
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "after")
    finally:
        rt.close()
