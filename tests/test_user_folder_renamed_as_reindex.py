"""A user's folder renamed by hand (``mv users/u_andrew users/u_andy``) leaves the clusters as a
``reindex`` of the same Markdown: the narrative's cluster is the new user's.

Cluster ids hash the user in, and a narrative's ``parent_id`` names its cluster: the scan
synced the new user's logs before it dropped the old user's, so the narrative found its
cluster held by another user and was attached nowhere (nor its sources listed as history),
for good, where a rebuild (the old user gone) attaches it."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.markdown import settling
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables, merged_root

pytestmark = pytest.mark.usefixtures("settle_at_once")


@pytest.mark.parametrize("moved", ["users/u_andrew", "default_project"])
def test_a_renamed_user_folder_leaves_the_clusters_as_a_reindex(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moved: str) -> None:
    rt, sources, narrative = merged_root(root)
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 0)  # renamed long after the writes
    try:
        before = cluster_tables(rt)
        folder = rt.root / "default_app" / "default_project"
        if moved == "default_project":
            os.rename(folder, folder.parent / "other_project")
        else:
            os.rename(folder / moved, folder / "users" / "u_andy")

        Indexer(rt).scan()

        after = cluster_tables(rt)
        assert len(after["clusters"]) == len(before["clusters"]) == 1
        assert {m[3] for m in after["members"]} == {narrative, *(e.id for e in sources)}
        assert after == as_reindexed(rt, tmp_path / "rebuilt")
    finally:
        rt.close()


@pytest.mark.parametrize("then", ["nothing", "a log touched", "the old folder made again"])
def test_a_user_folder_renamed_and_touched_within_the_settle_window_leaves_a_reindex(
        root: Path, tmp_path: Path, then: str) -> None:
    """Within :data:`settling.JUST_WRITTEN_NS` of the rename the moved logs wait to stand
    still, and the old user's logs are dropped by a later flush (or scan, the old folder made
    again): the narrative's cluster was still the old user's when the new user's log was
    synced, and it was attached nowhere, for good."""
    rt, sources, narrative = merged_root(root)
    try:
        users = rt.root / "default_app" / "default_project" / "users"
        written = time.time() - 60  # the logs were written long ago; the rename is now
        for path in [users, *users.rglob("*")]:
            os.utime(path, (written, written))
        os.rename(users / "u_andrew", users / "u_andy")
        if then == "a log touched":
            os.utime(next((users / "u_andy" / "episodes").glob("*.md")))
        elif then == "the old folder made again":
            (users / "u_andrew").mkdir()

        Indexer(rt).scan()

        after = cluster_tables(rt)
        assert {m[3] for m in after["members"]} == {narrative, *(e.id for e in sources)}
        assert after == as_reindexed(rt, tmp_path / "rebuilt")
    finally:
        rt.close()
