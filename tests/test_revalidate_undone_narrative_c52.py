"""An insight citing a merged narrative whose merge was undone (``deprecated_by: undone``):
the narrative stands for the sources the undo restored, so ``revalidate_insights`` asks about
the insight on those, not "fewer than 2 cited records remain".

Before, the undone narrative was dropped like a deleted record: an insight citing it and one
other record was retired on the next run with no model asked (offline too), though every
Episode the narrative summed up was live again."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.engine.registry import RunContext, validate_strategy_settings
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM, ScriptedLLM
from everos_reflect.llm.tasks import TaskRequest
from everos_reflect.model import Entry, Kind
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import provenance
from everos_reflect.strategies.revalidate import NAME, RevalidateInsights, current_evidence
from everos_reflect.strategies.undo import undo_merge
from tests.test_undo import REF, SETTINGS, merge, pets

pytestmark = pytest.mark.usefixtures("settle_at_once")


def run(rt: Runtime) -> dict[str, int]:
    values = validate_strategy_settings(NAME, {"enabled": True}, "ome.toml")
    return RevalidateInsights().run(RunContext(rt, values, "run_u", "manual", force=True))


def undone(root: Path, llm: Any) -> tuple[Runtime, list[Entry], Entry, Entry]:
    """Three pet Episodes merged into a narrative, an insight citing the narrative and the
    taxes Episode, then the merge undone: the insight is stale."""
    rt = Runtime(root, SETTINGS, embedder=HashEmbedder(64), llm=llm)
    eps = pets(rt)
    narrative = merge(rt, eps, "Andrew has two dogs, Toby and Buddy.", day=date(2026, 8, 20))
    taxes = next(e for e in rt.store.entries(REF, Kind.EPISODE) if "tax" in e.content)
    insight = rt.store.append(REF, Kind.INSIGHT, {
        "evidence": [narrative.id, taxes.id], "depth": 1, "status": "active",
        "insight_type": "reflection", "derivation": "dw_pets",
        "evidence_hash": {e.id: e.text_hash for e in (narrative, taxes)}},
        {"Insight": "Andrew's home life changed over the summer."}, derived=True)
    Indexer(rt).scan()
    undo_merge(rt, REF, narrative.id)
    Indexer(rt).scan()
    assert rt.store.get(REF, narrative.id).deprecated_by == "undone"
    assert rt.store.get(REF, insight.id).meta["status"] == "stale"
    return rt, eps, taxes, insight


def test_the_undone_narrative_stands_for_its_restored_sources(root: Path) -> None:
    rt, eps, taxes, insight = undone(root, ExtractiveLLM())
    try:
        records = provenance.load_records(rt, REF)
        assert [e.id for e in current_evidence(records[insight.id], records)] == [
            *(e.id for e in eps), taxes.id]
    finally:
        rt.close()


def test_offline_the_insight_waits_for_a_model_instead_of_being_retired(root: Path) -> None:
    rt, _eps, _taxes, insight = undone(root, ExtractiveLLM())
    try:
        counts = run(rt)
        assert counts.get("retired", 0) == 0 and counts["needs_llm"] == 1
        assert rt.store.get(REF, insight.id).meta["status"] == "stale"
    finally:
        rt.close()


def test_holds_re_points_the_insight_to_the_restored_episodes(root: Path) -> None:
    llm = ScriptedLLM()
    rt, eps, taxes, insight = undone(root, llm)

    def holds(req: TaskRequest) -> dict[str, Any]:
        return {"verdict": "holds", "insight": "",
                "evidence": list(range(1, len(req.records) + 1))}

    llm.queue_task("revalidation", holds)
    try:
        counts = run(rt)
        assert counts["kept"] == 1 and counts.get("retired", 0) == 0
        (name, req), = llm.task_requests
        assert name == "revalidation"
        assert {r.id for r in req.records} == {*(e.id for e in eps), taxes.id}
        kept = rt.store.get(REF, insight.id)
        assert kept.meta["status"] == "active"
        assert set(kept.meta["evidence"]) == {*(e.id for e in eps), taxes.id}
    finally:
        rt.close()
