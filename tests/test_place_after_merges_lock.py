"""The end of a Reflection run places the merged users' Episodes as a rebuild does without
holding the index's write lock while it plans (a user with a long history held it for tens of
seconds: the watcher and another process's ``add`` waited), and an Episode synced while it
plans is placed, not dropped."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.clustering import service
from everos_reflect.clustering.service import ClusterService
from everos_reflect.index import db as dbmod
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from tests.reflect_fixtures import ANDREW, add_episode, make_runtime, run_reflection, seed_pets
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables

pytestmark = pytest.mark.usefixtures("settle_at_once")


def test_another_writer_is_not_held_while_the_placing_is_planned(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    wrote: list[str] = []
    assign = service._Rebuild.assign

    def assign_then_write(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not wrote:  # another process takes the write lock, not waiting at all
            other = sqlite3.connect(dbmod.db_path(root), timeout=0, isolation_level=None)
            try:
                other.execute("BEGIN IMMEDIATE")
                other.execute("ROLLBACK")
                wrote.append("took the lock")
            except sqlite3.OperationalError as exc:
                wrote.append(str(exc))
            finally:
                other.close()
        return assign(self, *args, **kwargs)

    try:
        add_episode(rt, ANDREW, "2026-08-01T10:00:00-07:00", "Andrew",
                    "Andrew read about adopting a dog.")  # placed by the rule, not attached
        seed_pets(rt)
        Indexer(rt).scan()
        monkeypatch.setattr(service._Rebuild, "assign", assign_then_write)
        assert run_reflection(rt)["merged"] == 1
        assert wrote == ["took the lock"]
    finally:
        rt.close()


def test_an_episode_synced_while_the_placing_is_planned_is_placed_as_a_reindex_places_it(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    added: list[str] = []
    plan_user = ClusterService._plan_user

    def plan_then_sync(self: ClusterService, *args: Any, **kwargs: Any) -> Any:
        planned = plan_user(self, *args, **kwargs)
        if not added:  # the watcher syncs an Episode of the user after the plan was made
            entry = add_episode(rt, ANDREW, "2026-10-20T09:00:00-07:00", "Andrew",
                                "Andrew adopted a second dog, a beagle named Scout.")
            Indexer(rt).sync_paths([rt.store.path_for_id(ANDREW, entry.id)])
            added.append(entry.id)
        return planned

    try:
        seed_pets(rt)
        Indexer(rt).scan()
        monkeypatch.setattr(ClusterService, "_plan_user", plan_then_sync)
        assert run_reflection(rt)["merged"] == 1

        [new] = added
        assert rt.db().execute("SELECT 1 FROM cluster_members WHERE entry_id=?",
                               (new,)).fetchone()
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "rebuilt")
    finally:
        rt.close()
