"""Provenance killed between a mark's Markdown write and its audit row: a lesson went stale
(or a record active again) with no derivation_report row, for good, since no later check
marks it again. The mark is now noted first and the next check writes the row it lacks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from everos_reflect.index import cursors
from everos_reflect.index.audit import list_derivations
from everos_reflect.index.sync import Indexer
from everos_reflect.llm.base import ScriptedLLM
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.provenance import NAME
from tests.test_lesson_staleness import edit, learned_one, lesson

KILLED_AT_MARK = """
import os, sys
from pathlib import Path
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.markdown.store import MarkdownStore
from everos_reflect.runtime import Runtime

real = MarkdownStore.update_meta

def write_then_die(self, *args, **kwargs):
    if sys.argv[2] == "after":
        real(self, *args, **kwargs)
    os._exit(9)  # the process dies here: no exception, no finally, no clean-up

MarkdownStore.update_meta = write_then_die
rt = Runtime(Path(sys.argv[1]), embedder=HashEmbedder(64), llm=ExtractiveLLM())
Indexer(rt).scan()
"""


def killed_at_the_mark(root: Path, when: str = "after") -> None:
    """A scan killed right ``after`` (or ``before``) provenance writes its first mark."""
    done = subprocess.run([sys.executable, "-c", KILLED_AT_MARK, str(root), when],
                          cwd=Path(__file__).resolve().parents[1], timeout=300,
                          capture_output=True, text=True)
    assert done.returncode == 9, done.stderr[-2000:]


def rows(rt: Runtime) -> list[tuple[str, list[str]]]:
    return [(r["status"], r["outputs"])
            for r in reversed(list_derivations(rt.db(), strategy=NAME))]


def test_a_lesson_marked_stale_by_a_killed_check_still_gets_its_audit_row(
        root: Path, scripted: tuple[Runtime, ScriptedLLM]) -> None:
    rt, llm = scripted
    task, lesson_id = learned_one(rt, llm)
    edit(rt, task, "outcome: success", "outcome: failure")

    killed_at_the_mark(root)
    assert lesson(rt, lesson_id).meta["status"] == "stale" and rows(rt) == []
    Indexer(rt).scan()  # the next start

    assert rows(rt) == [("stale", [lesson_id])]
    [row] = list_derivations(rt.db(), strategy=NAME)
    assert (row["inputs"], row["error"]) == ([task], f"evidence {task} was edited")
    assert cursors.intents(rt.db(), NAME) == []
    Indexer(rt).scan()
    assert rows(rt) == [("stale", [lesson_id])]  # written once


def test_a_lesson_made_active_again_by_a_killed_check_still_gets_its_audit_row(
        root: Path, scripted: tuple[Runtime, ScriptedLLM]) -> None:
    rt, llm = scripted
    task, lesson_id = learned_one(rt, llm)
    edit(rt, task, "outcome: success", "outcome: failure")
    Indexer(rt).scan()
    assert rows(rt) == [("stale", [lesson_id])]
    edit(rt, task, "outcome: failure", "outcome: success")  # the edit undone

    killed_at_the_mark(root)
    assert lesson(rt, lesson_id).meta["status"] == "active"
    Indexer(rt).scan()

    assert rows(rt) == [("stale", [lesson_id]), ("restored", [lesson_id])]
    assert cursors.intents(rt.db(), NAME) == []


def test_a_mark_killed_before_its_write_is_made_by_the_next_check_with_one_row(
        root: Path, scripted: tuple[Runtime, ScriptedLLM]) -> None:
    rt, llm = scripted
    task, lesson_id = learned_one(rt, llm)
    edit(rt, task, "outcome: success", "outcome: failure")

    killed_at_the_mark(root, "before")
    assert lesson(rt, lesson_id).meta["status"] == "active"
    Indexer(rt).scan()

    assert lesson(rt, lesson_id).meta["status"] == "stale"
    assert rows(rt) == [("stale", [lesson_id])]
    assert cursors.intents(rt.db(), NAME) == []
