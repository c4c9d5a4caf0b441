"""Undo of a merge whose narrative's log a person replaced by hand with a file holding an
Episode of their own under the narrative's id.

The merge's sources stayed archived toward that id, so they were hidden behind an entry that
is not the merge's (a person's Episode), for good: ``undo`` refused it as "not a merged
narrative", and no other command removes an archive key (SPEC §3). The undo now restores the
merge's own entries (its audit row says which), leaves the person's Episode as it is, live,
and says so."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli import demo_cmds
from everos_reflect.cli.main import cli
from everos_reflect.errors import UndoRefused
from everos_reflect.index.search import search
from everos_reflect.index.sync import Indexer
from everos_reflect.llm.extractive import ExtractiveLLM
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import journal
from everos_reflect.strategies.undo import undo_merge
from tests.reflect_fixtures import (
    ANDREW,
    all_entries,
    check_invariants,
    crash_run_at,
    make_runtime,
    replace_log_with_own_episode,
    reports,
    run_reflection,
    seed_pets,
)

#: logs replaced by the test itself, no other writer (conftest.py)
pytestmark = pytest.mark.usefixtures("settle_at_once")


def replaced(root: Path, *, draft: bool = False) -> tuple[Runtime, str, list[str]]:
    """Andrew's pets merged, then the narrative's log replaced by one holding his own
    Episode under the narrative's id (``draft``: and a draft of it, ``…_0009``, archived
    toward it by hand). The runtime, the id and the sources' ids."""
    rt = make_runtime(root, ExtractiveLLM())
    sources = [e.id for e in seed_pets(rt)]
    run_reflection(rt)
    [row] = reports(rt)
    narrative = row["merged_entry_id"]
    replace_log_with_own_episode(rt, narrative,
                                 draft=f"{narrative[:-4]}0009" if draft else None)
    Indexer(rt).scan()
    return rt, narrative, sources


def test_undo_restores_the_merges_sources_and_leaves_the_persons_episode_live(
        root: Path) -> None:
    rt, narrative, sources = replaced(root)
    mine = rt.store.get(ANDREW, narrative)

    result = undo_merge(rt, ANDREW, narrative)

    assert result.restored == sources and result.archived == [] and result.replaced_by_hand
    entries = check_invariants(rt)
    assert all(entries[s].deprecated_by is None for s in sources)
    assert entries[narrative].deprecated_by is None
    assert entries[narrative].content == mine.content
    assert [r["status"] for r in reports(rt)] == ["undone"]
    hits = {h.id for h in search(rt, "Buddy", user_id=ANDREW.user_id, top_k=10,
                                 mode="keyword")}
    assert sources[2] in hits
    with pytest.raises(UndoRefused, match="not a merged narrative"):
        undo_merge(rt, ANDREW, narrative)  # done: what stands there now is the person's


def test_a_key_the_person_wrote_toward_their_own_episode_stays(root: Path) -> None:
    rt, narrative, sources = replaced(root, draft=True)
    draft = f"{narrative[:-4]}0009"

    result = undo_merge(rt, ANDREW, narrative)

    assert result.restored == sources
    entries = all_entries(rt)
    assert entries[draft].deprecated_by == narrative  # the person's own archive mark


def test_cli_undo_says_the_entry_under_the_id_is_left_as_it_is(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt, narrative, _ = replaced(root)
    monkeypatch.setattr(demo_cmds, "open_runtime", lambda root: rt)
    result = CliRunner().invoke(cli, ["undo", narrative, "--user", "u_andrew",
                                      "--root", str(root)])
    assert result.exit_code == 0, result.output
    assert (f"  archived no narrative and 4 atomic facts (deprecated_by: undone) ({narrative} "
            "holds an entry written by hand now, not the merge's narrative: left as it is)"
            ) in result.stdout.splitlines()


@pytest.mark.parametrize("step", [journal.DEPRECATED, journal.SYNCED])
def test_a_merge_killed_after_its_commit_then_its_log_replaced_is_undone_whole(
        root: Path, monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    # The next start settles it as a merge whose narrative a person removed ("undo … brings
    # back the sources archived toward it"); that undo refused "not a merged narrative".
    rt = make_runtime(root, ExtractiveLLM())
    sources = [e.id for e in seed_pets(rt)]
    crash_run_at(monkeypatch, rt, step)
    [narrative] = [i for i, e in all_entries(rt).items() if e.parent_type == "cluster"]
    replace_log_with_own_episode(rt, narrative)
    rt = make_runtime(root, ExtractiveLLM())
    run_reflection(rt)
    [row] = reports(rt)
    assert (row["status"], row["merged_entry_id"]) == ("ok", narrative)
    assert "log replaced" in row["error"]

    result = undo_merge(rt, ANDREW, narrative)

    assert result.restored == sources and result.replaced_by_hand
    entries = check_invariants(rt)
    assert entries[narrative].parent_type == "memcell" and entries[narrative].deprecated_by is None
    assert [r["status"] for r in reports(rt)] == ["undone"]
