"""After a Reflection run the live clusters equal those a ``reindex`` of the same Markdown
builds: an Episode placed before the merge in another cluster joins the narrative's.

A rebuild seeds the narrative's cluster with the narrative's vector before it places any
Episode; the narrative stands for its sources, and "Andrew has no pets" sits near it while it
sat apart from the first source alone. Online, the merge re-placed nobody: the Episode stayed
in its cluster of one until a ``recluster``, and the next run did not fold it in."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.strategies import journal
from everos_reflect.strategies.reflect import ReflectEpisodes
from tests.reflect_fixtures import ANDREW, add_episode, make_runtime, run_reflection, seed_pets
from tests.test_cluster_history_as_reindex import as_reindexed, cluster_tables

pytestmark = pytest.mark.usefixtures("settle_at_once")


def test_an_episode_of_another_cluster_joins_the_narrative_s_as_a_reindex_places_it(
        root: Path, tmp_path: Path) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    try:
        add_episode(rt, ANDREW, "2026-08-01T10:00:00-07:00", "Andrew",
                    "Andrew read about adopting a dog.")
        no_pets = seed_pets(rt)[0].id
        Indexer(rt).scan()
        alone = {r[0] for r in rt.db().execute(
            "SELECT cluster_id FROM cluster_members WHERE entry_id=?", (no_pets,))}
        assert run_reflection(rt)["merged"] == 1

        cluster_of = {r[0]: r[1] for r in rt.db().execute(
            "SELECT entry_id, cluster_id FROM cluster_members WHERE deprecated_by IS NULL")}
        [narrative] = [c for c, in rt.db().execute(
            "SELECT cluster_id FROM clusters WHERE consolidated_entry_id IS NOT NULL")]
        assert cluster_of[no_pets] == narrative and narrative not in alone
        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "rebuilt")
    finally:
        rt.close()


def test_a_merge_recovered_after_a_crash_places_the_episodes_as_a_reindex(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The merge finished by the next run's recovery (which may merge nothing of the user's):
    the Episodes are placed at recovery as at the end of a run."""

    class Crash(BaseException):
        """The process dies here."""

    def crash_at(reached: str) -> None:
        if reached == journal.SYNCED:
            raise Crash(reached)

    rt = make_runtime(root, ExtractiveLLM())
    try:
        add_episode(rt, ANDREW, "2026-08-01T10:00:00-07:00", "Andrew",
                    "Andrew read about adopting a dog.")
        seed_pets(rt)
        Indexer(rt).scan()
        monkeypatch.setattr(journal, "checkpoint", crash_at)
        with pytest.raises(Crash):
            run_reflection(rt)
    finally:
        rt.close()
    monkeypatch.setattr(journal, "checkpoint", lambda reached: None)
    rt = make_runtime(root, ExtractiveLLM())
    try:
        assert ReflectEpisodes().recover(rt) == {"recovered_ok": 1}

        assert cluster_tables(rt) == as_reindexed(rt, tmp_path / "rebuilt")
    finally:
        rt.close()
