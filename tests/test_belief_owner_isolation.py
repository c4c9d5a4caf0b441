"""One owner's unexpected error (an OSError writing its log, a bug a hand-edited record trips)
fails that owner alone: the owners after it are still run, the run record is ``partial`` and
names the owner, ``trigger`` exits 3 (1 when every owner failed), and the failed owner's window
waits for the next run. Through the real ``openai`` client and the loopback fake server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from everos_reflect.cli import engine_cmds
from everos_reflect.cli.main import cli
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.engine.engine import Engine
from everos_reflect.engine.registry import get_strategy
from everos_reflect.index.audit import list_derivations
from everos_reflect.llm.openai_llm import OpenAILLM
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from everos_reflect.strategies import belief_store, belief_views

pytest_plugins = ["tests.fake_openai"]

ADA, BOB, CY = UserRef.of("ada"), UserRef.of("bob"), UserRef.of("cy")
TIERS = ("update_worldview", "detect_contradictions", "reconcile")
RISK = {"convictions": [{"key": "risks", "text": "Shipping past review.", "evidence": [1, 2]}]}


@pytest.fixture
def rt(root: Path, fake_openai: Any) -> Iterator[Runtime]:
    (root / "ome.toml").write_text("".join(
        f"[strategies.{n}]\nenabled = true\ncooldown_seconds = 0\n" for n in TIERS))
    llm = OpenAILLM(model="fake-model", base_url=fake_openai.base_url, api_key="k",
                    max_retries=0, timeout_seconds=10, sleep=lambda s: None)
    runtime = Runtime(root, Settings(), embedder=HashEmbedder(32), llm=llm)
    yield runtime
    runtime.close()


def add_insights(rt: Runtime, ref: UserRef, *texts: str) -> None:
    (ep,) = rt.store.append_many(ref, Kind.EPISODE, [(
        {"timestamp": "2026-10-12T09:00:00+00:00", "parent_type": "memcell",
         "parent_id": "mc_1"},
        {"Subject": "Payments", "Content": "Merged the payments fix without review."})])
    rt.store.append_many(ref, Kind.INSIGHT, [(
        {"evidence": [ep.id, ep.id], "depth": 1, "status": "active"}, {"Insight": t})
        for t in texts])


def trigger_cli(monkeypatch: pytest.MonkeyPatch, rt: Runtime, name: str) -> Any:
    monkeypatch.setattr(engine_cmds, "open_runtime", lambda root: rt)
    return CliRunner().invoke(cli, ["trigger", name, "--json", "--root", str(rt.root)])


def rows(rt: Runtime, name: str, ref: UserRef) -> list[dict[str, Any]]:
    return [r for r in list_derivations(rt.db(), strategy=name)
            if r["owner_id"] == ref.user_id]


def test_an_oserror_writing_one_owners_log_fails_that_owner_alone(
        rt: Runtime, fake_openai: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    for ref in (ADA, BOB, CY):
        add_insights(rt, ref, "One.", "Two.", "Three.")
    real = rt.store.append_many

    def append_many(ref: UserRef, kind: Kind, rows: Any, **options: Any) -> Any:
        if ref == BOB and kind is Kind.CONVICTION:
            raise OSError(28, "No space left on device")
        return real(ref, kind, rows, **options)

    monkeypatch.setattr(rt.store, "append_many", append_many)
    fake_openai.script(RISK, RISK, RISK)

    result = trigger_cli(monkeypatch, rt, "update_worldview")

    assert result.exit_code == 3, result.output  # partial
    answer = json.loads(result.stdout)
    assert answer["status"] == "partial"
    assert answer["counts"] == {"owners": 2, "written": 2, "failed": 1}
    assert "default_app/default_project/bob: No space left on device" in answer["error"]
    assert "OSError" not in answer["error"] and "Errno" not in answer["error"]
    assert Engine(rt).last_run("update_worldview")["error"] == answer["error"]
    # ada before bob and cy after him both got their conviction; bob got none
    assert [r["key"] for r in belief_views.worldview(rt, ADA)] == ["risks"]
    assert [r["key"] for r in belief_views.worldview(rt, CY)] == ["risks"]
    assert belief_views.worldview(rt, BOB) == []
    (row,) = rows(rt, "update_worldview", BOB)
    assert row["status"] == "failed" and row["error"] == "No space left on device"
    # bob's window waits for the next run, which writes his conviction once
    monkeypatch.setattr(rt.store, "append_many", real)
    assert get_strategy("update_worldview").observe(rt, None) == 1
    fake_openai.script(RISK)
    outcome = Engine(rt).trigger("update_worldview", timeout=60)
    assert outcome.status == "ok", outcome
    assert outcome.counts.get("owners") == 1
    assert [r["key"] for r in belief_views.worldview(rt, BOB)] == ["risks"]
    assert len(rt.store.entries(BOB, Kind.CONVICTION)) == 1


def test_a_write_that_fails_halfway_is_settled_by_the_next_run_as_a_crash_is(
        rt: Runtime, fake_openai: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The conviction was appended, the index sync after it raised: the next run's recovery
    finds it by its window's key, indexes it and consumes the window; nothing is written
    twice."""
    add_insights(rt, ADA, "One.", "Two.", "Three.")
    real_sync = belief_store.sync
    calls = {"n": 0}

    def sync(runtime: Runtime, paths: Any) -> None:
        calls["n"] += 1
        raise RuntimeError("index writer crashed")

    monkeypatch.setattr("everos_reflect.strategies.worldview.sync", sync)
    fake_openai.script(RISK)
    outcome = Engine(rt).trigger("update_worldview", timeout=60)
    assert outcome.status == "failed", outcome
    assert "ada: index writer crashed" in (outcome.error or "")
    assert "RuntimeError" not in (outcome.error or "")
    assert calls["n"] == 1 and len(rt.store.entries(ADA, Kind.CONVICTION)) == 1

    monkeypatch.setattr("everos_reflect.strategies.worldview.sync", real_sync)
    outcome = Engine(rt).trigger("update_worldview", timeout=60)  # no LLM call scripted
    assert outcome.status == "ok", outcome
    assert outcome.counts == {"recovered": 1}
    assert len(rt.store.entries(ADA, Kind.CONVICTION)) == 1
    assert get_strategy("update_worldview").observe(rt, None) == 0
    assert [r["status"] for r in rows(rt, "update_worldview", ADA)] == ["ok", "failed"]


def test_a_bug_reading_one_owner_skips_that_owner_alone_and_every_owner_failing_exits_1(
        rt: Runtime, fake_openai: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The detector: a hand-edited record of bob's trips a bug while his state is read (before
    any call); ada and cy are still compared. When every owner trips it the run failed."""
    for ref in (ADA, BOB, CY):
        add_insights(rt, ref, "One.", "Two.", "Three.")
    two = {"convictions": [
        {"key": "risks", "text": "Shipping past review.", "evidence": [1]},
        {"key": "principles", "text": "Reliability before velocity.", "evidence": [2]}]}
    fake_openai.script(two, two, two)
    assert Engine(rt).trigger("update_worldview", timeout=60).status == "ok"
    real_load = belief_store.BeliefState.load.__func__  # type: ignore[attr-defined]
    broken = {BOB}

    def load(cls: type, runtime: Runtime, ref: UserRef) -> Any:
        if ref in broken:
            raise TypeError("unhashable type: 'list'")
        return real_load(cls, runtime, ref)

    monkeypatch.setattr(belief_store.BeliefState, "load", classmethod(load))
    edge = {"contradictions": [{"between": [1, 2], "text": "Speed against reliability."}]}
    fake_openai.script(edge, edge)

    result = trigger_cli(monkeypatch, rt, "detect_contradictions")

    assert result.exit_code == 3, result.output
    answer = json.loads(result.stdout)
    assert answer["counts"] == {"owners": 2, "written": 2, "failed": 1}
    assert "bob: internal error (TypeError: unhashable type: 'list')" in answer["error"]
    assert len(belief_views.relations(rt, ADA)) == len(belief_views.relations(rt, CY)) == 1
    assert belief_views.relations(rt, BOB) == []
    (row,) = rows(rt, "detect_contradictions", BOB)
    assert row["status"] == "failed" and "TypeError" in row["error"]
    # the scheduler's poll still sees the others' news past bob's broken records
    add_insights(rt, CY, "Four.", "Five.", "Six.")
    fake_openai.script({"convictions": [
        {"key": "risks", "text": "Skipping review to hold dates.", "evidence": [1]}]})
    assert Engine(rt).trigger("update_worldview", timeout=60).status == "partial"
    assert get_strategy("detect_contradictions").observe(rt, None) == 1

    broken |= {ADA, CY}
    result = trigger_cli(monkeypatch, rt, "detect_contradictions")
    assert result.exit_code == 1, result.output
    answer = json.loads(result.stdout)
    assert answer["status"] == "failed" and answer["counts"] == {"failed": 3}
    assert all(f"{u}: internal error (TypeError" in answer["error"] for u in ("ada", "bob", "cy"))


def test_an_interrupted_commit_recovery_cannot_settle_holds_up_that_owner_alone(
        rt: Runtime, fake_openai: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """ada's conviction was written and the index sync after it raised (her commit intent is
    kept for recovery); then a hand edit trips a bug reading her records. The recovery hook
    reads them first: raised from there, it failed the whole run before any owner was looked
    at, run after run, and bob's new window waited as long as ada's records stayed broken."""
    add_insights(rt, ADA, "One.", "Two.", "Three.")
    add_insights(rt, BOB, "One.", "Two.", "Three.")
    real_sync = belief_store.sync

    def sync(runtime: Runtime, paths: Any) -> None:
        if any("/ada/" in str(p) for p in paths):
            raise RuntimeError("index writer crashed")
        real_sync(runtime, paths)

    monkeypatch.setattr("everos_reflect.strategies.worldview.sync", sync)
    fake_openai.script(RISK, RISK)
    outcome = Engine(rt).trigger("update_worldview", timeout=60)
    assert outcome.status == "partial", outcome
    assert len(rt.store.entries(ADA, Kind.CONVICTION)) == 1
    monkeypatch.setattr("everos_reflect.strategies.worldview.sync", real_sync)

    real_load = belief_store.BeliefState.load.__func__  # type: ignore[attr-defined]

    def load(cls: type, runtime: Runtime, ref: UserRef) -> Any:
        if ref == ADA:
            raise TypeError("unhashable type: 'list'")
        return real_load(cls, runtime, ref)

    monkeypatch.setattr(belief_store.BeliefState, "load", classmethod(load))
    add_insights(rt, BOB, "Four.", "Five.", "Six.")
    fake_openai.script({"convictions": [
        {"key": "risks", "text": "Skipping review to hold dates.", "evidence": [1]}]})
    outcome = Engine(rt).trigger("update_worldview", timeout=60)
    assert outcome.status == "partial", outcome
    assert outcome.counts == {"owners": 1, "written": 1, "failed": 1}, outcome
    assert "ada: internal error (TypeError: unhashable type: 'list')" in (outcome.error or "")
    assert len(rt.store.entries(BOB, Kind.CONVICTION)) == 2

    monkeypatch.setattr(belief_store.BeliefState, "load", classmethod(real_load))
    outcome = Engine(rt).trigger("update_worldview", timeout=60)  # no call scripted
    assert outcome.status == "ok", outcome
    assert outcome.counts == {"recovered": 1}, outcome
    assert len(rt.store.entries(ADA, Kind.CONVICTION)) == 1  # never written twice
    assert get_strategy("update_worldview").observe(rt, None) == 0
