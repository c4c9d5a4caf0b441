"""``revalidate_insights``' run limits bound what a run costs: LLM calls, tokens and wall time
(docs/limits.md: its ``max_records`` is how many records one call shows). Each stale insight
was charged as a record against ``max_records`` (50), so a run stopped after 50 insights even
when none of them needed the model (retired by the citation floor), and a 5,000 backlog took a
hundred runs; and once ``max_llm_calls`` was spent, the insights settled without a call waited
for the next run too."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.engine.engine import Engine
from everos_reflect.index.sync import Indexer
from everos_reflect.llm.base import Usage
from everos_reflect.llm.tasks import TaskResult
from everos_reflect.model import Entry, Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import provenance
from everos_reflect.strategies.revalidate import NAME

OWNER = UserRef.of("u_cost")


class Holds:
    """A model that keeps every insight, citing every record it was shown; counts its calls."""

    provider, model = "test", "holds"

    def __init__(self) -> None:
        self.calls = 0

    def run_task(self, name: str, req: Any) -> TaskResult:
        self.calls += 1
        return TaskResult({"verdict": "holds", "insight": "",
                           "evidence": [r.id for r in req.records]}, Usage(10, 5),
                          self.provider, self.model)


@pytest.fixture
def rt(root: Path) -> Runtime:
    runtime = Runtime(root, embedder=HashEmbedder(32))
    yield runtime
    runtime.close()


def stale(rt: Runtime, *, judged: int, settled: int,
          owner: UserRef = OWNER) -> tuple[list[Entry], list[Entry]]:
    """``judged`` stale insights citing two live Episodes (the model must judge them), then
    ``settled`` stale insights citing one live Episode and one deleted record (retired by
    the citation floor, no call), all written by the daemon; the judged ones have the lower
    ids, so they come first."""
    eps = rt.store.append_many(owner, Kind.EPISODE, [
        ({"timestamp": "2026-09-01T09:00:00+00:00", "parent_type": "memcell",
          "parent_id": f"mc_{k}"}, {"Subject": f"Deploy {k}", "Content": f"Deploy {k} failed."})
        for k in range(2)], day=date(2026, 9, 1))
    gone = "ep_20260801_0001"  # a record deleted since the insights were derived
    made = rt.store.append_many(owner, Kind.INSIGHT, [
        ({"timestamp": "2026-09-02T09:00:00+00:00", "depth": 1, "status": "stale",
          "stale_reason": f"evidence {gone} was deleted",
          "evidence": [eps[0].id, eps[1].id if k < judged else gone],
          "evidence_hash": {}, "insight_type": "reflection", "derivation": f"dw_{k}"},
         {"Insight": f"Step {k} of the deploy fails."}) for k in range(judged + settled)],
        day=date(2026, 9, 2))
    Indexer(rt).scan()
    return made[:judged], made[judged:]


def statuses(rt: Runtime, owner: UserRef = OWNER) -> dict[str, str]:
    return {e.id: provenance.status_of(e) for e in rt.store.entries(owner, Kind.INSIGHT)}


def test_insights_retired_without_a_call_do_not_use_up_the_run(rt: Runtime) -> None:
    _, settled = stale(rt, judged=0, settled=60)  # more than max_records (50)
    (rt.root / "ome.toml").write_text(f"[strategies.{NAME}]\nenabled = true\n")
    model = Holds()
    rt.__dict__["llm"] = model
    outcome = Engine(rt).trigger(NAME, timeout=120)
    assert outcome.status == "ok", outcome
    assert outcome.counts.get("retired") == 60
    assert "limit_reached" not in outcome.counts
    assert model.calls == 0
    assert {statuses(rt)[e.id] for e in settled} == {provenance.RETIRED}


def test_once_the_calls_are_spent_the_insights_needing_none_are_still_settled(
        rt: Runtime) -> None:
    judged, settled = stale(rt, judged=4, settled=5)
    (rt.root / "ome.toml").write_text(f"[strategies.{NAME}]\nenabled = true\n"
                                      "max_llm_calls = 2\n")
    model = Holds()
    rt.__dict__["llm"] = model
    outcome = Engine(rt).trigger(NAME, timeout=120)
    assert model.calls == 2  # never past the limit
    assert outcome.status == "partial", outcome
    assert outcome.error == "stopped early: max_llm_calls (2) reached"
    assert outcome.counts.get("kept") == 2 and outcome.counts.get("retired") == 5
    now = statuses(rt)
    assert [now[e.id] for e in judged] == ["active", "active", "stale", "stale"]
    assert {now[e.id] for e in settled} == {provenance.RETIRED}
    # the next run judges the two left
    outcome = Engine(rt).trigger(NAME, timeout=120)
    assert outcome.status == "ok" and outcome.counts.get("kept") == 2
    assert model.calls == 4


def test_once_the_calls_are_spent_the_next_owners_insights_needing_none_are_settled(
        rt: Runtime) -> None:
    """The run stopped at the first owner whose insight a limit held back: the owners after
    it waited for the next run with insights that needed no call."""
    other = UserRef.of("u_other")  # after u_cost
    judged, _ = stale(rt, judged=3, settled=0)
    _, settled = stale(rt, judged=0, settled=3, owner=other)
    (rt.root / "ome.toml").write_text(f"[strategies.{NAME}]\nenabled = true\n"
                                      "max_llm_calls = 2\n")
    model = Holds()
    rt.__dict__["llm"] = model
    outcome = Engine(rt).trigger(NAME, timeout=120)
    assert model.calls == 2
    assert outcome.status == "partial"
    assert outcome.error == "stopped early: max_llm_calls (2) reached"
    assert outcome.counts == {"kept": 2, "retired": 3, "limit_reached": 1}
    assert [statuses(rt)[e.id] for e in judged] == ["active", "active", "stale"]
    assert {statuses(rt, other)[e.id] for e in settled} == {provenance.RETIRED}
