"""A user's folder copied by hand into another user's WHILE a merge runs (not killed): the copy
is taken half done (the narrative written, its sources not archived yet, or some of them) and
the merge then finishes where it began. Nothing settled the copy: it kept a narrative live
beside its live sources for good (an update merge's are its previous narrative and one new
Episode, which no run selects), or, the merge withdrawn as stale, a narrative live that the
first folder withdrew. A person expects the copy to be a copy of the finished state, never of
half of it: the merge now settles every copy of it before its journal row goes (as recovery
does after a kill), so the copy reads as a copy taken after the merge would."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.llm.extractive import ExtractiveLLM
from everos_reflect.model import Entry, Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import journal
from tests.reflect_fixtures import (
    ANDREW,
    Crash,
    add_episode,
    all_entries,
    check_invariants,
    crash_run_at,
    make_runtime,
    reports,
    run_reflection,
    seed_pets,
)
from tests.test_merge_recovery_user_moved import entries_of

pytestmark = pytest.mark.usefixtures("settle_at_once")

BOB = UserRef.of("u_bob")
#: the steps after which a copy is half done (before: a copy of the state before the merge;
#: after ``deprecated``: a copy of the finished Markdown)
HALF = [journal.NARRATIVE, journal.FACTS, journal.ARCHIVING]


def users(rt: Runtime) -> Path:
    return rt.root / "default_app" / "default_project" / "users"


def copy_to_bob(rt: Runtime) -> None:
    shutil.copytree(users(rt) / "u_andrew", users(rt) / "u_bob")
    for log in (users(rt) / "u_bob").rglob("*.md"):  # the copy made Bob's
        log.write_text(log.read_text().replace("u_andrew", "u_bob"))


def pets(root: Path, *, update: bool) -> Runtime:
    """Andrew's pets; with ``update``, merged once and joined by a fourth pet Episode."""
    rt = make_runtime(root, ExtractiveLLM())
    seed_pets(rt)
    Indexer(rt).scan()
    if update:
        assert run_reflection(rt, run_id="run_1")["merged"] == 1
        add_episode(rt, ANDREW, "2026-09-09T10:00:00-07:00", "Andrew adopted a third dog",
                    "Andrew adopted a third dog named Rex. Andrew now has three dogs, Toby, "
                    "Buddy and Rex.")
        Indexer(rt).scan()
    return rt


def at_step(monkeypatch: pytest.MonkeyPatch, step: str, do: Callable[[], None]) -> None:
    """``do`` once, the first time the commit reaches ``step`` (the merge goes on)."""
    done: list[str] = []

    def hook(reached: str) -> None:
        if reached == step and not done:
            done.append(reached)
            do()

    monkeypatch.setattr(journal, "checkpoint", hook)


def state(entries: dict[str, Entry]) -> dict[str, tuple[object, ...]]:
    """What a copy must agree on: each entry, where it is archived to, and its text."""
    return {i: (e.deprecated_by, e.parent_id, tuple(e.sections.items()))
            for i, e in entries.items()}


@pytest.mark.parametrize("update", [False, True], ids=["init", "update"])
@pytest.mark.parametrize("step", [journal.PLANNED, *HALF, journal.DEPRECATED, journal.SYNCED])
def test_a_folder_copied_while_a_merge_runs_is_a_copy_of_the_finished_merge(
        root: Path, monkeypatch: pytest.MonkeyPatch, step: str, update: bool) -> None:
    rt = pets(root, update=update)
    before = state(all_entries(rt, ANDREW))
    at_step(monkeypatch, step, lambda: copy_to_bob(rt))
    assert run_reflection(rt, run_id="run_2")["merged"] == 1
    try:
        andrew, bob = check_invariants(rt, ANDREW), check_invariants(rt, BOB)
        if step == journal.PLANNED:  # nothing written yet: a copy of the state before
            assert state(bob) == before
            return
        assert state(bob) == state(andrew)
        [merged] = [e for e in andrew.values()
                    if e.parent_type == "cluster" and e.deprecated_by is None]
        if step in HALF:  # the copy's narrative is indexed as it reads now
            indexed = rt.db().execute("SELECT deprecated_by FROM entries WHERE user_id=? "
                                      "AND id=?", ("u_bob", merged.id)).fetchall()
            assert [tuple(r) for r in indexed] == [(None,)]
        # the audit stays the first user's, as for a copy made after the merge
        assert {r["owner_id"] for r in reports(rt)} == {"u_andrew"}
        assert rt.db().execute("SELECT COUNT(*) FROM merge_journal").fetchone()[0] == 0
    finally:
        rt.close()


@pytest.mark.parametrize("step", HALF)
def test_a_folder_copied_while_a_recovered_merge_finishes_is_finished_too(
        root: Path, monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    """The same for a merge a kill interrupted, copied while the next start finishes it
    (after recovery settled the copies there were): ``journal.complete``."""
    rt = pets(root, update=False)
    crash_run_at(monkeypatch, rt, journal.NARRATIVE)
    rt.close()
    rt = make_runtime(root, ExtractiveLLM())
    at_step(monkeypatch, step, lambda: copy_to_bob(rt))
    run_reflection(rt, run_id="run_2")
    try:
        andrew, bob = check_invariants(rt, ANDREW), check_invariants(rt, BOB)
        assert state(bob) == state(andrew)
        assert [(r["owner_id"], r["status"]) for r in reports(rt)] == [("u_andrew", "ok")]
    finally:
        rt.close()


def test_a_folder_copied_while_a_merge_turns_out_stale_is_withdrawn_there_too(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Copied once the narrative and facts are written, then a source edited in the first
    folder before the archiving: the merge is withdrawn there (stale); the copy, whose
    source is as the merge saw it, read a live narrative beside its live sources for good."""
    rt = pets(root, update=True)
    [fourth] = [e for e in rt.store.entries(ANDREW, Kind.EPISODE)
                if e.sections.get("Subject") == "Andrew adopted a third dog"]

    def copy_then_edit() -> None:
        copy_to_bob(rt)
        log = rt.store.path_for_id(ANDREW, fourth.id)
        log.write_text(log.read_text().replace("Toby, Buddy and Rex.", "Toby, Buddy and Rex!"))

    at_step(monkeypatch, journal.FACTS, copy_then_edit)
    assert run_reflection(rt, run_id="run_2").get("merged", 0) == 0
    try:
        andrew, bob = check_invariants(rt, ANDREW), check_invariants(rt, BOB)
        assert {i: e.deprecated_by for i, e in bob.items()} == {
            i: e.deprecated_by for i, e in andrew.items()}
        withdrawn = [e for e in bob.values() if e.parent_type == "cluster"
                     and e.deprecated_by == e.id]
        assert len(withdrawn) == 1  # the stale merge's narrative, withdrawn in the copy too
    finally:
        rt.close()


def test_a_copy_killed_with_the_merge_is_still_settled_by_the_next_start(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Copied at ``facts``, the merge then killed once its sources are archived: the start
    settles the copy (the row is still there)."""
    rt = pets(root, update=False)

    def hook(reached: str) -> None:
        if reached == journal.FACTS:
            copy_to_bob(rt)
        if reached == journal.DEPRECATED:
            raise Crash(reached)

    monkeypatch.setattr(journal, "checkpoint", hook)
    with pytest.raises(Crash):
        run_reflection(rt)
    monkeypatch.setattr(journal, "checkpoint", lambda reached: None)
    rt.close()
    rt = make_runtime(root, ExtractiveLLM())
    run_reflection(rt, run_id="run_2")
    try:
        assert state(check_invariants(rt, BOB)) == state(check_invariants(rt, ANDREW))
        assert all_entries(rt, BOB)
    finally:
        rt.close()


def test_another_users_log_that_cannot_be_looked_at_does_not_stop_the_merge(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Looking for copies, a log of another user that cannot even be looked at (a folder this
    account may not enter: ``is_file`` raises) is read as holding none: raised, every merge
    of the batch failed, at every run, as long as that folder stayed so."""
    rt = pets(root, update=False)
    today = journal.datetime.now(journal.UTC).date()
    add_episode(rt, BOB, f"{today.isoformat()}T08:00:00+00:00", "A note", "Bob wrote a note.")
    denied = rt.store.log_path(BOB, Kind.EPISODE, today)
    real = Path.is_file

    def is_file(self: Path) -> bool:
        if self == denied:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "is_file", is_file)
    counts = run_reflection(rt, run_id="run_2")
    monkeypatch.setattr(Path, "is_file", real)
    try:
        assert counts["merged"] == 1 and not counts.get("interrupted"), counts
        assert rt.db().execute("SELECT COUNT(*) FROM merge_journal").fetchone()[0] == 0
        check_invariants(rt, ANDREW)
    finally:
        rt.close()


@pytest.mark.parametrize("step", HALF)
def test_a_copy_that_keeps_the_files_times_is_found_too(
        root: Path, monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    """``cp -a`` (``copytree``) keeps each log's mtime: the copy's episode log is as old as
    the first folder's, last written by the narrative, never older than the batch."""
    rt = pets(root, update=False)
    at_step(monkeypatch, step, lambda: shutil.copytree(users(rt) / "u_andrew",
                                                       users(rt) / "u_bob"))
    assert run_reflection(rt, run_id="run_2")["merged"] == 1
    try:
        andrew, bob = entries_of(rt, ANDREW), entries_of(rt, BOB)
        assert state(bob) == state(andrew)
        assert rt.db().execute("SELECT COUNT(*) FROM merge_journal").fetchone()[0] == 0
    finally:
        rt.close()
