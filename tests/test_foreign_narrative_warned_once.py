"""A narrative's log copied by hand into another user's folder (the same entry id in two logs)
is reported once per sync: "names cluster … of another user; not attached" was logged again
by the retry before COMMIT, which found the cluster still held."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from tests.reflect_fixtures import ANDREW
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables, merged_root

pytestmark = pytest.mark.usefixtures("settle_at_once")


@pytest.mark.parametrize("synced", ["scan", "watcher"])
def test_a_narrative_copied_to_another_user_is_warned_about_once(
        root: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, synced: str) -> None:
    rt, _, narrative = merged_root(root)
    try:
        before = cluster_tables(rt)
        path = rt.store.path_for_id(ANDREW, narrative)
        bob = path.parent.parent.parent / "u_bob" / "episodes"
        bob.mkdir(parents=True)
        shutil.copy(path, bob / path.name)
        caplog.set_level(logging.WARNING, logger="everos_reflect.clustering.service")

        if synced == "scan":
            Indexer(rt).scan()
        else:
            Indexer(rt).sync_paths([bob / path.name])

        warned = [r.getMessage() for r in caplog.records if "another user" in r.getMessage()]
        assert warned == [f"narrative {narrative} names cluster {before['clusters'][0][0]} "
                          "of another user; not attached"]
        assert cluster_tables(rt) == before == as_reindexed(rt, tmp_path / "rebuilt")
    finally:
        rt.close()
