"""Provenance killed between a lesson's stale mark and its audit row, then the user's folder
renamed by hand before the next start. The note of the mark named the old user: the rows were
only ever written for the user a check was for, so no check settled it, and once one did it
found no record under the old name and dropped it: the lesson stood stale in the renamed
folder with no row, for good. The row now follows the folder, as the rows of merges and
derivations do: written for the one user whose logs hold the record as the mark left it."""

from __future__ import annotations

import shutil
from pathlib import Path

from everos_reflect.index import cursors
from everos_reflect.index.audit import list_derivations
from everos_reflect.index.sync import Indexer
from everos_reflect.llm.base import ScriptedLLM
from everos_reflect.model import UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.provenance import NAME
from tests.test_lesson_staleness import edit, learned_one
from tests.test_provenance_crash import killed_at_the_mark

OPS, MOVED, COPY = UserRef.of("u_ops"), UserRef.of("u_ops2"), UserRef.of("u_ops3")


def users(root: Path) -> Path:
    return root / "default_app" / "default_project" / "users"


def rows(rt: Runtime) -> list[tuple[str, str, list[str]]]:
    return sorted((r["owner_id"], r["status"], r["outputs"])
                  for r in list_derivations(rt.db(), strategy=NAME))


def test_a_stale_mark_killed_before_its_row_gets_it_in_the_renamed_folder(
        root: Path, scripted: tuple[Runtime, ScriptedLLM]) -> None:
    rt, llm = scripted
    task, lesson_id = learned_one(rt, llm)
    edit(rt, task, "outcome: success", "outcome: failure")
    killed_at_the_mark(root)
    assert rows(rt) == []

    shutil.move(users(root) / OPS.user_id, users(root) / MOVED.user_id)
    Indexer(rt).scan()  # the next start

    assert lesson_of(rt, MOVED, lesson_id)["status"] == "stale"
    assert rows(rt) == [(MOVED.user_id, "stale", [lesson_id])]
    assert cursors.intents(rt.db(), NAME) == []


def test_a_stale_mark_killed_before_its_row_of_a_copied_then_renamed_folder_keeps_its_name(
        root: Path, scripted: tuple[Runtime, ScriptedLLM]) -> None:
    rt, llm = scripted
    task, lesson_id = learned_one(rt, llm)
    edit(rt, task, "outcome: success", "outcome: failure")
    killed_at_the_mark(root)

    shutil.copytree(users(root) / OPS.user_id, users(root) / COPY.user_id)
    shutil.move(users(root) / OPS.user_id, users(root) / MOVED.user_id)
    Indexer(rt).scan()

    # two users hold it: not guessed, the row named as the rest of the old user's rows
    assert rows(rt) == [(OPS.user_id, "stale", [lesson_id])]
    assert cursors.intents(rt.db(), NAME) == []


def test_a_stale_mark_killed_before_its_row_of_a_folder_removed_is_dropped(
        root: Path, scripted: tuple[Runtime, ScriptedLLM]) -> None:
    rt, llm = scripted
    task, _ = learned_one(rt, llm)
    edit(rt, task, "outcome: success", "outcome: failure")
    killed_at_the_mark(root)
    shutil.rmtree(users(root) / OPS.user_id)

    Indexer(rt).scan()

    assert rows(rt) == []  # no user holds the lesson: nothing to record
    assert cursors.intents(rt.db(), NAME) == []


def lesson_of(rt: Runtime, ref: UserRef, lesson_id: str) -> dict[str, object]:
    return dict(rt.store.get(ref, lesson_id).meta)
