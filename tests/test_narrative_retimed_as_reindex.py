"""The newest live narrative of a cluster consolidates it, as a rebuild seeds the cluster with
it, after a narrative's timestamp is moved by hand. The consolidating narrative moved before
another narrative of its cluster went on consolidating it (re-attached, it was kept because it
was the one), where a ``reindex`` has the other (found by ``bench/hand_edit_walk.py
--together 4 --files 2``, seed 49744)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.model import UserRef
from everos_reflect.runtime import Runtime
from tests.reflect_fixtures import add_episode, make_runtime
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables

pytestmark = pytest.mark.usefixtures("settle_at_once")

BOB = UserRef.of("u_bob")
CID = "cl_0123456789ab"


def retime(rt: Runtime, entry_id: str, stamp: str) -> Path:
    path = rt.store.path_for_id(BOB, entry_id)
    text = path.read_text()
    block = re.search(rf"<!-- entry:{entry_id} -->.*?<!-- /entry:{entry_id} -->", text,
                      flags=re.S)
    assert block is not None
    moved = re.sub(r"^timestamp: \S+$", f"timestamp: {stamp}", block.group(0), count=1,
                   flags=re.M)
    path.write_text(text.replace(block.group(0), moved))
    return path


def consolidating(rt: Runtime) -> str:
    return rt.db().execute("SELECT consolidated_entry_id FROM clusters WHERE cluster_id=?",
                           (CID,)).fetchone()[0]


@pytest.mark.parametrize("which", ["the newer moved before", "the older moved after"])
def test_the_newest_narrative_consolidates_after_a_retime_as_a_reindex(
        root: Path, tmp_path: Path, which: str) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    try:
        older, newer = [add_episode(rt, BOB, f"2026-08-0{d}T10:00:00+00:00", "Bob's dogs",
                                    f"Bob adopted a dog named Toby, walk {d}.",
                                    parent_type="cluster", parent_id=CID) for d in (2, 4)]
        add_episode(rt, BOB, "2026-08-05T10:00:00+00:00", "Bob's dogs",
                    "Bob adopted a dog named Toby, walk 5.")
        Indexer(rt).scan()
        assert consolidating(rt) == newer.id

        if which == "the newer moved before":
            Indexer(rt).sync_path(retime(rt, newer.id, "2026-08-01T10:00:00+00:00"))
        else:
            Indexer(rt).sync_path(retime(rt, older.id, "2026-08-04T11:00:00+00:00"))

        assert consolidating(rt) == older.id
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "after")
    finally:
        rt.close()
