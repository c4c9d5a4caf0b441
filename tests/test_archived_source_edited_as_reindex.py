"""A source a narrative archived, edited by hand afterwards (a typo fixed in an old log): its
history row in ``cluster_members`` carries the text hash a ``reindex`` reads from the log.

It kept the hash of the text it was merged with, so the live tables differed from a rebuild's
until a ``recluster`` (found by a random walk of hand edits compared with a ``reindex`` after
each step)."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from tests.reflect_fixtures import ANDREW
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables, merged_root

pytestmark = pytest.mark.usefixtures("settle_at_once")


def test_an_archived_source_edited_by_hand_keeps_the_hash_a_reindex_reads(
        root: Path, tmp_path: Path) -> None:
    rt, sources, narrative = merged_root(root)
    try:
        source = sources[0]
        path = rt.store.path_for_id(ANDREW, source.id)
        text = path.read_text()
        assert source.content in text
        path.write_text(text.replace(source.content, source.content + " (typo fixed)", 1))
        Indexer(rt).sync_path(path)

        [(hash_now, by)] = rt.db().execute(
            "SELECT text_hash, deprecated_by FROM cluster_members WHERE entry_id=?",
            (source.id,)).fetchall()
        assert by == narrative  # still history of the narrative's cluster
        assert hash_now != source.text_hash
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "rebuilt")
    finally:
        rt.close()
