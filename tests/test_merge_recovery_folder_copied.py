"""A merge killed half-way, then the user's folder copied by hand into another user's before
the next start. The start settled the merge in the first folder only: the copy kept the
narrative live beside the live entries it merged. An update merge's are its previous
narrative and one new Episode, which no run selects, so the copy held two live narratives of
the same sources for good. The copy is now settled as the first folder is (by its own logs):
rolled forward, or withdrawn when one of its sources changed there before anything was
archived; the audit and the clusters stay the first user's."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.llm.extractive import ExtractiveLLM
from everos_reflect.model import Entry, Kind, UserRef
from everos_reflect.runtime import Runtime
from tests.reflect_fixtures import (
    ANDREW,
    add_episode,
    check_invariants,
    crash_run_at,
    make_runtime,
    reports,
    run_reflection,
    seed_pets,
)

pytestmark = pytest.mark.usefixtures("settle_at_once")

BOB = UserRef.of("u_bob")


def killed_merge(root: Path, monkeypatch: pytest.MonkeyPatch, step: str, *,
                 update: bool) -> tuple[Runtime, Entry | None]:
    """Andrew's pets (merged first when ``update``, then a fourth pet Episode), the next
    merge killed right after ``step``; the runtime and the first merge's narrative."""
    rt = make_runtime(root, ExtractiveLLM())
    seed_pets(rt)
    Indexer(rt).scan()
    first = None
    if update:
        assert run_reflection(rt)["merged"] == 1
        [first] = rt.store.entries(ANDREW, Kind.EPISODE)[-1:]
        assert first.parent_type == "cluster"
        add_episode(rt, ANDREW, "2026-09-09T10:00:00-07:00", "Andrew adopted a third dog",
                    "Andrew adopted a third dog named Rex. Andrew now has three dogs, Toby, "
                    "Buddy and Rex.")
        Indexer(rt).scan()
    crash_run_at(monkeypatch, rt, step)
    return rt, first


def copy_to_bob(rt: Runtime) -> Path:
    users = rt.root / "default_app" / "default_project" / "users"
    shutil.copytree(users / "u_andrew", users / "u_bob")
    for log in (users / "u_bob").rglob("*.md"):  # the copy made Bob's
        log.write_text(log.read_text().replace("u_andrew", "u_bob"))
    return users / "u_bob"


def restarted(rt: Runtime, root: Path) -> Runtime:
    """The process dies; the next start recovers, then runs Reflection."""
    rt.close()
    rt = make_runtime(root, ExtractiveLLM())
    run_reflection(rt, run_id="run_3")
    return rt


def live_narratives(entries: dict[str, Entry]) -> list[Entry]:
    return [e for e in entries.values() if e.parent_type == "cluster" and e.deprecated_by is None]


@pytest.mark.parametrize("update", [False, True], ids=["init", "update"])
@pytest.mark.parametrize("step", ["narrative", "facts", "archiving"])
def test_a_merge_copied_half_done_into_another_user_is_finished_there_too(
        root: Path, monkeypatch: pytest.MonkeyPatch, step: str, update: bool) -> None:
    rt, _ = killed_merge(root, monkeypatch, step, update=update)
    copy_to_bob(rt)

    rt = restarted(rt, root)
    try:
        andrew = check_invariants(rt, ANDREW)
        bob = check_invariants(rt, BOB)
        [merged] = live_narratives(andrew)
        assert [e.id for e in live_narratives(bob)] == [merged.id]
        assert bob[merged.id].sources == merged.sources
        facts = [e.content for e in bob.values()
                 if e.kind is Kind.ATOMIC_FACT and e.parent_id == merged.id]
        assert facts == [e.content for e in andrew.values()
                         if e.kind is Kind.ATOMIC_FACT and e.parent_id == merged.id] != []
        assert {r["owner_id"] for r in reports(rt)} == {"u_andrew"}
        indexed = dict(rt.db().execute(
            "SELECT user_id, deprecated_by FROM entries WHERE id=?", (merged.id,)).fetchall())
        assert indexed == {"u_andrew": None, "u_bob": None}
    finally:
        rt.close()


def test_a_copy_whose_source_was_edited_before_anything_was_archived_is_withdrawn(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt, first = killed_merge(root, monkeypatch, "facts", update=True)
    assert first is not None
    bob_dir = copy_to_bob(rt)
    [log] = bob_dir.glob("episodes/episode-2026-09-09.md")
    log.write_text(log.read_text().replace("Toby, Buddy and Rex.", "Toby, Buddy and Rex!"))

    rt = restarted(rt, root)
    try:
        andrew = check_invariants(rt, ANDREW)
        bob = check_invariants(rt, BOB)
        [merged] = live_narratives(andrew)
        assert bob[merged.id].deprecated_by == merged.id  # withdrawn: replaced by nothing
        assert [e.id for e in live_narratives(bob)] == [first.id]
        assert all(bob[s].deprecated_by is None for s in merged.sources)
    finally:
        rt.close()
