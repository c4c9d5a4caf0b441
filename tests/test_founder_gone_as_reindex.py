"""A cluster whose founding Episode left it (archived by hand, deleted, or edited away) has
the id a ``reindex`` gives it: derived from its first live member.

Cluster ids are derived from the first member (:func:`online.cluster_id_for`) so that a
rebuild from Markdown reproduces them; the Markdown holds no trace of which Episode once
founded a cluster, so a rebuild names the cluster after the first member it has now. Live
kept the founder's id.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from everos_reflect.clustering import ClusterService
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.model import Entry, Kind
from everos_reflect.runtime import Runtime
from tests.reflect_fixtures import ANDREW, add_episode, make_runtime
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables

pytestmark = pytest.mark.usefixtures("settle_at_once")


def chess_games(rt: Runtime, days: range) -> list[Entry]:
    games = [add_episode(rt, ANDREW, f"2026-11-{d:02d}T10:00:00+00:00", "Andrew plays chess",
                         f"Andrew played chess with Sam at the club, game {d}.") for d in days]
    Indexer(rt).scan()
    return games


def cluster_ids(rt: Runtime) -> set[str]:
    return {r[0] for r in rt.db().execute("SELECT cluster_id FROM clusters")}


@pytest.mark.parametrize("how", ["archived toward no entry", "archived toward a member",
                                 "deleted", "edited away"])
def test_a_cluster_whose_founder_left_has_the_id_a_reindex_gives_it(
        root: Path, tmp_path: Path, how: str) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    try:
        games = chess_games(rt, range(1, 5))
        [before] = cluster_ids(rt)
        founder = games[0]
        path = rt.store.path_for_id(ANDREW, founder.id)
        text = path.read_text()
        if how.startswith("archived"):
            toward = "ep_20261130_0099" if how.endswith("no entry") else games[2].id
            text = text.replace("---\n", f"---\ndeprecated_entries: {{{founder.id}: {toward}}}\n",
                                1)
        elif how == "deleted":
            closing = f"<!-- /entry:{founder.id} -->\n"
            start = text.index(f"<!-- entry:{founder.id} -->")
            end = text.index(closing) + len(closing)
            text = text[:start] + text[end:]
        else:
            text = text.replace("Andrew plays chess", "Gluon lecture", 1).replace(
                "Andrew played chess with Sam at the club, game 1.",
                "Quantum chromodynamics lecture notes on gluon confinement.")
        path.write_text(text)
        Indexer(rt).sync_path(path)

        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "rebuilt")
        assert ClusterService(rt).cluster_of(ANDREW, games[1].id) != before
    finally:
        rt.close()


@pytest.mark.parametrize("late", [[1], [1, 3], [3]])
def test_an_earlier_log_synced_late_leaves_the_clusters_as_a_reindex(
        root: Path, tmp_path: Path, late: list[int]) -> None:
    """Episodes of earlier days written after later ones were indexed join the cluster
    among members placed after them: those members' similarities, the centroid's fold and
    (joined before the first) the cluster's id are replayed as a rebuild places them."""
    rt = make_runtime(root, ExtractiveLLM())
    try:
        chess_games(rt, range(2, 9, 2))  # days 2, 4, 6, 8
        chess_games(rt, range(1, 9, 2))  # days 1, 3, 5, 7, written late: one scan of them
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "scanned")

        for day in late:  # one log at a time, as the watcher syncs them
            add_episode(rt, ANDREW, f"2026-11-{day:02d}T09:00:00+00:00", "Andrew plays chess",
                        f"Andrew played chess with Sam at home, day {day}.")
            Indexer(rt).sync_path(rt.store.log_path(ANDREW, Kind.EPISODE, date(2026, 11, day)))

        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "rebuilt")
    finally:
        rt.close()
