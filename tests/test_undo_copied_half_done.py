"""An undo of an *update* merge killed once it restored its sources, then the user's folder
copied by hand into another user's before the next start. The start finished the undo in the
first folder only: the copy kept the update's narrative live beside the two entries it had
merged (the previous narrative and one new Episode), for good, as no run selects that cluster
of one Episode to fold it in. The copy now gets what the first folder gets: the undo finished
there too. A copy made before the undo began is a whole merge, and stays one. And the start
that finishes an undo warns when the narrative it archives held a person's edits."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.llm.extractive import ExtractiveLLM
from everos_reflect.markdown.parser import UNDONE
from everos_reflect.model import Entry, Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.undo import undo_merge
from tests.reflect_fixtures import (
    ANDREW,
    add_episode,
    check_invariants,
    make_runtime,
    reports,
    run_reflection,
    seed_pets,
)

pytestmark = pytest.mark.usefixtures("settle_at_once")

BOB = UserRef.of("u_bob")


def update_merged(root: Path) -> tuple[Runtime, Entry, Entry, Entry]:
    """Andrew's pets merged, then a fourth pet Episode folded in by an update merge: the
    runtime, the first narrative, the fourth Episode and the update's narrative."""
    rt = make_runtime(root, ExtractiveLLM())
    seed_pets(rt)
    Indexer(rt).scan()
    assert run_reflection(rt)["merged"] == 1
    fourth = add_episode(rt, ANDREW, "2026-09-09T10:00:00-07:00", "Andrew adopted a third dog",
                         "Andrew adopted a third dog named Rex. Andrew now has three dogs, "
                         "Toby, Buddy and Rex.")
    Indexer(rt).scan()
    assert run_reflection(rt, run_id="run_2")["merged"] == 1
    [update] = [e for e in rt.store.entries(ANDREW, Kind.EPISODE)
                if e.parent_type == "cluster" and e.deprecated_by is None]
    [first] = [i for i in update.sources if i != fourth.id]
    return rt, rt.store.get(ANDREW, first), fourth, update


def kill_undo_after_restoring(rt: Runtime, monkeypatch: pytest.MonkeyPatch,
                              narrative: Entry) -> None:
    real = rt.store.deprecate

    def killed(*args: object, **kwargs: object) -> None:
        raise OSError("killed")

    monkeypatch.setattr(rt.store, "deprecate", killed)
    with pytest.raises(OSError):
        undo_merge(rt, ANDREW, narrative.id)
    monkeypatch.setattr(rt.store, "deprecate", real)


def copy_to_bob(rt: Runtime) -> None:
    users = rt.root / "default_app" / "default_project" / "users"
    shutil.copytree(users / "u_andrew", users / "u_bob")
    for log in (users / "u_bob").rglob("*.md"):  # the copy made Bob's
        log.write_text(log.read_text().replace("u_andrew", "u_bob"))


def restarted(rt: Runtime, root: Path) -> Runtime:
    """The process dies; the next start recovers, then runs Reflection."""
    rt.close()
    rt = make_runtime(root, ExtractiveLLM())
    run_reflection(rt, run_id="run_3")
    return rt


def test_an_update_undo_copied_half_done_into_another_user_is_finished_there_too(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt, first, fourth, update = update_merged(root)
    kill_undo_after_restoring(rt, monkeypatch, update)
    copy_to_bob(rt)

    rt = restarted(rt, root)
    try:
        for user in (ANDREW, BOB):
            entries = check_invariants(rt, user)
            live = sorted(e.id for e in entries.values()
                          if e.parent_type == "cluster" and e.deprecated_by is None)
            assert live == [first.id], user
            assert entries[update.id].deprecated_by == UNDONE
            assert entries[fourth.id].deprecated_by is None
            assert {entries[s].deprecated_by for s in first.sources} == {first.id}
        rows = [(r["owner_id"], r["mode"], r["status"]) for r in reports(rt)]
        assert rows == [("u_andrew", "init", "ok"), ("u_andrew", "update", "undone")]
        indexed = dict(rt.db().execute(
            "SELECT user_id, deprecated_by FROM entries WHERE id=?", (update.id,)).fetchall())
        assert indexed == {"u_andrew": UNDONE, "u_bob": UNDONE}
    finally:
        rt.close()


def test_a_folder_copied_before_the_undo_began_keeps_its_merge(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt, first, fourth, update = update_merged(root)
    copy_to_bob(rt)
    Indexer(rt).scan()
    kill_undo_after_restoring(rt, monkeypatch, update)

    rt = restarted(rt, root)
    try:
        check_invariants(rt, ANDREW)
        bob = check_invariants(rt, BOB)
        assert bob[update.id].deprecated_by is None
        assert bob[first.id].deprecated_by == bob[fourth.id].deprecated_by == update.id
    finally:
        rt.close()


def test_an_interrupted_undo_finished_at_start_warns_of_the_narratives_hand_edits(
        root: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The killed ``undo`` would have said "edited by hand"; the start that finished it said
    nothing above INFO, and the person's edits stayed archived with the narrative unnoticed."""
    rt, _, _, update = update_merged(root)
    kill_undo_after_restoring(rt, monkeypatch, update)
    log = rt.store.path_for_id(ANDREW, update.id)
    text = log.read_text()
    block = text.index(f"<!-- entry:{update.id} -->")  # the first merge's log too
    log.write_text(text[:block] + text[block:].replace("## Content\n", "## Content\n"
                                                       "Rex is deaf. ", 1))

    with caplog.at_level(logging.WARNING):
        rt = restarted(rt, root)
    try:
        assert check_invariants(rt)[update.id].deprecated_by == UNDONE
        assert (f"the interrupted undo of {update.id} (default_app/default_project/u_andrew) "
                "archived the narrative with the edits a person made") in caplog.text
    finally:
        rt.close()
