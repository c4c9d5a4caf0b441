"""A narrative's text edited by hand places its user's Episodes as a ``reindex`` places
them. A rebuild seeds the narrative's cluster with its vector before it places any Episode:
an Episode like the new text joins it, one like the old text only may not. The sync
re-attached the edited narrative where it was, and every Episode stayed where it had been
placed against the old text, until a ``recluster`` (found by ``bench/hand_edit_walk.py
--together 4 --files 2``, seed 49309: an entry's block pasted above itself, its Content
edited, its id not)."""

from __future__ import annotations

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
TAX = "Quarterly tax filing reminder for the accountant meeting on Friday."
RUN = "Bob trains for the city marathon, running long miles on Sundays."
DOGS = "Bob adopted a dog named Toby, then Buddy; he walks both dogs."


def edit_content(rt: Runtime, entry_id: str, old: str, new: str) -> Path:
    path = rt.store.path_for_id(BOB, entry_id)
    text = path.read_text()
    assert text.count(old) == 1
    path.write_text(text.replace(old, new))
    return path


def member_of(rt: Runtime, entry_id: str) -> str:
    return rt.db().execute("SELECT cluster_id FROM cluster_members WHERE entry_id=?",
                           (entry_id,)).fetchone()[0]


@pytest.mark.parametrize("beside", [False, True])
def test_a_narrative_edited_like_an_episode_draws_it_as_a_reindex(
        root: Path, tmp_path: Path, beside: bool) -> None:
    """``beside``: the cluster holds an Episode like the old text too (a rebuild places it
    after the seed, against the new text)."""
    rt = make_runtime(root, ExtractiveLLM())
    try:
        narrative = add_episode(rt, BOB, "2026-08-02T09:00:00+00:00", "Tax filing", TAX,
                                parent_type="cluster", parent_id=CID)
        if beside:
            add_episode(rt, BOB, "2026-08-02T10:00:00+00:00", "Tax filing",
                        "The quarterly tax filing was sent after the accountant meeting.")
        runner = add_episode(rt, BOB, "2026-08-02T11:00:00+00:00", "Marathon", RUN)
        add_episode(rt, BOB, "2026-08-04T11:00:00+00:00", "Bob's dogs", DOGS)
        Indexer(rt).scan()
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "before")
        assert member_of(rt, runner.id) != CID

        Indexer(rt).sync_path(edit_content(rt, narrative.id, TAX, RUN))

        assert member_of(rt, runner.id) == CID
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "after")
    finally:
        rt.close()


def test_a_narrative_edited_like_no_episode_leaves_the_clusters_as_a_reindex(
        root: Path, tmp_path: Path) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    try:
        narrative = add_episode(rt, BOB, "2026-08-02T09:00:00+00:00", "Tax filing", TAX,
                                parent_type="cluster", parent_id=CID)
        add_episode(rt, BOB, "2026-08-02T11:00:00+00:00", "Marathon", RUN)
        Indexer(rt).scan()

        Indexer(rt).sync_path(edit_content(rt, narrative.id, TAX, DOGS))

        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "after")
    finally:
        rt.close()
