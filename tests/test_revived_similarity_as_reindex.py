"""Members revived by ``undo``, or by removing their ``deprecated_entries`` line by hand, hold
the similarity a ``reindex`` gives them.

A member's archived row has no similarity; revived, it kept that NULL, and the members after
one that left the cluster (the narrative an undo archives) kept their cosine with a centroid
that still held it, where a ``reindex`` replays the cluster as it is now.

An archived Episode is history of the cluster its last successor is in, not of the one it came
from: revived, one archived by hand (toward another cluster's narrative, along a chain of
updates) came back there, where a ``reindex`` places it by the rule; one with no row joined
its cluster with a cosine to every later member, and they kept theirs. A chain 65 updates deep
lost its first Episode's history row.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.undo import undo_merge
from tests.reflect_fixtures import ANDREW, add_episode
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables, merged_root

pytestmark = pytest.mark.usefixtures("settle_at_once")


def similarities(rt: Runtime) -> dict[str, float | None]:
    """Each live member's similarity."""
    return {r[0]: r[1] for r in rt.db().execute(
        "SELECT entry_id, similarity FROM cluster_members WHERE deprecated_by IS NULL")}


def archived_then_revived(rt: Runtime, tmp_path: Path, entry_id: str,
                          target: str) -> dict[str, str]:
    """``entry_id`` archived toward ``target`` by hand (a ``deprecated_entries`` line: the
    clusters are then as a ``reindex`` leaves them), then the line removed by hand: each live
    member's cluster once it is revived."""
    path = rt.store.path_for_id(ANDREW, entry_id)
    good = path.read_text()
    line = f"deprecated_entries: {{{entry_id}: {target}}}\n"
    path.write_text(good.replace("---\n", "---\n" + line, 1))
    Indexer(rt).sync_path(path)
    assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "archived")

    path.write_text(good)  # the line removed by hand: revived
    Indexer(rt).sync_path(path)
    return {r[0]: r[1] for r in rt.db().execute(
        "SELECT entry_id, cluster_id FROM cluster_members WHERE deprecated_by IS NULL")}


def test_an_undone_merge_leaves_the_clusters_as_a_reindex(root: Path, tmp_path: Path) -> None:
    rt, sources, narrative = merged_root(root)
    try:
        undo_merge(rt, ANDREW, narrative)

        first, *rest = sorted(sources, key=lambda e: e.id)
        got = similarities(rt)
        assert got[first.id] is None  # it founded the cluster
        assert all(got[e.id] is not None for e in rest)
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "rebuilt")
    finally:
        rt.close()


@pytest.mark.parametrize("how_many", [1, 3])
def test_sources_revived_by_hand_leave_the_clusters_as_a_reindex(
        root: Path, tmp_path: Path, how_many: int) -> None:
    rt, sources, narrative = merged_root(root)
    try:
        revived = sorted(sources, key=lambda e: e.id)[-how_many:]
        assert rt.store.undeprecate(ANDREW, [e.id for e in revived])  # the line, by hand
        Indexer(rt).sync_paths(sorted({rt.store.path_for_id(ANDREW, e.id) for e in revived}))

        got = similarities(rt)
        assert narrative in got and all(got[e.id] is not None for e in revived)
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "rebuilt")
    finally:
        rt.close()


@pytest.mark.parametrize("toward", ["another cluster's narrative", "a live Episode", "no entry"])
def test_an_episode_archived_by_hand_and_revived_is_placed_as_a_reindex_places_it(
        root: Path, tmp_path: Path, toward: str) -> None:
    rt, _, narrative = merged_root(root)
    try:
        chess = [add_episode(rt, ANDREW, f"2026-11-{d:02d}T10:00:00+00:00", "Andrew plays chess",
                             f"Andrew played chess with Sam at the club, game {d}.").id
                 for d in range(1, 6)]
        Indexer(rt).scan()
        target = {"another cluster's narrative": narrative, "a live Episode": chess[0],
                  "no entry": "ep_20261130_0099"}[toward]
        cluster_of = archived_then_revived(rt, tmp_path, chess[2], target)
        assert cluster_of[chess[2]] == cluster_of[chess[0]] != cluster_of[narrative]
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "revived")
    finally:
        rt.close()


def test_an_episode_archived_toward_a_narrative_and_revived_founds_a_cluster_as_a_reindex(
        root: Path, tmp_path: Path) -> None:
    """Archived by hand toward the narrative, an Episode like nothing else is that cluster's
    history; revived, it went back in place when the rule would found it a cluster (only
    another cluster stopped it), where a ``reindex`` places it by the rule: alone."""
    rt, _, narrative = merged_root(root)
    try:
        chess = add_episode(rt, ANDREW, "2026-11-01T10:00:00+00:00", "Chess club",
                            "Sam won the chess match at the club on Friday evening.").id
        Indexer(rt).scan()
        cluster_of = archived_then_revived(rt, tmp_path, chess, narrative)
        assert cluster_of[chess] != cluster_of[narrative]
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "revived")
    finally:
        rt.close()


@pytest.mark.parametrize("looped", [False, True])
def test_a_chain_of_65_updates_by_hand_broken_in_the_middle_leaves_the_clusters_as_a_reindex(
        root: Path, tmp_path: Path, looped: bool) -> None:
    """A rebuild follows an archived Episode's updates 1 + 64 hops to its last successor, so
    an Episode 65 updates before a revived one is history of the revived one's cluster."""
    rt, _, narrative = merged_root(root)
    try:
        start = datetime(2026, 10, 1, 10, tzinfo=UTC)
        n = 66 if looped else 70
        games = [add_episode(rt, ANDREW, (start + timedelta(days=d)).isoformat(),
                             "Andrew plays chess", f"Andrew played chess with Sam, game {d}.").id
                 for d in range(n)]
        Indexer(rt).scan()
        good = {e: rt.store.path_for_id(ANDREW, e).read_text() for e in games}
        after = [*games[1:], games[0] if looped else narrative]
        for entry_id, toward in zip(games, after, strict=True):
            line = f"deprecated_entries: {{{entry_id}: {toward}}}\n"
            rt.store.path_for_id(ANDREW, entry_id).write_text(
                good[entry_id].replace("---\n", "---\n" + line, 1))
        Indexer(rt).sync_paths(sorted({rt.store.path_for_id(ANDREW, e) for e in games}))
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "chained")

        middle = games[n // 2]
        rt.store.path_for_id(ANDREW, middle).write_text(good[middle])  # revived by hand
        Indexer(rt).sync_path(rt.store.path_for_id(ANDREW, middle))

        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "broken")
    finally:
        rt.close()
