"""A user's folder deleted (or renamed) by a person while a derived tier works from its records:
what the tier derived is not written, and the folder is not made again to hold it."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.errors import UserGone
from everos_reflect.index.audit import list_derivations
from everos_reflect.llm.openai_llm import OpenAILLM
from everos_reflect.model import Kind, UserRef
from everos_reflect.procedural.tasks import new_task
from everos_reflect.runtime import Runtime
from tests.test_insights import DEV, cite_reverts, fill, openai_runtime
from tests.test_insights import run as run_insights

pytest_plugins = ["tests.fake_openai"]

OPS = UserRef.of("u_ops")


def test_a_derived_append_for_a_user_whose_folder_is_gone_writes_nothing(root: Path) -> None:
    rt = Runtime(root, embedder=HashEmbedder(16))
    row = ({"evidence": ["ep_20261001_0001"], "depth": 1, "status": "active"},
           {"Insight": "Auth reverts recur."})
    with pytest.raises(UserGone, match="the folder of user default_app/default_project/u_ops "
                                       r"is gone \(deleted or renamed meanwhile\)"):
        rt.store.append_many(OPS, Kind.INSIGHT, [row], derived=True)
    assert not rt.store.user_dir(OPS).exists()
    # a person's (or a test's) own record may start a user's folder, as an Episode does
    assert rt.store.append_many(OPS, Kind.INSIGHT, [row])[0].id.startswith("in_")


def test_insights_of_a_user_deleted_during_the_call_are_not_written(
        root: Path, fake_openai: Any) -> None:
    rt = openai_runtime(root, fake_openai)
    fill(rt)
    folder = rt.store.user_dir(DEV)

    def delete_then_answer(body: dict[str, Any]) -> str:
        shutil.rmtree(folder)
        return cite_reverts(body)

    fake_openai.script({"questions": ["What does the user's revert history show?"]},
                       delete_then_answer)
    counts = run_insights(rt, questions=1)

    assert counts == {"failed": 1}
    assert not folder.exists() and not list(root.rglob("*.md"))
    (row,) = list_derivations(rt.db(), strategy="reflect_insights")
    assert row["status"] == "failed" and row["outputs"] == []
    assert "u_dev is gone (deleted or renamed meanwhile)" in row["error"]


def test_lessons_of_a_user_deleted_during_the_call_are_not_written(
        root: Path, fake_openai: Any, caplog: pytest.LogCaptureFixture) -> None:
    from tests.test_lessons import learn

    llm = OpenAILLM(model="fake-model", base_url=fake_openai.base_url, api_key="k",
                    max_retries=0, timeout_seconds=10, sleep=lambda s: None)
    rt = Runtime(root, embedder=HashEmbedder(64), llm=llm)
    for day in (1, 2, 3):
        t = new_task(OPS, task_type="deploy", goal="Deploy the web service",
                     steps=["build", "push"], outcome="failure", errors=["forgot migrations"],
                     timestamp=f"2026-10-{day:02d}T10:00:00+00:00")
        rt.store.append(OPS, Kind.TASK, t.meta, t.sections, day=t.day)
    folder = rt.store.user_dir(OPS)

    def delete_then_answer(body: dict[str, Any]) -> dict[str, Any]:
        shutil.rmtree(folder)
        return {"lessons": ["Run the migrations before pushing."], "avoid": []}

    fake_openai.script(delete_then_answer)
    with caplog.at_level(logging.WARNING):
        counts = learn(rt)

    assert counts == {"failed": 1}
    assert not folder.exists() and not list(root.rglob("*.md"))
    (row,) = list_derivations(rt.db(), strategy="learn_lessons")
    assert row["status"] == "failed" and "u_ops is gone" in row["error"]
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
