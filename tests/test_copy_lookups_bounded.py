"""The look-up for copies of a merge (``journal.settle_copies_of``) skips every other user's log
last modified before the merge's journal row was written: a copy of the merge can only have
been written since. A batch's live merges skipped them; a merge withdrawn (``abandon``: a
source edited meanwhile, in a batch or in recovery after a kill) read every other user's log
of the merge day again, whoever wrote it and whenever. The filter must not miss a copy that
keeps the files' times (``cp -a``), nor one whose row predates the time being recorded."""

from __future__ import annotations

import json
import os
import shutil
import time
from datetime import date
from pathlib import Path

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.llm.extractive import ExtractiveLLM
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import journal
from tests.reflect_fixtures import (
    ANDREW,
    add_episode,
    crash_run_at,
    make_runtime,
    merge_on,
    reports,
    run_reflection,
    seed_pets,
)
from tests.test_folder_copied_mid_merge import at_step, users

pytestmark = pytest.mark.usefixtures("settle_at_once")

CAROL = UserRef.of("u_carol")
BOB = UserRef.of("u_bob")
DAY = date(2026, 9, 10)  # the merge day


def pets_and_carol(root: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Runtime, Path]:
    """Andrew's pets to merge on ``DAY``, and Carol's log of ``DAY``, last written an hour
    before the merge (nothing of the merge can be in it)."""
    merge_on(monkeypatch, DAY)
    rt = make_runtime(root, ExtractiveLLM())
    seed_pets(rt)
    add_episode(rt, CAROL, "2026-09-10T08:00:00+00:00", "A note", "Carol wrote a note.")
    carol = rt.store.log_path(CAROL, Kind.EPISODE, DAY)
    hour_ago = time.time() - 3600
    os.utime(carol, (hour_ago, hour_ago))
    Indexer(rt).scan()
    return rt, carol


def count_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every log the copy look-ups read."""
    read: list[Path] = []
    real = journal._named_in

    def named_in(path: Path, ids: list[str], real_root: str) -> set[str]:
        read.append(Path(path))
        return real(path, ids, real_root)

    monkeypatch.setattr(journal, "_named_in", named_in)
    return read


def edit_a_source(rt: Runtime) -> None:
    """A source edited by hand in the first folder: the merge turns out stale."""
    log = rt.store.log_path(ANDREW, Kind.EPISODE, date(2026, 9, 7))
    log.write_text(log.read_text().replace("Toby and Buddy.", "Toby and Buddy!"))


def test_a_stale_merge_does_not_read_logs_older_than_it(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt, carol = pets_and_carol(root, monkeypatch)
    read = count_reads(monkeypatch)
    at_step(monkeypatch, journal.FACTS, lambda: edit_a_source(rt))
    counts = run_reflection(rt, run_id="run_1")
    try:
        assert counts.get("merged", 0) == 0
        assert [r["status"] for r in reports(rt)] == ["stale"]
        assert carol not in read, read
    finally:
        rt.close()


def test_a_merge_withdrawn_by_recovery_does_not_read_logs_older_than_it(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt, carol = pets_and_carol(root, monkeypatch)
    crash_run_at(monkeypatch, rt, journal.FACTS)
    edit_a_source(rt)
    rt.close()
    read = count_reads(monkeypatch)
    rt = make_runtime(root, ExtractiveLLM())
    try:
        run_reflection(rt, run_id="run_2")
        assert reports(rt)[0]["status"] == "abandoned"  # then merged again, as it reads now
        assert carol not in read, read
    finally:
        rt.close()


def test_a_copy_keeping_the_files_times_is_withdrawn_with_the_stale_merge(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Copied with ``cp -a`` once the narrative and facts are written, then a source edited
    in the first folder: the copy's narrative is withdrawn too (its log is as old as the
    first folder's, written since the row)."""
    rt, _ = pets_and_carol(root, monkeypatch)

    def copy_then_edit() -> None:
        shutil.copytree(users(rt) / "u_andrew", users(rt) / "u_bob")
        edit_a_source(rt)

    at_step(monkeypatch, journal.FACTS, copy_then_edit)
    assert run_reflection(rt, run_id="run_1").get("merged", 0) == 0
    try:
        rt.store.forget_parses()
        narratives = [e for e in rt.store.entries(BOB, Kind.EPISODE)
                      if e.parent_type == "cluster"]
        assert len(narratives) == 1
        assert narratives[0].deprecated_by == narratives[0].id  # withdrawn there too
    finally:
        rt.close()


def test_a_row_that_does_not_say_when_it_was_written_reads_every_log(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A row written before the time was recorded (no ``journalled_ns``): every other user's
    log of the day is read, as before; a copy in one is settled."""
    rt, carol = pets_and_carol(root, monkeypatch)
    crash_run_at(monkeypatch, rt, journal.NARRATIVE)
    row_id, plan = rt.db().execute("SELECT id, plan FROM merge_journal").fetchone()
    old = json.loads(plan)
    del old["journalled_ns"]
    with rt.db():
        rt.db().execute("UPDATE merge_journal SET plan=? WHERE id=?", (json.dumps(old), row_id))
    shutil.copytree(users(rt) / "u_andrew", users(rt) / "u_bob")
    bob = rt.store.log_path(BOB, Kind.EPISODE, DAY)
    hour_ago = time.time() - 3600
    os.utime(bob, (hour_ago, hour_ago))  # a copy whose time says nothing
    rt.close()
    read = count_reads(monkeypatch)
    rt = make_runtime(root, ExtractiveLLM())
    try:
        run_reflection(rt, run_id="run_2")
        assert carol in read and bob in read
        rt.store.forget_parses()
        [narrative] = [e for e in rt.store.entries(BOB, Kind.EPISODE)
                       if e.parent_type == "cluster"]
        sources = [e for e in rt.store.entries(BOB, Kind.EPISODE)
                   if e.id in narrative.meta["sources"]]
        assert sources and all(e.deprecated_by == narrative.id for e in sources)
    finally:
        rt.close()
