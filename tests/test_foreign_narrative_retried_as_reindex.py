"""A narrative found naming a cluster another user holds is attached once that cluster is gone,
whichever later flush removes it, as a ``reindex`` of the same Markdown attaches it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.markdown import settling
from tests.reflect_fixtures import ANDREW
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables, merged_root

pytestmark = pytest.mark.usefixtures("settle_at_once")


def test_a_narrative_moved_to_another_user_is_attached_when_a_later_flush_drops_the_old_log(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt, _, narrative = merged_root(root)
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 0)
    try:
        path = rt.store.path_for_id(ANDREW, narrative)
        bob = path.parent.parent.parent / "u_bob" / "episodes"
        bob.mkdir(parents=True)
        os.rename(path, bob / path.name)

        Indexer(rt).sync_paths([bob / path.name])  # the watcher's first event
        Indexer(rt).sync_paths([path])  # the old path's, in a later flush

        after = cluster_tables(rt)
        assert [(c[3], c[7]) for c in after["clusters"]] == [("u_bob", narrative)]
        assert after == as_reindexed(rt, tmp_path / "rebuilt")
    finally:
        rt.close()
