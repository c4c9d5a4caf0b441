"""The look-up for copies of a merge (``journal.settle_copies_of``) asks each other user's logs
for their times first, in one loop (``journal._written_since``), and does its per-log
bookkeeping (the log's path, its record, the check of what it names) only for a user one of
whose logs was written since the merge's row: most users hold none, and that bookkeeping was
two thirds of the look-up (``bench/copy_settle_cost.py``). The files' own times, as before:
a copy written over the logs of a folder that exists (``cp`` into it, which leaves the
folder's time as it was) is found still."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from everos_reflect.model import Kind, UserRef
from everos_reflect.strategies import journal
from tests.reflect_fixtures import ANDREW, add_episode, check_invariants, run_reflection
from tests.test_copy_lookups_bounded import BOB, DAY, pets_and_carol
from tests.test_folder_copied_mid_merge import at_step, state, users

pytestmark = pytest.mark.usefixtures("settle_at_once")


def count_looks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every log the look-ups keep a record of (``journal._named_since``)."""
    looked: list[str] = []
    real = journal._named_since

    def named_since(store: object, path: str, *args: object) -> set[str] | None:
        looked.append(path)
        return real(store, path, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(journal, "_named_since", named_since)
    return looked


def test_users_whose_logs_are_older_than_the_row_get_no_record(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt, _ = pets_and_carol(root, monkeypatch)
    others = [UserRef.of(f"u_other{n}") for n in range(5)]
    hour_ago = time.time() - 3600
    for ref in others:
        add_episode(rt, ref, "2026-09-10T08:00:00+00:00", "A note", "A note.")
        log = rt.store.log_path(ref, Kind.EPISODE, DAY)
        os.utime(log, (hour_ago, hour_ago))
    looked = count_looks(monkeypatch)
    try:
        assert run_reflection(rt, run_id="run_1")["merged"] == 1
        assert looked == [], looked
    finally:
        rt.close()


def test_a_copy_written_over_an_existing_folder_in_place_is_found(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bob's folder exists, its logs old; Andrew's logs copied over them in place once the
    merge's facts are written (the folders' times stay as they were): found and settled."""
    rt, _ = pets_and_carol(root, monkeypatch)
    add_episode(rt, BOB, "2026-09-10T08:00:00+00:00", "A note", "Bob wrote a note.")
    hour_ago = time.time() - 3600
    for path in (users(rt) / "u_bob").rglob("*"):
        os.utime(path, (hour_ago, hour_ago))

    def copy_in_place() -> None:
        andrew, bob = users(rt) / "u_andrew", users(rt) / "u_bob"
        for log in andrew.rglob("*.md"):
            target = bob / log.relative_to(andrew)
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "w") as fh:  # written over in place: the same inode
                fh.write(log.read_text().replace("u_andrew", "u_bob"))
        for folder in [bob, *(p for p in bob.rglob("*") if p.is_dir())]:
            os.utime(folder, (hour_ago, hour_ago))  # the folders' times as they were

    at_step(monkeypatch, journal.FACTS, copy_in_place)
    try:
        assert run_reflection(rt, run_id="run_1")["merged"] == 1
        assert state(check_invariants(rt, BOB)) == state(check_invariants(rt, ANDREW))
    finally:
        rt.close()
