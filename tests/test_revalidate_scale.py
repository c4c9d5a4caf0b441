"""``revalidate_insights`` over many stale insights citing each other in chains: the work of a
round grows with the records, not with the records times the chains below each insight, and a
round parses again only the logs a verdict changed. Counted, not timed
(``bench/revalidate_chains.py`` times it)."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.engine.registry import RunContext, validate_strategy_settings
from everos_reflect.index.sync import Indexer
from everos_reflect.llm.base import Usage
from everos_reflect.llm.tasks import TaskResult
from everos_reflect.markdown.store import MarkdownStore
from everos_reflect.model import Entry, Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import provenance, revalidate

OWNER = UserRef.of("u_chain")


class Holds:
    """A model that keeps every insight, citing every record it was shown."""

    provider, model = "test", "holds"

    def run_task(self, name: str, req: Any) -> TaskResult:
        return TaskResult({"verdict": "holds", "insight": "",
                           "evidence": [r.id for r in req.records]}, Usage(10, 5),
                          self.provider, self.model)


def chain(rt: Runtime, n: int, *, down: bool) -> list[Entry]:
    """``n`` stale insights, each citing an Episode and the one before it in the chain, all
    ``depth: 1`` (as a person may write them); ``down``: each cites a higher id, one judged
    after it."""
    eps = rt.store.append_many(OWNER, Kind.EPISODE, [
        ({"timestamp": "2026-09-01T09:00:00+00:00", "parent_type": "memcell",
          "parent_id": f"mc_{k}"}, {"Subject": f"Deploy {k}", "Content": f"Deploy {k} failed."})
        for k in range(2)], day=date(2026, 9, 1))
    ids = [f"in_20260902_{k + 1:04d}" for k in range(n)]
    made = rt.store.append_many(OWNER, Kind.INSIGHT, [
        ({"timestamp": "2026-09-02T09:00:00+00:00", "depth": 1, "status": "stale",
          "evidence": [eps[k % 2].id, (ids[k + 1] if k + 1 < n else eps[(k + 1) % 2].id)
                       if down else (ids[k - 1] if k else eps[1].id)],
          "evidence_hash": {}, "insight_type": "reflection", "derivation": f"dw_{k}"},
         {"Insight": f"Step {k} of the deploy chain fails."}) for k in range(n)],
        day=date(2026, 9, 2))
    assert [e.id for e in made] == ids
    Indexer(rt).scan()
    return made


@pytest.fixture
def rt(root: Path) -> Runtime:
    runtime = Runtime(root, embedder=HashEmbedder(32))
    yield runtime
    runtime.close()


def test_held_by_cited_reads_each_citation_of_a_long_chain_a_few_times(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    n = 300
    chain(rt, n, down=True)
    records = provenance.load_records(rt, OWNER)
    calls = 0
    real = provenance.evidence_of

    def counted(entry: Entry) -> list[str]:
        nonlocal calls
        calls += 1
        return real(entry)

    monkeypatch.setattr(provenance, "evidence_of", counted)
    held = revalidate.held_by_cited(records)
    # every insight but the deepest waits for the one it cites, judged after it
    assert len(held) == n - 1
    # asked pair by pair, each insight's whole chain below it was walked: ~n²/2 reads
    assert calls <= 4 * n


def test_a_round_parses_again_only_the_logs_a_verdict_changed(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    n = 12
    eps = rt.store.append_many(OWNER, Kind.EPISODE, [
        ({"timestamp": "2026-09-01T09:00:00+00:00", "parent_type": "memcell",
          "parent_id": f"mc_{k}"}, {"Subject": f"Deploy {k}", "Content": f"Deploy {k} failed."})
        for k in range(2)], day=date(2026, 9, 1))
    rt.store.append_many(OWNER, Kind.INSIGHT, [
        ({"timestamp": "2026-09-02T09:00:00+00:00", "depth": 1, "status": "stale",
          "evidence": [e.id for e in eps], "evidence_hash": {}, "insight_type": "reflection",
          "derivation": f"dw_{k}"}, {"Insight": f"Deploy step {k} fails."}) for k in range(n)],
        day=date(2026, 9, 2))
    for day in range(3, 30):  # other logs of the owner, which no verdict touches
        rt.store.append(OWNER, Kind.EPISODE, {
            "timestamp": f"2026-09-{day:02d}T09:00:00+00:00", "parent_type": "memcell",
            "parent_id": "mc_x"}, {"Subject": "Other", "Content": f"Day {day}."},
            day=date(2026, 9, day))
    Indexer(rt).scan()
    rt.__dict__["llm"] = Holds()
    parses = 0
    real = MarkdownStore._parse

    def counted(self: MarkdownStore, *args: Any, **kwargs: Any) -> Any:
        nonlocal parses
        parses += 1
        return real(self, *args, **kwargs)

    monkeypatch.setattr(MarkdownStore, "_parse", counted)
    values = validate_strategy_settings(revalidate.NAME, {"enabled": True}, "ome.toml")
    counts = revalidate.RevalidateInsights().run(
        RunContext(rt, values, "run_s", "manual", force=True))
    assert counts.get("kept") == n  # one round each, the owner's logs read again after each
    logs = len(list(rt.store.iter_files(OWNER)))
    # each round parsed every one of the owner's 30 logs: 12 rounds, 360 parses and more
    assert parses <= logs + 6 * n, parses
