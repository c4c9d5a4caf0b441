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
from tests.reflect_fixtures import Crash
from tests.test_provenance import DEV, setup
from tests.test_revalidate import merged, run, with_openai

pytest_plugins = ["tests.fake_openai"]


def _run_killed_at(rt: Any, target: str, monkeypatch: pytest.MonkeyPatch,
                   fake_openai: Any) -> None:
    """Run revalidation against the fake server with ``target`` (a dotted name, or
    ``store.<method>`` for the run's store) raising as a kill would."""

    def crash(*args: object, **kwargs: object) -> None:
        raise Crash("the process dies here")

    with monkeypatch.context() as patch:
        if target.startswith("store."):
            patch.setattr(rt.store, target.removeprefix("store."), crash)
        else:
            patch.setattr(target, crash)
        with pytest.raises(Crash):
            run(with_openai(rt, fake_openai))


def _killed_at(root: Path, fake_openai: Any, monkeypatch: pytest.MonkeyPatch, reply: str,
               target: str) -> tuple[Any, Any]:
    """A run whose model answers ``reply``, killed at ``target`` (a dotted path, or
    ``store.<method>`` for the run's store); the runtime and the stale insight asked about."""
    rt, eps, first, _second = setup(root)
    merged(rt, eps)
    fake_openai.script(reply)
    _run_killed_at(rt, target, monkeypatch, fake_openai)
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


def _merge_killed_at(root: Path, fake_openai: Any, monkeypatch: pytest.MonkeyPatch,
                     target: str) -> tuple[Any, Any, Any]:
    """A "revise" whose text a live insight already states (the stale insight is archived
    into it, nothing new written), killed at ``target``; the runtime, the stale insight and
    the live one."""
    from tests.test_provenance import insight

    rt, eps, first, _second = setup(root)
    other = insight(rt, "The auth refactor keeps getting reverted.", [eps[1], eps[2]])
    merged(rt, eps)
    fake_openai.script(json.dumps({"verdict": "revise", "evidence": [1, 2],
                                   "insight": "The auth refactor keeps getting reverted"}))
    _run_killed_at(rt, target, monkeypatch, fake_openai)
    return rt, first, other


def test_an_archive_into_a_live_insight_killed_before_its_audit_row_still_gets_one(
        root: Path, fake_openai: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    rt, first, other = _merge_killed_at(root, fake_openai, monkeypatch,
                                        "everos_reflect.strategies.revalidate.sync")
    assert rt.store.get(DEV, first.id).deprecated_by == other.id  # written, no row yet

    assert RevalidateInsights().recover(rt) == {"recovered": 1}
    rows = [r for r in list_derivations(rt.db(), strategy=NAME) if r["inputs"] == [first.id]]
    assert [(r["status"], r["outputs"]) for r in rows] == [("ok", [other.id])]
    assert RevalidateInsights().recover(rt) == {}


def test_an_archive_into_a_live_insight_killed_before_its_write_is_withdrawn(
        root: Path, fake_openai: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    rt, first, _other = _merge_killed_at(root, fake_openai, monkeypatch, "store.deprecate")

    assert RevalidateInsights().recover(rt) == {}
    assert cursors.intents(rt.db(), NAME) == []
    entry = rt.store.get(DEV, first.id)
    assert (entry.deprecated_by, entry.meta["status"]) == (None, "stale")


@pytest.mark.parametrize("answer", [
    {"verdict": "holds", "insight": "", "evidence": [1]},  # refused: under the floor
    500,  # not refused, just failed: nothing set aside
    400,  # refused for good: set aside
])
def test_a_verdict_killed_at_its_audit_row_sets_nothing_aside_without_it(
        root: Path, fake_openai: Any, monkeypatch: pytest.MonkeyPatch,
        answer: Any) -> None:
    """A refused verdict (or a call refused for good) sets its insight aside in the cursor:
    killed between that and its row, it was set aside, never asked about again until edited,
    with no row saying why."""
    rt, eps, first, _second = setup(root)
    merged(rt, eps)
    fake_openai.script(answer if isinstance(answer, int) else json.dumps(answer))

    def crash(*args: object, **kwargs: object) -> None:
        raise Crash("the process dies here")

    with monkeypatch.context() as patch:
        patch.setattr("everos_reflect.index.audit.insert_derivation", crash)
        with pytest.raises(Crash):
            run(with_openai(rt, fake_openai))
    assert cursors.consumed(rt.db(), NAME, DEV) == set()  # asked again, as if never asked
    assert rt.store.get(DEV, first.id).meta["status"] == "stale"
