"""The ``derivation_report`` rows (SPEC §10) after a user's folder was renamed by hand.

The audit lives in ``system.db`` alone, never rebuilt from Markdown: after ``mv
users/u_andrew users/u_bob`` and a scan, the ``reflection_report`` rows of Andrew's merges
named u_bob (the user whose logs hold them, as the index and ``explain`` read them), while
the ``derivation_report`` rows of his lessons and insights still named u_andrew, a user nobody
has: ``sqlite3 … FROM derivation_report`` and ``explain`` disagreed on whose records they are.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.engine.registry import RunContext, validate_strategy_settings
from everos_reflect.index.audit import Derivation, list_derivations, record_derivation
from everos_reflect.index.sync import Indexer
from everos_reflect.llm.base import ScriptedLLM, Usage
from everos_reflect.llm.tasks import TaskResult
from everos_reflect.model import Kind, UserRef
from everos_reflect.procedural.tasks import new_task
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.insight_views import explain
from everos_reflect.strategies.lessons import NAME, LearnLessons

#: logs moved by the test itself, no other writer (conftest.py)
pytestmark = pytest.mark.usefixtures("settle_at_once")

ANDREW, BOB = UserRef.of("u_andrew"), UserRef.of("u_bob")


def users_folder(root: Path) -> Path:
    return root / "default_app" / "default_project" / "users"


def learned(root: Path) -> tuple[Runtime, str]:
    """Andrew's backup task taught one lesson; a failed attempt of another run is audited
    too (a row that derived nothing). Returns the runtime and the lesson's id."""
    llm = ScriptedLLM(tasks={"lessons": [TaskResult(
        {"lessons": ["Verify the backup before deleting the source."], "avoid": []},
        Usage(50, 20), "scripted", "scripted-v1")]})
    rt = Runtime(root, embedder=HashEmbedder(64), llm=llm)
    t = new_task(ANDREW, task_type="backup", goal="Back up the photos", steps=["copy"],
                 outcome="success", timestamp="2026-10-01T10:00:00+00:00")
    rt.store.append(ANDREW, Kind.TASK, t.meta, t.sections, day=t.day)
    LearnLessons().run(RunContext(rt, validate_strategy_settings(NAME, {}, "ome.toml"),
                                  "run_1", "test"))
    record_derivation(rt.db(), Derivation(NAME, ANDREW, "failed", run_id="run_2",
                                          error="provider unavailable"))
    [lesson] = [r for r in list_derivations(rt.db(), strategy=NAME) if r["outputs"]]
    return rt, lesson["outputs"][0]


def owners(rt: Runtime) -> list[tuple[str, str]]:
    return sorted((r["owner_id"], r["status"]) for r in list_derivations(rt.db()))


@pytest.mark.parametrize("how", ["scan", "reindex"])
def test_a_renamed_folder_takes_its_derivation_rows(root: Path, how: str) -> None:
    rt, lesson = learned(root)
    assert owners(rt) == [("u_andrew", "failed"), ("u_andrew", "ok")]

    shutil.move(users_folder(root) / "u_andrew", users_folder(root) / "u_bob")
    if how == "scan":
        Indexer(rt).scan()
    else:
        Indexer(rt).reindex()

    assert explain(rt, BOB, lesson)["id"] == lesson
    assert owners(rt) == [("u_bob", "failed"), ("u_bob", "ok")]


def test_a_copied_folder_keeps_the_rows_until_one_holder_is_left(root: Path) -> None:
    rt, _ = learned(root)
    old, new = users_folder(root) / "u_andrew", users_folder(root) / "u_bob"
    shutil.copytree(old, new)
    Indexer(rt).scan()
    assert owners(rt) == [("u_andrew", "failed"), ("u_andrew", "ok")]  # two hold it: kept

    shutil.rmtree(old)
    Indexer(rt).scan()
    assert owners(rt) == [("u_bob", "failed"), ("u_bob", "ok")]
