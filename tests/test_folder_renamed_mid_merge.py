"""A user's folder renamed by hand WHILE a merge of theirs is committed (not killed). The
commit went on writing under the old name, and the store made that folder again for a user
nobody has: renamed before the sources were archived, the merge was withdrawn as stale (its
sources "deleted"), a withdrawn narrative left in the new old folder, and the next run paid
the merge again; renamed at the archiving, a second narrative was written in the new old
folder, live, its sources elsewhere. Each write of a commit now asks whether the folder is
still there; gone, the merge is settled where its entries went, as after a kill."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.llm.extractive import ExtractiveLLM
from everos_reflect.markdown import settling
from everos_reflect.model import UserRef
from everos_reflect.strategies import journal
from tests.reflect_fixtures import make_runtime, reports, run_reflection, seed_pets
from tests.test_folder_copied_mid_merge import at_step
from tests.test_merge_recovery_user_moved import entries_of, live_narratives, users_folder

pytestmark = pytest.mark.usefixtures("settle_at_once")

BOB = UserRef.of("u_bob")


@pytest.mark.parametrize("step", [journal.PLANNED, journal.NARRATIVE, journal.FACTS,
                                  journal.ARCHIVING, journal.DEPRECATED, journal.SYNCED])
def test_a_folder_renamed_while_its_merge_is_committed_gets_the_merge_once(
        root: Path, monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    original = {e.id for e in seed_pets(rt)}
    Indexer(rt).scan()
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 0)
    at_step(monkeypatch, step, lambda: shutil.move(users_folder(root) / "u_andrew",
                                                   users_folder(root) / "u_bob"))
    first = run_reflection(rt)
    Indexer(rt).scan()  # the next start's
    again = run_reflection(rt, run_id="run_2")
    try:
        assert not (users_folder(root) / "u_andrew").exists(), "the old folder made again"
        entries = entries_of(rt, BOB)
        assert original <= set(entries)
        [live] = live_narratives(entries)
        assert {s: entries[s].deprecated_by for s in live.sources} == dict.fromkeys(
            live.sources, live.id)
        assert not [e.id for e in entries.values() if e.deprecated_by == e.id], "withdrawn"
        assert (first.get("merged", 0), again.get("merged", 0)) == (1, 0)  # paid once
        assert [(r["owner_id"], r["status"]) for r in reports(rt)] == [("u_bob", "ok")]
        assert rt.db().execute("SELECT COUNT(*) FROM merge_journal").fetchone()[0] == 0
    finally:
        rt.close()


@pytest.mark.parametrize("step", [journal.NARRATIVE, journal.ARCHIVING])
def test_a_folder_removed_while_its_merge_is_committed_is_not_made_again(
        root: Path, monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    seed_pets(rt)
    Indexer(rt).scan()
    at_step(monkeypatch, step, lambda: shutil.rmtree(users_folder(root) / "u_andrew"))
    run_reflection(rt)
    try:
        assert not (users_folder(root) / "u_andrew").exists(), "the folder made again"
        assert [r["status"] for r in reports(rt)] == ["abandoned"]
        assert rt.db().execute("SELECT COUNT(*) FROM merge_journal").fetchone()[0] == 0
    finally:
        rt.close()
