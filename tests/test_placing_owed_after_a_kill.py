"""The placing after merges survives a kill: owed in the transaction that makes it due, done
by the next recovery.

A narrative stands for its sources, so after a merge (or a sync pass that founds the cluster
a copied narrative names) the user's Episodes are placed again as a rebuild places them
(``place_after_merges``), at the end of the run or of the pass. A process killed before that
end left the clusters unlike a ``reindex`` of the same Markdown, and nothing placed them
later: the logs had not changed, so no sync would. The users are noted in ``index_meta``
(``placing_owed``) where the placing becomes due and removed as each is placed; the
recovery that ``serve`` runs at start-up and every Reflection run runs first places them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from everos_reflect.clustering.service import ClusterService
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.strategies.reflect import ReflectEpisodes
from tests.reflect_fixtures import ANDREW, add_episode, make_runtime, run_reflection, seed_pets
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables
from tests.test_copied_root_placed_once_as_reindex import copied_merged_root

pytestmark = pytest.mark.usefixtures("settle_at_once")


class Killed(BaseException):
    """The process dies here: nothing after it runs."""


def kill_the_placing(monkeypatch: pytest.MonkeyPatch) -> None:
    def killed(self: ClusterService, refs: Any) -> None:
        if refs:
            raise Killed("before the placing")

    monkeypatch.setattr(ClusterService, "place_after_merges", killed)


def test_a_run_killed_before_its_end_placing_is_placed_by_the_next_recovery(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    placing = ClusterService.place_after_merges
    rt = make_runtime(root, ExtractiveLLM())
    try:
        add_episode(rt, ANDREW, "2026-08-01T10:00:00-07:00", "Andrew",
                    "Andrew read about adopting a dog.")
        seed_pets(rt)
        Indexer(rt).scan()
        kill_the_placing(monkeypatch)
        with pytest.raises(Killed):
            run_reflection(rt)  # the merge committed, its journal row gone
        assert ClusterService(rt).owed_placing() == [ANDREW]
    finally:
        rt.close()
    monkeypatch.setattr(ClusterService, "place_after_merges", placing)
    rt = make_runtime(root, ExtractiveLLM())
    try:
        assert cluster_tables(rt) != as_reindexed(rt, tmp_path / "before")  # what was left

        assert ReflectEpisodes().recover(rt) == {}  # no merge to finish: only the placing

        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "rebuilt")
        assert ClusterService(rt).owed_placing() == []
    finally:
        rt.close()


def test_a_scan_killed_before_its_pass_end_placing_is_placed_by_the_next_recovery(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "copy"
    copied_merged_root(root, copy, monkeypatch)
    placing = ClusterService.place_after_merges
    kill_the_placing(monkeypatch)
    monkeypatch.setattr(Indexer, "flush_entries", 1)  # a flush per log
    live = make_runtime(copy, ExtractiveLLM())
    try:
        with pytest.raises(Killed):
            Indexer(live).scan()  # every flush committed, then the pass's end placing dies
        assert ClusterService(live).owed_placing() == [ANDREW]
    finally:
        live.close()
    monkeypatch.setattr(ClusterService, "place_after_merges", placing)
    live = make_runtime(copy, ExtractiveLLM())
    try:
        Indexer(live).scan()  # nothing changed on disk: no sync places anyone
        assert cluster_tables(live) != as_reindexed(live, tmp_path / "before")

        ReflectEpisodes().recover(live)  # as serve's start-up

        assert cluster_tables(live) == as_reindexed(live, tmp_path / "rebuilt")
        assert ClusterService(live).owed_placing() == []
    finally:
        live.close()
