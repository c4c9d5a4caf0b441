"""A cluster founded while a narrative's cluster held its first member's own id (the
narrative's ``parent_id`` names it) takes that id once the narrative goes, as a ``reindex``
of the same Markdown names it; what Reflection set aside under its id goes with it.

It kept the next free id for good, where a rebuild, without the narrative, names it after
its first member; renamed, its set-aside row (the changes cursor keyed by cluster id) stayed
under the old id: the merge the server had refused for good was sent, and refused, again."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.clustering.online import cluster_id_for
from everos_reflect.errors import ProviderUnavailable
from everos_reflect.index.sync import Indexer
from everos_reflect.llm.base import ScriptedLLM
from everos_reflect.markdown import settling
from everos_reflect.model import Entry
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.setaside import set_aside_clusters
from tests.reflect_fixtures import ANDREW, add_episode, make_runtime, run_reflection
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables

pytestmark = pytest.mark.usefixtures("settle_at_once")


def refused() -> ProviderUnavailable:
    exc = ProviderUnavailable("HTTP 413: request too large for the model")
    exc.permanent = True
    return exc


def seed(rt: Runtime) -> tuple[Entry, Entry]:
    """Two tax Episodes, and a narrative about dogs written by hand naming the cluster id of
    the first tax Episode: its own id is held when the tax Episodes are clustered."""
    tax = add_episode(rt, ANDREW, "2026-08-05T10:00:00+00:00", "Quarterly tax filing",
                      "Quarterly tax filing reminder for the accountant meeting.")
    add_episode(rt, ANDREW, "2026-08-06T10:00:00+00:00", "Quarterly tax filing done",
                "Quarterly tax filing sent after the accountant meeting.")
    narrative = add_episode(
        rt, ANDREW, "2026-08-01T10:00:00+00:00", "Andrew's dogs",
        "Andrew adopted Toby and Buddy, two dogs.", parent_type="cluster",
        parent_id=cluster_id_for(ANDREW.app, ANDREW.project, ANDREW.user_id, tax.id))
    Indexer(rt).scan()
    return tax, narrative


def test_a_cluster_takes_its_founder_s_id_once_the_narrative_holding_it_is_deleted(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = make_runtime(root, ScriptedLLM())
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 0)
    try:
        tax, narrative = seed(rt)
        own = cluster_id_for(ANDREW.app, ANDREW.project, ANDREW.user_id, tax.id)
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "before")

        path = rt.store.path_for_id(ANDREW, narrative.id)
        path.unlink()
        Indexer(rt).sync_path(path)

        after = cluster_tables(rt)
        assert [(c[0], c[4]) for c in after["clusters"]] == [(own, 2)]
        assert after == as_reindexed(rt, tmp_path / "after")
    finally:
        rt.close()


def test_a_set_aside_cluster_renamed_stays_set_aside_with_the_server_s_answer(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    llm = ScriptedLLM([refused()])
    rt = make_runtime(root, llm)
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 0)
    try:
        tax, narrative = seed(rt)
        assert run_reflection(rt)["set_aside"] == 1
        [before] = set_aside_clusters(rt)
        path = rt.store.path_for_id(ANDREW, narrative.id)
        path.unlink()
        Indexer(rt).sync_path(path)

        [after] = set_aside_clusters(rt)
        assert after.cluster_id == cluster_id_for(ANDREW.app, ANDREW.project, ANDREW.user_id,
                                                  tax.id) != before.cluster_id
        assert (after.members, after.reason, after.since) == (
            before.members, "HTTP 413: request too large for the model", before.since)
        run_reflection(rt, "run_again")  # not sent again: a merge call would fail the run
        assert len(llm.merge_requests) == 1
    finally:
        rt.close()
