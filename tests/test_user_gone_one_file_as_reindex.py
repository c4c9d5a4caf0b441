"""A user's folder removed or renamed by hand while the watcher syncs one log at a time
(``sync_path`` per event) leaves the clusters a ``reindex`` of the same Markdown builds: once
the last of the old user's logs is dropped, no cluster of theirs is left (a member row no log
gave, the narrative a merge put into its cluster before its log was indexed, held it), and
the narrative that moved with the folder is attached in its new folder. The same when the
flush's one transaction fails and its changes are applied one by one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from everos_reflect.clustering.service import ClusterService
from everos_reflect.index.sync import Indexer
from everos_reflect.markdown import settling
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import journal
from tests.reflect_fixtures import ANDREW
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables
from tests.test_reflect_crash import crashed

pytestmark = pytest.mark.usefixtures("settle_at_once")


def _users(root: Path) -> Path:
    return root / "default_app" / "default_project" / "users"


def _logs(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.md"))


def _clusters_of(rt: Runtime, user_id: str) -> list[str]:
    return [r[0] for r in rt.db().execute(
        "SELECT cluster_id FROM clusters WHERE user_id=? ORDER BY cluster_id", (user_id,))]


@pytest.mark.parametrize("order", ["old logs first", "new logs first"])
@pytest.mark.parametrize("how", ["removed", "renamed"])
@pytest.mark.parametrize("step", [journal.DEPRECATED, journal.SYNCED])
def test_a_user_folder_gone_while_syncing_one_log_at_a_time_leaves_the_clusters_as_a_reindex(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str, how: str,
        order: str) -> None:
    rt, _ = crashed(root, monkeypatch, step)
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 0)  # moved long after the writes
    try:
        assert _clusters_of(rt, ANDREW.user_id)
        old = _logs(rt.store.user_dir(ANDREW))
        if how == "removed":
            shutil.rmtree(_users(root) / "u_andrew")
            new: list[Path] = []
        else:
            shutil.move(_users(root) / "u_andrew", _users(root) / "u_bob")
            new = _logs(_users(root) / "u_bob")
        indexer = Indexer(rt)
        for path in (old + new if order == "old logs first" else new + old):
            indexer.sync_path(path)

        assert _clusters_of(rt, ANDREW.user_id) == []
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "rebuilt")
    finally:
        rt.close()


def test_a_user_folder_removed_is_dropped_when_the_flush_is_applied_file_by_file(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt, _ = crashed(root, monkeypatch, journal.DEPRECATED)
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 0)
    removed = ClusterService.on_entries_removed
    calls: list[int] = []

    def fail_in_the_batch(self: ClusterService, *args: object) -> None:
        calls.append(1)
        if len(calls) == 1:  # the flush's one transaction fails: applied one by one
            raise RuntimeError("disk I/O error")
        removed(self, *args)

    monkeypatch.setattr(ClusterService, "on_entries_removed", fail_in_the_batch)
    try:
        old = _logs(rt.store.user_dir(ANDREW))
        shutil.rmtree(_users(root) / "u_andrew")
        Indexer(rt).sync_paths(old)

        assert len(calls) > 1
        assert _clusters_of(rt, ANDREW.user_id) == []
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "rebuilt")
    finally:
        rt.close()
