"""The cluster tables a sync leaves equal those a ``reindex`` of the same Markdown builds,
archived members (history) included.

A narrative's archived sources are history of its cluster. Synced before the narrative (the
first scan of a copied root, a narrative's log broken by hand and then fixed), they were in
no cluster live while a rebuild listed them; archived by hand toward an entry in no
consolidated cluster, or toward no entry at all, they stayed listed live while a rebuild had
no row of them.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.markdown import settling
from everos_reflect.model import Entry, Kind, UserRef
from everos_reflect.runtime import Runtime
from tests.reflect_fixtures import ANDREW, add_episode, make_runtime, run_reflection, seed_pets

pytestmark = pytest.mark.usefixtures("settle_at_once")


def cluster_tables(rt: Runtime) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of ``clusters`` and ``cluster_members`` but the times of writing and the
    keys (creation order); centroids to 1e-6."""
    conn = rt.db()
    clusters = [(r["cluster_id"], r["app_id"], r["project_id"], r["user_id"],
                 r["member_count"], r["first_ts"], r["last_ts"], r["consolidated_entry_id"],
                 r["consolidated_at"], round(r["centroid_norm"], 6),
                 tuple(np.round(np.frombuffer(r["centroid"], dtype="<f4"), 6)))
                for r in conn.execute("SELECT * FROM clusters ORDER BY cluster_id")]
    members = [(r["app_id"], r["project_id"], r["user_id"], r["entry_id"], r["cluster_id"],
                r["ts"], r["similarity"], r["deprecated_by"], r["text_hash"])
               for r in conn.execute("SELECT * FROM cluster_members ORDER BY app_id, "
                                     "project_id, user_id, entry_id")]
    return {"clusters": clusters, "members": members}


def as_reindexed(rt: Runtime, copy: Path) -> dict[str, list[tuple[Any, ...]]]:
    """The cluster tables of a ``reindex`` of a copy of ``rt``'s Markdown."""
    shutil.copytree(rt.root, copy, ignore=shutil.ignore_patterns(".index"))
    fresh = make_runtime(copy, ExtractiveLLM())
    try:
        Indexer(fresh).reindex()
        return cluster_tables(fresh)
    finally:
        fresh.close()


def merged_root(root: Path) -> tuple[Runtime, list[Entry], str]:
    """Andrew's three pet Episodes merged into one narrative: the runtime, the sources and the
    narrative's id."""
    rt = make_runtime(root, ExtractiveLLM())
    sources = seed_pets(rt)
    Indexer(rt).scan()
    assert run_reflection(rt)["merged"] == 1
    [narrative] = [e for e in rt.store.entries(ANDREW, Kind.EPISODE)
                   if e.parent_type == "cluster"]
    return rt, sources, narrative.id


@contextmanager
def hand_edited_merge(root: Path, monkeypatch: pytest.MonkeyPatch
                      ) -> Iterator[tuple[Runtime, str]]:
    """:func:`merged_root`'s runtime and narrative id, each log taken as standing still at
    once (a hand edit is synced without its settle wait); the runtime closed after."""
    rt, _, narrative = merged_root(root)
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 0)
    try:
        yield rt, narrative
    finally:
        rt.close()


def narrative_cluster(rt: Runtime, narrative: str) -> str:
    """The id of the cluster ``narrative`` consolidates."""
    [cid] = [r[0] for r in rt.db().execute(
        "SELECT cluster_id FROM clusters WHERE consolidated_entry_id=?", (narrative,))]
    return cid


def cut_by_hand(rt: Runtime, ref: UserRef, entry_id: str) -> Path:
    """Cut ``entry_id``'s block out of ``ref``'s log, as a person would; the log's path."""
    path = rt.store.path_for_id(ref, entry_id)
    block = rf"<!-- entry:{entry_id} -->.*?<!-- /entry:{entry_id} -->\n"
    path.write_text(re.sub(block, "", path.read_text(), flags=re.S))
    return path


def history(rt: Runtime) -> set[tuple[str, str]]:
    return {(r[0], r[1]) for r in rt.db().execute(
        "SELECT entry_id, deprecated_by FROM cluster_members WHERE deprecated_by IS NOT NULL")}


def test_the_first_scan_of_a_copied_merged_root_lists_the_sources_as_a_reindex_does(
        root: Path, tmp_path: Path) -> None:
    rt, sources, narrative = merged_root(root)
    rt.close()
    copy = tmp_path / "copy"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".index"))
    live = make_runtime(copy, ExtractiveLLM())
    try:
        Indexer(live).scan()  # the sources' logs sort before the narrative's

        assert history(live) == {(e.id, narrative) for e in sources}
        assert cluster_tables(live) == as_reindexed(live, tmp_path / "rebuilt")
    finally:
        live.close()


def test_a_narrative_s_log_broken_by_hand_and_fixed_leaves_the_clusters_as_a_reindex(
        root: Path, tmp_path: Path) -> None:
    rt, sources, narrative = merged_root(root)
    try:
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "merged")
        path = rt.store.path_for_id(ANDREW, narrative)
        good = path.read_text()
        path.write_text(good.replace("type: episode_daily", "type: [episode_daily", 1))
        Indexer(rt).sync_path(path)

        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "broken")

        path.write_text(good)
        Indexer(rt).sync_path(path)

        assert history(rt) == {(e.id, narrative) for e in sources}
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "fixed")
    finally:
        rt.close()


def _archive_by_hand(rt: Runtime, entry: Entry, toward: str) -> Path:
    """``deprecated_entries: {entry: toward}`` written into the frontmatter of its log."""
    path = rt.store.path_for_id(ANDREW, entry.id)
    text = path.read_text()
    path.write_text(text.replace("---\n", f"---\ndeprecated_entries: {{{entry.id}: {toward}}}\n",
                                 1))
    return path


@pytest.mark.parametrize("toward", ["no entry", "a live Episode", "the narrative"])
def test_an_episode_archived_by_hand_is_listed_where_a_reindex_lists_it(
        root: Path, tmp_path: Path, toward: str) -> None:
    rt, _, narrative = merged_root(root)
    try:
        chess = [add_episode(rt, ANDREW, f"2026-11-0{d}T10:00:00+00:00", "Andrew plays chess",
                             f"Andrew played chess with Sam at the club, game {d}.")
                 for d in (1, 2)]
        Indexer(rt).scan()
        # the second, not the first: a cluster keeps the id of the Episode that founded it
        target = {"no entry": "ep_20261102_0099", "a live Episode": chess[0].id,
                  "the narrative": narrative}[toward]
        Indexer(rt).sync_path(_archive_by_hand(rt, chess[1], target))

        expected = {"no entry": set(), "a live Episode": set(),
                    "the narrative": {(chess[1].id, narrative)}}[toward]
        assert {h for h in history(rt) if h[0] == chess[1].id} == expected
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "archived")
    finally:
        rt.close()


def test_a_merge_in_place_leaves_the_clusters_as_a_reindex(root: Path, tmp_path: Path) -> None:
    rt, sources, narrative = merged_root(root)
    try:
        assert history(rt) == {(e.id, narrative) for e in sources}
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "rebuilt")
    finally:
        rt.close()

