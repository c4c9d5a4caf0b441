"""revalidate_insights killed after a verdict's Markdown write, before its audit row: the
revision stood (the old insight archived into it), or the insight was active or retired
again, with no derivation_report row, and nothing ever wrote one (the insight is no longer
stale, so no run looks at it). The verdict is now noted before the write and the next start
records what was written, or withdraws a verdict that wrote nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.index import cursors
from everos_reflect.index.audit import list_derivations
from everos_reflect.model import Kind
from everos_reflect.strategies.revalidate import NAME, RevalidateInsights
from tests.test_provenance import DEV, setup
from tests.test_revalidate import merged, run, with_openai

pytest_plugins = ["tests.fake_openai"]


def _killed_at(root: Path, fake_openai: Any, monkeypatch: pytest.MonkeyPatch, reply: str,
               target: str) -> tuple[Any, Any]:
    """A run whose model answers ``reply``, killed at ``target`` (a dotted path, or
    ``store.<method>`` for the run's store); the runtime and the stale insight asked about."""
    from tests.reflect_fixtures import Crash

    rt, eps, first, _second = setup(root)
    merged(rt, eps)
    fake_openai.script(reply)

    def crash(*args: object, **kwargs: object) -> None:
        raise Crash("the process dies here")

    with monkeypatch.context() as patch:
        if target.startswith("store."):
            patch.setattr(rt.store, target.removeprefix("store."), crash)
        else:
            patch.setattr(target, crash)
        with pytest.raises(Crash):
            run(with_openai(rt, fake_openai))
    return rt, first


def test_a_revise_killed_before_its_audit_row_still_gets_one(
        root: Path, fake_openai: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    text = "The user reverted auth changes three times."
    rt, first = _killed_at(root, fake_openai, monkeypatch, json.dumps(
        {"verdict": "revise", "insight": text, "evidence": [1, 2]}),
        "everos_reflect.strategies.revalidate.sync")
    (written,) = [e for e in rt.store.entries(DEV, Kind.INSIGHT)
                  if e.meta.get("revises") == first.id]
    assert rt.store.get(DEV, first.id).deprecated_by == written.id

    assert RevalidateInsights().recover(rt) == {"recovered": 1}  # the engine calls it first
    rows = [r for r in list_derivations(rt.db(), strategy=NAME) if r["inputs"] == [first.id]]
    assert [(r["status"], r["outputs"]) for r in rows] == [("ok", [written.id])]
    assert "recovered" in rows[0]["error"]
    assert RevalidateInsights().recover(rt) == {}  # settled once


@pytest.mark.parametrize("verdict", ["holds", "retire"])
def test_a_keep_or_retire_killed_before_its_audit_row_still_gets_one(
        root: Path, fake_openai: Any, monkeypatch: pytest.MonkeyPatch, verdict: str) -> None:
    rt, first = _killed_at(root, fake_openai, monkeypatch, json.dumps(
        {"verdict": verdict, "insight": "", "evidence": [1, 2]}),
        "everos_reflect.strategies.revalidate.sync")
    status = rt.store.get(DEV, first.id).meta["status"]
    assert status == {"holds": "active", "retire": "retired"}[verdict]

    assert RevalidateInsights().recover(rt) == {"recovered": 1}
    rows = [r for r in list_derivations(rt.db(), strategy=NAME) if r["inputs"] == [first.id]]
    assert [(r["status"], r["outputs"]) for r in rows] == [("ok", [first.id])]


def test_a_verdict_killed_before_its_write_is_withdrawn_and_asked_again(
        root: Path, fake_openai: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    text = "The user reverted auth changes three times."
    rt, first = _killed_at(root, fake_openai, monkeypatch, json.dumps(
        {"verdict": "revise", "insight": text, "evidence": [1, 2]}), "store.append")

    assert RevalidateInsights().recover(rt) == {}  # withdrawn: nothing to record
    assert cursors.intents(rt.db(), NAME) == []
    assert rt.store.get(DEV, first.id).meta["status"] == "stale"
    assert [r for r in list_derivations(rt.db(), strategy=NAME)
            if r["inputs"] == [first.id]] == []
