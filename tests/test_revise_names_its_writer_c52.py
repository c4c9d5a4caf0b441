"""A revision names the provider that wrote it: ``revalidate_insights``' "revise" copied the
old insight's metadata, ``provider`` with it, so an offline topic insight revised by a model
was listed as ``provider: extractive`` (and read as an offline count by the next offline run's
``supersede_topics`` when its text kept the count's wording)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from everos_reflect.engine.registry import RunContext, validate_strategy_settings
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ScriptedLLM
from everos_reflect.llm.tasks import TaskRequest
from everos_reflect.strategies.insight_views import list_insights
from everos_reflect.strategies.revalidate import NAME, RevalidateInsights
from tests.test_provenance import DEV, edit_file, setup


def every(verdict: str, text: str = "") -> Any:
    def reply(req: TaskRequest) -> dict[str, Any]:
        return {"verdict": verdict, "insight": text,
                "evidence": list(range(1, len(req.records) + 1))}
    return reply


def test_a_revision_carries_the_provider_that_wrote_it(root: Path) -> None:
    rt, eps, first, _second = setup(root)
    try:
        rt.store.update_meta(DEV, first.id, {"provider": "extractive"})
        edit_file(rt.store.path_for_id(DEV, eps[1].id), "on day 16", "on day 17")
        Indexer(rt).scan()
        llm = ScriptedLLM(provider="openai", model="m1")
        rt.__dict__["llm"] = llm
        llm.queue_task("revalidation", every("revise", "The user reverted auth changes on "
                                                       "days 2, 17 and 30."),
                       every("holds"))
        values = validate_strategy_settings(NAME, {"enabled": True}, "ome.toml")
        counts = RevalidateInsights().run(RunContext(rt, values, "run_p", "manual",
                                                     force=True))
        assert counts["revised"] == 1
        revision = rt.store.get(DEV, rt.store.get(DEV, first.id).deprecated_by)
        assert revision.meta["provider"] == "openai"
        listed = {r["id"]: r for r in list_insights(rt, DEV)}
        assert listed[revision.id]["provider"] == "openai"
    finally:
        rt.close()
