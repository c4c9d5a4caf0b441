"""A conviction made stale by its evidence (an insight it cites revised, archived into the
revision) left its key empty: the worldview and the briefing dropped the slot, and nothing
brought it back. ``update_worldview`` showed the model "(none yet)" for that key, and a model
restating the same conviction on the revision was taken as "no shift" and wrote nothing.

Now the newest stale version of a key with no live one is shown among the current
convictions, marked stale with its reason, and a proposal for that key is a new version
that archives it, also when its text is the same."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ScriptedLLM
from everos_reflect.llm.tasks import TaskRequest
from everos_reflect.model import Entry, Kind
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from everos_reflect.strategies import belief_views
from tests.test_belief_tiers import ADA, ome, run

RISK = "Friday deploys are a risk."


@pytest.fixture
def llm() -> ScriptedLLM:
    return ScriptedLLM()


@pytest.fixture
def rt(root: Path, llm: ScriptedLLM) -> Iterator[Runtime]:
    ome(root)
    runtime = Runtime(root, Settings(), embedder=HashEmbedder(32), llm=llm)
    yield runtime
    runtime.close()


def stale_risk(rt: Runtime) -> tuple[Entry, Entry, Entry]:
    """A ``risks`` conviction citing an insight that a revision then archived."""
    ep = rt.store.append(ADA, Kind.EPISODE, {"timestamp": "2026-10-12T09:00:00+00:00",
                                             "parent_type": "memcell"},
                         {"Subject": "Deploy", "Content": "Deploy failed again on Friday."})
    old = rt.store.append(ADA, Kind.INSIGHT, {
        "timestamp": "2026-10-12T09:00:00+00:00", "evidence": [ep.id, ep.id], "depth": 1,
        "status": "active", "derivation": "dw_i", "evidence_hash": {ep.id: ep.text_hash}},
        {"Insight": "Deploys fail on Fridays."}, derived=True)
    wv = rt.store.append(ADA, Kind.CONVICTION, {
        "timestamp": "2026-10-12T10:00:00+00:00", "key": "risks", "evidence": [old.id],
        "depth": 2, "status": "active", "derivation": "dw_w",
        "evidence_hash": {old.id: old.text_hash}}, {"Conviction": RISK}, derived=True)
    revision = rt.store.append(ADA, Kind.INSIGHT, {
        "timestamp": "2026-10-13T09:00:00+00:00", "evidence": [ep.id, ep.id], "depth": 1,
        "status": "active", "derivation": "rv_x", "revises": old.id},
        {"Insight": "Deploys fail on Fridays and before holidays."}, derived=True)
    rt.store.deprecate(ADA, {old.id: revision.id})
    for text in ("Rollbacks take an hour.", "On-call is thin on Fridays."):
        rt.store.append(ADA, Kind.INSIGHT, {
            "timestamp": "2026-10-13T10:00:00+00:00", "evidence": [ep.id, ep.id],
            "depth": 1, "status": "active", "derivation": "dw_j"}, {"Insight": text},
            derived=True)
    Indexer(rt).scan()
    assert rt.store.get(ADA, wv.id).meta["status"] == "stale"
    assert belief_views.worldview(rt, ADA) == []
    return wv, old, revision


def restate(seen: list[str], text: str = RISK) -> Any:
    def reply(req: TaskRequest) -> dict[str, Any]:
        seen.append(req.values["current"])
        n = next(i for i, r in enumerate(req.records, start=1) if "holidays" in r.text)
        return {"convictions": [{"key": "risks", "text": text, "evidence": [n]}]}
    return reply


def test_the_stale_slot_is_shown_and_restating_it_writes_a_new_version(
        rt: Runtime, llm: ScriptedLLM) -> None:
    wv, _old, revision = stale_risk(rt)
    seen: list[str] = []
    llm.queue_task("worldview", restate(seen))
    assert run(rt, "update_worldview")["written"] == 1
    (current,) = seen
    assert "risks" in current and RISK in current and "stale" in current
    (row,) = belief_views.worldview(rt, ADA)
    assert row["key"] == "risks" and row["text"] == RISK and row["status"] == "active"
    assert row["evidence"] == [revision.id] and row["supersedes"] == wv.id
    assert rt.store.get(ADA, wv.id).deprecated_by == row["id"]


def test_a_shifted_text_replaces_the_stale_version_too(rt: Runtime, llm: ScriptedLLM) -> None:
    wv, _old, _revision = stale_risk(rt)
    llm.queue_task("worldview", restate([], "Friday and pre-holiday deploys are a risk."))
    assert run(rt, "update_worldview")["written"] == 1
    (row,) = belief_views.worldview(rt, ADA)
    assert row["supersedes"] == wv.id
    assert rt.store.get(ADA, wv.id).deprecated_by == row["id"]


def test_worldview_history_and_relations_say_why_a_record_is_stale(rt: Runtime) -> None:
    wv, old, revision = stale_risk(rt)
    (row,) = belief_views.worldview(rt, ADA, history=True)
    assert row["status"] == "stale"
    assert row["stale_reason"] == f"evidence {old.id} was archived (replaced by {revision.id})"
    other = rt.store.append(ADA, Kind.CONVICTION, {
        "timestamp": "2026-10-13T10:00:00+00:00", "key": "strategy", "evidence": [revision.id],
        "depth": 2, "status": "active"}, {"Conviction": "Ship on Fridays."})
    edge = rt.store.append(ADA, Kind.RELATION, {
        "relation_type": "self_contradiction", "between": [wv.id, other.id],
        "evidence": [wv.id, other.id], "depth": 3, "status": "stale",
        "stale_reason": f"evidence {wv.id} is stale"}, {"Relation": "Risk versus plan."})
    (listed,) = belief_views.relations(rt, ADA)
    assert listed["id"] == edge.id and listed["stale_reason"] == f"evidence {wv.id} is stale"
    (live,) = [r for r in belief_views.worldview(rt, ADA, history=True) if r["key"] == "strategy"]
    assert "stale_reason" not in live
