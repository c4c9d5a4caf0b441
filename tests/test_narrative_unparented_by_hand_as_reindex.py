"""A narrative made a plain Episode by hand (its ``parent_type``/``parent_id`` lines taken
out) is placed by the rule, as a ``reindex`` places it. Its text and time unchanged, the sync
read it as an unchanged member: it went on consolidating its cluster (history and all),
where a rebuild has no narrative there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.model import UserRef
from everos_reflect.runtime import Runtime
from tests.reflect_fixtures import ANDREW, add_episode, make_runtime
from tests.test_cluster_history_as_reindex import (
    as_reindexed,
    cluster_tables,
    hand_edited_merge,
    history,
)

pytestmark = pytest.mark.usefixtures("settle_at_once")

BOB = UserRef.of("u_bob")


def unparent(rt: Runtime, ref: UserRef, entry_id: str) -> Path:
    """Take the ``parent_type``/``parent_id`` lines out of ``entry_id``'s block."""
    path = rt.store.path_for_id(ref, entry_id)
    text = path.read_text()
    block = re.search(rf"<!-- entry:{entry_id} -->.*?<!-- /entry:{entry_id} -->", text,
                      flags=re.S)
    assert block is not None
    plain = re.sub(r"parent_type: cluster\n(parent_id: [^\n]*\n)?", "", block.group(0))
    path.write_text(text.replace(block.group(0), plain))
    return path


@pytest.mark.parametrize("parent", ["my notes", "cl_0123456789ab"])
def test_a_hand_written_narrative_made_plain_is_placed_as_a_reindex(
        root: Path, tmp_path: Path, parent: str) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    try:
        mine = add_episode(rt, BOB, "2026-08-01T10:00:00+00:00", "Bob's dogs",
                           "Bob adopted a dog named Toby.", parent_type="cluster",
                           parent_id=parent)
        Indexer(rt).scan()

        Indexer(rt).sync_path(unparent(rt, BOB, mine.id))

        assert [r[0] for r in rt.db().execute(
            "SELECT consolidated_entry_id FROM clusters")] == [None]
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "plain")
    finally:
        rt.close()


def test_a_merge_s_narrative_made_plain_leaves_no_history_as_a_reindex(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with hand_edited_merge(root, monkeypatch) as (rt, narrative):
        assert history(rt)

        Indexer(rt).sync_path(unparent(rt, ANDREW, narrative))

        assert history(rt) == set()
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "plain")


@pytest.mark.parametrize("which", ["the older", "the newer"])
def test_one_of_two_narratives_made_plain_is_placed_as_a_reindex(
        root: Path, tmp_path: Path, which: str) -> None:
    """Two narratives name one cluster: the newer consolidates it, the older is a member with
    no similarity. The older made plain stayed so, where a rebuild places it by the rule (it
    joins with a similarity); the newer made plain hands the cluster to the older."""
    rt = make_runtime(root, ExtractiveLLM())
    try:
        mine = [add_episode(rt, BOB, f"2026-08-0{d}T10:00:00+00:00", "Bob's dogs",
                            f"Bob adopted a dog named Toby, walk {d}.", parent_type="cluster",
                            parent_id="cl_0123456789ab") for d in (1, 2)]
        add_episode(rt, BOB, "2026-08-05T10:00:00+00:00", "Bob's dogs",
                    "Bob adopted a dog named Toby, walk 5.")
        Indexer(rt).scan()
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "two")

        Indexer(rt).sync_path(unparent(rt, BOB, mine[which == "the newer"].id))

        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "plain")
    finally:
        rt.close()
