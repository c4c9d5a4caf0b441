"""Shared by the tests of a user's folder copied by hand while a merge ran
(tests/test_copy_over_several_writes.py, tests/test_copy_finished_after_row.py): Andrew's
folder copied into Bob's, some of its logs as they were at an earlier step."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

import pytest

from everos_reflect.model import Entry
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import journal
from tests.reflect_fixtures import ANDREW, Crash, check_invariants
from tests.test_folder_copied_mid_merge import BOB, state, users


def copy_as_bob(rt: Runtime, kept: Mapping[Path, str | None]) -> None:
    """Andrew's folder copied into Bob's as it is now, but for the logs of ``kept``
    (relative to the folder) as they were when kept (``None``: not there then); made Bob's
    (every ``u_andrew`` rewritten, as a copy made another user's is)."""
    shutil.copytree(users(rt) / "u_andrew", users(rt) / "u_bob")
    for rel, text in kept.items():
        target = users(rt) / "u_bob" / rel
        if text is None:
            target.unlink(missing_ok=True)
        else:
            target.write_text(text)
    for log in (users(rt) / "u_bob").rglob("*.md"):
        log.write_text(log.read_text().replace("u_andrew", "u_bob"))


def killed_at(monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    """The merge killed at ``step``, after the ``journal.checkpoint`` hook armed now (a
    copy's, say) has run there."""
    armed = journal.checkpoint

    def hook(reached: str) -> None:
        armed(reached)
        if reached == step:
            raise Crash(reached)

    monkeypatch.setattr(journal, "checkpoint", hook)


def bob_holds_the_finished_merge(rt: Runtime) -> Entry:
    """Assert that Bob's folder is a copy of Andrew's finished merge (every entry, where it
    is archived to and its text), its narrative live, Bob's, and live in the index too;
    returns that narrative."""
    andrew, bob = check_invariants(rt, ANDREW), check_invariants(rt, BOB)
    assert state(bob) == state(andrew)
    [narrative] = [e for e in bob.values() if e.parent_type == "cluster"]
    assert narrative.deprecated_by is None and narrative.meta["owner_id"] == "u_bob"
    indexed = rt.db().execute("SELECT deprecated_by FROM entries WHERE user_id=? AND id=?",
                              ("u_bob", narrative.id)).fetchall()
    assert [tuple(r) for r in indexed] == [(None,)]
    return narrative
