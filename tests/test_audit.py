"""The derivation_report audit table (SPEC §10): a named migration, rows readable with sqlite3."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from everos_reflect.index import db as dbmod
from everos_reflect.index.audit import Derivation, list_derivations, record_derivation
from everos_reflect.model import UserRef

pytest_plugins = ["tests.fake_openai"]

SPEC_COLUMNS = {"id", "run_id", "strategy", "app_id", "project_id", "owner_id", "inputs",
                "outputs", "status", "provider", "model", "prompt_tokens",
                "completion_tokens", "duration_ms", "error", "created_at"}


def test_a_blank_database_migrates_to_the_spec_columns(tmp_path: Path) -> None:
    conn = dbmod.connect(tmp_path)
    names = {r[0] for r in conn.execute("SELECT name FROM schema_migrations")}
    assert "0007_derivation_report" in names
    columns = {r[1] for r in conn.execute("PRAGMA table_info(derivation_report)")}
    assert columns >= SPEC_COLUMNS
    assert dbmod.migrate(conn) == []  # applying again does nothing


def test_a_derivation_is_readable_with_plain_sqlite3(tmp_path: Path) -> None:
    conn = dbmod.connect(tmp_path)
    ref = UserRef.of("u1", "a", "p")
    record_derivation(conn, Derivation(
        "reflect_insights", ref, "ok", run_id="run_1", inputs=["ep_20261012_0001"],
        outputs=["in_20261012_0001"], provider="openai", model="m", prompt_tokens=10,
        completion_tokens=5, duration_ms=42))
    record_derivation(conn, Derivation("reflect_insights", ref, "failed", error="boom"))
    raw = sqlite3.connect(dbmod.db_path(tmp_path))
    rows = raw.execute("SELECT strategy, status, outputs, owner_id FROM derivation_report "
                       "ORDER BY created_at").fetchall()
    assert rows == [("reflect_insights", "ok", '["in_20261012_0001"]', "u1"),
                    ("reflect_insights", "failed", "[]", "u1")]
    newest = list_derivations(conn, strategy="reflect_insights", ref=ref, limit=1)
    assert [(r["status"], r["error"], r["outputs"]) for r in newest] == [("failed", "boom", [])]


# -- a failed unit's audit row says what its LLM calls cost ----------------------------------


def test_a_cluster_whose_facts_call_failed_records_the_tokens_its_calls_spent(
    tmp_path: Path,
) -> None:
    # The merge call answered (100 + 40 tokens), the facts call was refused after one reply
    # (30 + 5): the cluster's `failed` row said nothing of either, though both were paid for.
    from everos_reflect.errors import ProviderUnavailable
    from everos_reflect.llm.base import MergeResult, ScriptedLLM, Usage
    from tests.reflect_fixtures import make_runtime, reports, run_reflection, seed_pets

    refused = ProviderUnavailable("unusable reply: 'facts' must be a list")
    refused.usage = Usage(30, 5)
    llm = ScriptedLLM([MergeResult("Pets", "Andrew has two dogs.", Usage(100, 40))], [refused])
    rt = make_runtime(tmp_path, llm)
    try:
        seed_pets(rt)
        assert run_reflection(rt)["failed"] == 1
        (row,) = reports(rt)
        assert (row["status"], row["prompt_tokens"], row["completion_tokens"]) == (
            "failed", 130, 45)
        assert "'facts' must be a list" in row["error"]
    finally:
        rt.close()


def test_a_cluster_whose_merge_call_failed_records_the_refused_replies_tokens(
    tmp_path: Path,
) -> None:
    from everos_reflect.errors import ProviderUnavailable
    from everos_reflect.llm.base import ScriptedLLM, Usage
    from tests.reflect_fixtures import make_runtime, reports, run_reflection, seed_pets

    refused = ProviderUnavailable("unusable reply (gave up after 3 attempt(s))")
    refused.usage = Usage(300, 60)
    rt = make_runtime(tmp_path, ScriptedLLM([refused]))
    try:
        seed_pets(rt)
        run_reflection(rt)
        (row,) = reports(rt)
        assert (row["status"], row["prompt_tokens"], row["completion_tokens"]) == (
            "failed", 300, 60)
    finally:
        rt.close()


def test_a_tier_window_whose_second_call_failed_records_both_calls_tokens(
    tmp_path: Path,
) -> None:
    # learn_lessons asks one call per task type: "backup" answered (50 + 20 tokens), then
    # "deploy" failed after a refused reply (7 + 3). The window's `failed` row said 0 and 0.
    from everos_reflect.embedding.base import HashEmbedder
    from everos_reflect.engine.registry import RunContext, validate_strategy_settings
    from everos_reflect.errors import ProviderUnavailable
    from everos_reflect.llm.base import ScriptedLLM, Usage
    from everos_reflect.llm.tasks import TaskResult
    from everos_reflect.model import Kind
    from everos_reflect.procedural.tasks import new_task
    from everos_reflect.runtime import Runtime
    from everos_reflect.strategies.lessons import NAME, LearnLessons

    ref = UserRef.of("u_ops")
    refused = ProviderUnavailable("unusable reply: 'lessons' must be a list")
    refused.usage = Usage(7, 3)
    llm = ScriptedLLM(tasks={"lessons": [
        TaskResult({"lessons": ["Verify the backup."], "avoid": []}, Usage(50, 20),
                   "scripted", "scripted-v1"), refused]})
    rt = Runtime(tmp_path, embedder=HashEmbedder(64), llm=llm)
    try:
        for day, kind in ((1, "backup"), (2, "deploy")):
            t = new_task(ref, task_type=kind, goal=f"Do the {kind}", steps=["go"],
                         outcome="success", timestamp=f"2026-10-0{day}T10:00:00+00:00")
            rt.store.append(ref, Kind.TASK, t.meta, t.sections, day=t.day)
        values = validate_strategy_settings(NAME, {}, "ome.toml")
        counts = LearnLessons().run(RunContext(rt, values, "run_t", "test"))
        assert counts["failed"] == 1
        (row,) = list_derivations(rt.db(), strategy=NAME)
        assert (row["status"], row["prompt_tokens"], row["completion_tokens"]) == (
            "failed", 57, 23)
        assert (row["provider"], row["model"]) == ("scripted", "scripted-v1")
    finally:
        rt.close()


def test_a_revalidation_whose_reply_was_refused_records_its_tokens(
    root: Path, fake_openai: Any,
) -> None:
    import json

    from everos_reflect.strategies.revalidate import NAME
    from tests.test_provenance import DEV, setup
    from tests.test_revalidate import merged, run, with_openai

    rt, eps, _first, _second = setup(root)
    merged(rt, eps)
    fake_openai.script(json.dumps({"verdict": "maybe"}), json.dumps({"verdict": "maybe"}))
    counts = run(with_openai(rt, fake_openai))
    assert counts["failed"] >= 1
    rows = [r for r in list_derivations(rt.db(), strategy=NAME) if r["status"] == "failed"]
    assert rows and all((r["prompt_tokens"], r["completion_tokens"], r["model"])
                        == (11, 7, "fake-model") for r in rows)
    assert DEV.user_id == rows[0]["owner_id"]
