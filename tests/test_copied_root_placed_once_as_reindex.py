"""The first scan of a copied merged root founds each cluster its narratives name, flush
after flush; a rebuild seeds those before placing any Episode, so a user whose narrative's
cluster draws an Episode is placed again (``place_after_merges``). That was done after each
flush that founded one: O(history) per flush of 256 entries. It is done once, after the
scan's last flush (``events.one_pass``), and leaves the clusters a ``reindex`` builds."""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.clustering.service import ClusterService
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.model import Kind, UserRef
from tests.reflect_fixtures import (
    ANDREW,
    add_episode,
    make_runtime,
    merge_on,
    run_reflection,
    seed_pets,
)
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables

pytestmark = pytest.mark.usefixtures("settle_at_once")

CHESS = [(f"2026-10-0{d}T10:00:00+00:00", "Andrew plays chess",
          f"Andrew played chess with Sam at the club on Sunday, game {d}.") for d in (1, 2, 3)]


def copied_merged_root(root: Path, copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two merges of Andrew's, each narrative in a log of its own, then two Episodes written
    after the merges and dated before their narratives' logs (a rebuild seeds each
    narrative's cluster first, and the Episode joins it); ``root`` copied to ``copy``
    without its index."""
    rt = make_runtime(root, ExtractiveLLM())
    try:
        seed_pets(rt)
        Indexer(rt).scan()
        merge_on(monkeypatch, date(2026, 9, 20))
        assert run_reflection(rt, "run_pets")["merged"] == 1
        for ts, subject, content in CHESS:
            add_episode(rt, ANDREW, ts, subject, content)
        Indexer(rt).scan()
        merge_on(monkeypatch, date(2026, 10, 4))  # the second narrative in a log of its own
        assert run_reflection(rt, "run_chess")["merged"] == 1
        add_episode(rt, ANDREW, "2026-09-10T10:00:00+00:00", "Andrew's dogs",
                    "Andrew walks his two dogs, Toby and Buddy, every morning.")
        add_episode(rt, ANDREW, "2026-10-03T18:00:00+00:00", "Andrew plays chess",
                    "Andrew played chess with Sam at the club on Sunday, game 4.")
        Indexer(rt).scan()
        assert len([e for e in rt.store.entries(ANDREW, Kind.EPISODE)
                    if e.parent_type == "cluster"]) == 2
    finally:
        rt.close()
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".index"))


def test_a_copied_root_s_first_scan_places_each_user_once_as_a_reindex(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "copy"
    copied_merged_root(root, copy, monkeypatch)

    placed: list[list[UserRef]] = []
    original = ClusterService.place_after_merges

    def counted(self: ClusterService, refs: Any) -> None:
        placed.append(sorted(set(refs)))
        original(self, refs)

    monkeypatch.setattr(ClusterService, "place_after_merges", counted)
    monkeypatch.setattr(Indexer, "flush_entries", 1)  # a flush per log
    live = make_runtime(copy, ExtractiveLLM())
    try:
        Indexer(live).scan()

        assert placed == [[ANDREW]]
        assert cluster_tables(live) == as_reindexed(live, tmp_path / "rebuilt")
    finally:
        live.close()
