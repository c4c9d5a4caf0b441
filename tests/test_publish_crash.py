"""A process killed after the indexer marked a file synced, before the change subscribers ran
(provenance, clustering): the file read as up to date from then on, so its change was told to
nobody for good. A task edited by hand left its lesson active, an edited Episode left the
insight citing it active, a new Episode stayed in no cluster. The change is now noted in the
transaction that marks the file synced and handed over by the next sync."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from everos_reflect.clustering.service import ClusterService
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.index.audit import list_derivations
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.llm.base import ScriptedLLM
from everos_reflect.model import Kind
from everos_reflect.runtime import Runtime
from tests.reflect_fixtures import add_episode, make_runtime
from tests.test_lesson_staleness import edit, learned_one, lesson
from tests.test_provenance import DEV, edit_file, setup, status

REPO = Path(__file__).resolve().parents[1]

KILLED_SCAN = """
import os, sys
from pathlib import Path
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.index import events
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.runtime import Runtime
from tests.reflect_fixtures import make_runtime

def die(*args, **kwargs):
    os._exit(9)  # the process dies here: no exception, no finally, no clean-up

target = sys.argv[2]
if target == "publish":  # right after the transaction that marks the files synced
    events.publish_many = die
else:  # the subscribers ran, their publish notes are not dropped yet
    Indexer._forget_notes = die
root = Path(sys.argv[1])
if sys.argv[3] == "clusters":
    rt = make_runtime(root, ExtractiveLLM())
else:
    rt = Runtime(root, embedder=HashEmbedder(64), llm=ExtractiveLLM())
Indexer(rt).scan()
"""


def killed_scan(root: Path, target: str, runtime: str) -> None:
    done = subprocess.run([sys.executable, "-c", KILLED_SCAN, str(root), target, runtime],
                          cwd=REPO, timeout=300, capture_output=True, text=True)
    assert done.returncode == 9, done.stderr[-2000:]


def placed(rt: Runtime) -> dict[str, str | None]:
    service = ClusterService(rt)
    return {e.id: service.cluster_of(DEV, e.id) for e in rt.store.entries(DEV, Kind.EPISODE)}


@pytest.mark.parametrize("target", ["publish", "forget"])
def test_an_edit_synced_by_a_killed_scan_still_marks_the_insights_and_clusters_the_episode(
        root: Path, tmp_path: Path, target: str) -> None:
    rt, eps, first, second = setup(root)
    edit_file(rt.store.path_for_id(DEV, eps[1].id), "on day 16", "on day 17")
    new = add_episode(rt, DEV, "2026-09-30T12:00:00+00:00", "Revert again",
                      "The user reverted an auth change on day 30 again.")
    twin = tmp_path / "twin"
    shutil.copytree(root, twin)  # the same root, scanned by a process nobody kills

    killed_scan(root, target, "clusters")
    if target == "publish":  # the index reads as synced, and nobody was told
        assert Indexer(rt).pending()["files_changed"] == 0
        assert status(rt, first.id) == ("active", None)
    Indexer(rt).scan()  # the next start

    assert status(rt, first.id) == ("stale", f"evidence {eps[1].id} was edited")
    assert status(rt, second.id) == ("stale", f"evidence {first.id} is stale")
    unkilled = make_runtime(twin, ExtractiveLLM())
    Indexer(unkilled).scan()
    assert placed(rt)[new.id] is not None
    assert placed(rt) == placed(unkilled)
    assert rt.db().execute("SELECT COUNT(*) FROM publish_note").fetchone()[0] == 0
    unkilled.close()


@pytest.mark.parametrize("target", ["publish", "forget"])
def test_a_task_edit_synced_by_a_killed_scan_still_makes_its_lesson_stale_once(
        root: Path, target: str) -> None:
    llm = ScriptedLLM()
    rt = Runtime(root, embedder=HashEmbedder(64), llm=llm)
    task, lesson_id = learned_one(rt, llm)
    edit(rt, task, "outcome: success", "outcome: failure")

    killed_scan(root, target, "lessons")
    Indexer(rt).scan()
    Indexer(rt).scan()

    meta = lesson(rt, lesson_id).meta
    assert (meta["status"], meta["stale_reason"]) == ("stale", f"evidence {task} was edited")
    rows = list_derivations(rt.db(), strategy="provenance")
    assert [(r["status"], r["outputs"]) for r in rows] == [("stale", [lesson_id])]
    rt.close()
