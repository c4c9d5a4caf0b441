"""A merge interrupted by a kill, then its user's folder renamed by hand (and copied) with each
entry's ``owner_id`` rewritten to the new name, as a person who moves a user's logs does so
they read without a warning. Recovery followed the folder, then read the rewrite as an edit of
every source (their hashes were taken under the old name): killed before its narrative was
written, the merge was abandoned under the old name, its row naming a user nobody has, and
the next run paid the merge again; killed after, it was abandoned in the new folder (its
narrative withdrawn) and merged again. An ``owner_id`` rewritten to the folder's user is no
change to the sources: the merge is finished where the folder went, once."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from everos_reflect.markdown import settling
from everos_reflect.model import UserRef
from tests.reflect_fixtures import check_invariants, reports, run_reflection
from tests.test_merge_recovery_user_moved import live_narratives, users_folder
from tests.test_reflect_crash import crashed, restart

pytestmark = pytest.mark.usefixtures("settle_at_once")

BOB, CAROL = UserRef.of("u_bob"), UserRef.of("u_carol")
#: the steps before the sources are archived (after them nothing is compared)
BEFORE = ["planned", "narrative", "facts", "archiving"]


def made_users(root: Path, old: str, new: str) -> None:
    """``new``'s folder made ``new``'s: every ``owner_id`` (and log's ``user_id``) rewritten."""
    for log in (users_folder(root) / new).rglob("*.md"):
        log.write_text(log.read_text().replace(old, new))


@pytest.mark.parametrize("step", BEFORE)
def test_a_folder_renamed_with_its_owner_ids_rewritten_finishes_the_merge_there(
        root: Path, monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    rt, original = crashed(root, monkeypatch, step)
    rt.close()
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 0)  # renamed long after the writes
    shutil.move(users_folder(root) / "u_andrew", users_folder(root) / "u_bob")
    made_users(root, "u_andrew", "u_bob")

    counts = run_reflection(restart(root))

    rt = restart(root)
    try:
        assert not (users_folder(root) / "u_andrew").exists()
        entries = check_invariants(rt, BOB)
        assert original <= set(entries), "an entry was lost"
        assert len(live_narratives(entries)) == 1
        assert all(e.deprecated_by != e.id for e in entries.values()), "a narrative withdrawn"
        # finished once where the folder went: not abandoned and merged again
        assert [(r["owner_id"], r["status"]) for r in reports(rt)] == [("u_bob", "ok")]
        assert counts.get("merged", 0) == 0, counts
    finally:
        rt.close()


@pytest.mark.parametrize("step", ["narrative", "facts"])
def test_a_folder_renamed_and_copied_with_owner_ids_rewritten_finishes_it_in_both(
        root: Path, monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    """Renamed to Bob and copied to Carol, each rewritten: finished in Bob's (the audit's),
    and Carol's copy, whose sources are as the merge saw them but for their owner, too."""
    rt, original = crashed(root, monkeypatch, step)
    rt.close()
    monkeypatch.setattr(settling, "JUST_WRITTEN_NS", 0)
    shutil.copytree(users_folder(root) / "u_andrew", users_folder(root) / "u_carol")
    shutil.move(users_folder(root) / "u_andrew", users_folder(root) / "u_bob")
    made_users(root, "u_andrew", "u_bob")
    made_users(root, "u_andrew", "u_carol")

    run_reflection(restart(root))

    rt = restart(root)
    try:
        bob, carol = check_invariants(rt, BOB), check_invariants(rt, CAROL)
        [merged] = live_narratives(bob)
        assert [e.id for e in live_narratives(carol)] == [merged.id]
        assert {s: carol[s].deprecated_by for s in merged.sources} == dict.fromkeys(
            merged.sources, merged.id)
        assert [(r["owner_id"], r["status"]) for r in reports(rt)] == [("u_bob", "ok")]
        assert original <= set(carol)
    finally:
        rt.close()
