"""Provenance killed between a lesson's stale mark and its audit row, then the user's folder
copied by hand into another user's (the first folder stays) before the next start. The copy
holds the lesson stale, and no row of the copy's user says so: none is owed. The audit
records what the daemon did, for the user it did it for (SPEC §10: ``derivation_report``,
one row per derivation, ``owner_id`` its owner); a person's copy of a folder is not a
derivation, and a copy of the finished state (the mark and its row) gets no row of its own
either, as the copy of a merge (``journal.settle_copies``) or of an undo gets none. So the
rows after the kill and the copy are exactly those a copy taken after the mark finished
leaves: the mark's one row, for the first user."""

from __future__ import annotations

import shutil
from pathlib import Path

from everos_reflect.index import cursors
from everos_reflect.index.sync import Indexer
from everos_reflect.llm.base import ScriptedLLM
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.provenance import NAME
from tests.test_lesson_staleness import edit, learned_one
from tests.test_provenance_crash import killed_at_the_mark
from tests.test_provenance_crash_user_moved import COPY, OPS, lesson_of, rows, users


def test_a_stale_mark_copied_before_its_row_gets_the_rows_a_finished_one_copied_gets(
        root: Path, scripted: tuple[Runtime, ScriptedLLM]) -> None:
    rt, llm = scripted
    task, lesson_id = learned_one(rt, llm)
    edit(rt, task, "outcome: success", "outcome: failure")
    killed_at_the_mark(root)
    shutil.copytree(users(root) / OPS.user_id, users(root) / COPY.user_id)

    Indexer(rt).scan()  # the next start
    Indexer(rt).scan()

    assert lesson_of(rt, COPY, lesson_id)["status"] == "stale"
    assert rows(rt) == [(OPS.user_id, "stale", [lesson_id])]
    assert cursors.intents(rt.db(), NAME) == []


def test_a_finished_stale_mark_copied_gets_no_row_of_the_copy(
        root: Path, scripted: tuple[Runtime, ScriptedLLM]) -> None:
    rt, llm = scripted
    task, lesson_id = learned_one(rt, llm)
    edit(rt, task, "outcome: success", "outcome: failure")
    Indexer(rt).scan()  # the mark and its row, not killed
    shutil.copytree(users(root) / OPS.user_id, users(root) / COPY.user_id)

    Indexer(rt).scan()

    assert lesson_of(rt, COPY, lesson_id)["status"] == "stale"
    assert rows(rt) == [(OPS.user_id, "stale", [lesson_id])]
