"""Run limits enforced by the engine for every strategy (engine/limits.py): a run that reaches
one stops between units, its record says ``partial`` and which limit, and the rest waits for
the next run. Derived tiers are covered in test_insights.py and test_belief_tiers.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.engine.engine import Engine
from everos_reflect.engine.limits import Budget, MeteredLLM
from everos_reflect.llm import ExtractiveLLM, ScriptedLLM
from everos_reflect.llm.base import FactsRequest, FactsResult, Usage
from everos_reflect.model import Kind
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.reflect import NAME
from tests.reflect_fixtures import ANDREW, add_episode, make_runtime, reports

pytest_plugins = ["tests.fake_openai"]

TOPICS = (("climbing", 4, 4), ("sourdough", 7, 3), ("garden", 10, 2))  # word, month, size


def seeded(root: Path, llm: ScriptedLLM, ome: str, concurrency: int = 2) -> Runtime:
    (root / "ome.toml").write_text(f"[strategies.{NAME}]\n{ome}\n")
    rt = make_runtime(root, llm, window_days=10, max_concurrency=concurrency)
    for word, month, n in TOPICS:
        for day in range(1, n + 1):
            add_episode(rt, ANDREW, f"2026-{month:02d}-{day:02d}T10:00:00+00:00",
                        f"Andrew {word} update {day}",
                        f"Andrew talked about his {word} plans again. The {word} note {day}.")
    return rt


def merged_sources(rt: Runtime) -> list[int]:
    return [len(r["source_members"]) for r in reports(rt) if r["status"] == "ok"]


def test_reflection_stops_between_clusters_at_max_llm_calls(root: Path) -> None:
    llm = ScriptedLLM(fallback=ExtractiveLLM())
    rt = seeded(root, llm, "max_llm_calls = 4")
    outcome = Engine(rt).trigger(NAME, force=True, timeout=120)
    assert outcome.status == "partial", outcome
    assert outcome.error == "stopped early: max_llm_calls (4) reached"
    assert outcome.counts["merged"] == 2 and outcome.counts["limit_reached"] == 1
    assert len(llm.merge_requests) + len(llm.facts_requests) == 4  # never past the limit
    assert len(merged_sources(rt)) == 2  # the third cluster waits for the next run
    row = Engine(rt).last_run(NAME)
    assert row["status"] == "partial" and "max_llm_calls (4)" in row["error"]
    outcome = Engine(rt).trigger(NAME, force=True, timeout=120)
    assert outcome.status == "ok" and outcome.counts["merged"] == 1
    assert len(merged_sources(rt)) == 3 and sum(merged_sources(rt)) == 9


def test_reflection_stops_once_past_max_records(root: Path) -> None:
    rt = seeded(root, ScriptedLLM(fallback=ExtractiveLLM()), "max_records = 3")
    outcome = Engine(rt).trigger(NAME, force=True, timeout=120)
    assert outcome.status == "partial"
    assert outcome.error == "stopped early: max_records (3) reached"
    assert merged_sources(rt) == [4]  # one cluster of 4 sources passed 3: no second one


def test_reflection_stops_once_past_max_tokens(root: Path) -> None:
    class Costly(ScriptedLLM):
        def extract_facts(self, req: FactsRequest) -> FactsResult:
            facts = ExtractiveLLM().extract_facts(req).facts
            return FactsResult(facts, Usage(prompt_tokens=60, completion_tokens=40))

    # one cluster at a time, so the check before each sees every earlier cluster's tokens
    rt = seeded(root, Costly(fallback=ExtractiveLLM()), "max_tokens = 150", concurrency=1)
    outcome = Engine(rt).trigger(NAME, force=True, timeout=120)
    assert outcome.status == "partial"
    assert outcome.error == "stopped early: max_tokens (150) reached"
    assert len(merged_sources(rt)) == 2  # 100 tokens < 150: a second one; 200: no third


def test_offline_reflection_is_not_limited_by_llm_calls(root: Path) -> None:
    rt = seeded(root, ExtractiveLLM(), "max_llm_calls = 1")  # type: ignore[arg-type]
    outcome = Engine(rt).trigger(NAME, force=True, timeout=120)
    assert outcome.status == "ok" and outcome.counts["merged"] == 3  # no model was asked


def test_the_metered_llm_charges_failed_calls_too() -> None:
    from everos_reflect.errors import ProviderUnavailable

    budget = Budget(max_llm_calls=2)
    llm = MeteredLLM(ScriptedLLM(facts=[ProviderUnavailable("down"), ["A fact."]]), budget)
    with pytest.raises(ProviderUnavailable):
        llm.extract_facts(FactsRequest(text="x"))
    llm.extract_facts(FactsRequest(text="x"))
    assert budget.llm_calls == 2 and budget.exceeded() == "max_llm_calls (2) reached"
    assert budget.hit == "max_llm_calls (2) reached"


def test_a_run_without_a_limit_reached_is_not_partial(root: Path) -> None:
    rt = seeded(root, ScriptedLLM(fallback=ExtractiveLLM()), "max_llm_calls = 6")
    outcome = Engine(rt).trigger(NAME, force=True, timeout=120)
    assert outcome.status == "ok" and outcome.error is None
    assert outcome.counts["merged"] == 3 and "limit_reached" not in outcome.counts
    assert len([e for e in rt.store.entries(ANDREW, Kind.EPISODE)
                if e.parent_type == "cluster"]) == 3


def test_tokens_of_replies_refused_as_unusable_are_charged_to_the_run(fake_openai) -> None:
    # A call whose every reply was refused raised ProviderUnavailable and the tokens of those
    # replies (paid for) were dropped: a model answering 10,000-token garbage never brought a
    # run to max_tokens, which then stopped nothing however much it spent.
    from everos_reflect.errors import ProviderUnavailable
    from everos_reflect.llm.openai_llm import OpenAILLM

    garbage = fake_openai.Reply("not JSON at all", prompt_tokens=100, completion_tokens=10_000)
    fake_openai.script(garbage, garbage, garbage)
    client = OpenAILLM(model="m", base_url=fake_openai.base_url, api_key="k", max_retries=2,
                       timeout_seconds=5, sleep=lambda s: None)
    budget = Budget(max_tokens=25_000)
    with pytest.raises(ProviderUnavailable):
        MeteredLLM(client, budget).extract_facts(FactsRequest(text="Ann adopted a cat."))
    assert budget.tokens == 3 * 10_100
    assert budget.spent() == "max_tokens (25000) reached"
