"""A verdict citing hundreds of records is written, citing the most recent MAX_CITATIONS.

`reconcile` and `revalidate_insights` wrote every record a reply cited into `evidence` and
`evidence_hash`: past some 900 (a `max_records` of 1,000 allows a thousand) the metadata
block passed the 64 KiB it may hold, the write failed, and the tier failed the same way on
every run."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.engine.engine import Engine
from everos_reflect.index.sync import Indexer
from everos_reflect.llm.openai_llm import OpenAILLM
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from everos_reflect.strategies.beliefs import MAX_CITATIONS

pytest_plugins = ["tests.fake_openai"]

ADA = UserRef.of("ada")


@pytest.fixture
def rt(root: Path, fake_openai: Any) -> Iterator[Runtime]:
    (root / "ome.toml").write_text("".join(
        f"[strategies.{n}]\nenabled = true\ncooldown_seconds = 0\nmax_records = 1000\n"
        for n in ("reconcile", "revalidate_insights", "update_worldview")))
    llm = OpenAILLM(model="fake-model", base_url=fake_openai.base_url, api_key="k",
                    max_retries=0, timeout_seconds=30, sleep=lambda s: None)
    runtime = Runtime(root, Settings(), embedder=HashEmbedder(32), llm=llm)
    yield runtime
    runtime.close()


def stamp(day: int, n: int) -> str:
    return f"2026-10-{day:02d}T{n // 60:02d}:{n % 60:02d}:00+00:00"


def numbers(body: dict[str, Any]) -> list[int]:
    text = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return [int(n) for n in re.findall(r"^\[(\d+)\] ", text, re.M)]


def cites_all(text: str) -> Any:
    return lambda body: json.dumps({"insight": text, "evidence": numbers(body)})


def test_a_reconciliation_citing_a_thousand_records_is_written(
        rt: Runtime, fake_openai: Any) -> None:
    convictions = rt.store.append_many(ADA, Kind.CONVICTION, [(
        {"timestamp": stamp(1, n), "key": f"k{n}", "evidence": [], "depth": 2,
         "status": "active"}, {"Conviction": f"Conviction number {n}."}) for n in range(666)])
    ids = [c.id for c in convictions]
    edges = rt.store.append_many(ADA, Kind.RELATION, [(
        {"timestamp": stamp(2, n), "relation_type": "self_contradiction",
         "between": [ids[2 * n], ids[2 * n + 1]], "evidence": [ids[2 * n], ids[2 * n + 1]],
         "depth": 3, "status": "active"}, {"Relation": f"Edge number {n}."})
        for n in range(333)])
    Indexer(rt).scan()
    fake_openai.script(cites_all("The convictions pull two ways at once."))
    outcome = Engine(rt).trigger("reconcile", timeout=120)
    assert len(numbers(fake_openai.chat_bodies()[-1])) == 999  # every record was shown
    assert outcome.status == "ok", outcome
    assert outcome.counts.get("written") == 1, outcome.counts
    [insight] = [e for e in rt.store.entries(ADA, Kind.INSIGHT)]
    evidence = insight.meta["evidence"]
    # the most recent: the 200 edges written last
    assert evidence == [e.id for e in edges[-MAX_CITATIONS:]]
    assert set(insight.meta["evidence_hash"]) == set(evidence)
    assert outcome.counts.get("citations_cut") == 1
    row = row_of(rt, "reconcile")
    assert (row["status"], row["outputs"]) == ("ok", [insight.id])
    assert row["error"] == (f"the reconciliation cites 999 records: the {MAX_CITATIONS} "
                            "most recent kept")


def test_a_holds_verdict_citing_a_thousand_records_is_written(
        rt: Runtime, fake_openai: Any) -> None:
    episodes = rt.store.append_many(ADA, Kind.EPISODE, [(
        {"timestamp": stamp(1 + n // 400, n % 400), "parent_type": "memcell"},
        {"Subject": f"Deploy {n}", "Content": f"Deploy number {n} went out."})
        for n in range(1000)])
    # a hand-edited evidence list may name any number of records
    insight = rt.store.append(ADA, Kind.INSIGHT, {
        "timestamp": stamp(5, 0), "evidence": [e.id for e in episodes], "depth": 1,
        "status": "stale", "stale_reason": f"evidence {episodes[0].id} was edited",
        "insight_type": "reflection", "derivation": "dw_hand"},
        {"Insight": "Deploys go out every day."})
    Indexer(rt).scan()
    fake_openai.script(lambda body: json.dumps(
        {"verdict": "holds", "insight": "", "evidence": numbers(body)}))
    outcome = Engine(rt).trigger("revalidate_insights", timeout=120)
    assert len(numbers(fake_openai.chat_bodies()[-1])) == 1000
    assert outcome.status == "ok", outcome
    assert outcome.counts.get("kept") == 1, outcome.counts
    kept = rt.store.get(ADA, insight.id)
    assert kept.meta["status"] == "active"
    assert kept.meta["evidence"] == [e.id for e in episodes[-MAX_CITATIONS:]]
    assert set(kept.meta["evidence_hash"]) == set(kept.meta["evidence"])
    assert outcome.counts.get("citations_cut") == 1
    row = row_of(rt, "revalidate_insights")
    assert (row["status"], row["outputs"]) == ("ok", [insight.id])
    assert row["error"] == (f"the 'holds' verdict cites 1,000 records: the {MAX_CITATIONS} "
                            "most recent kept")


def row_of(rt: Runtime, strategy: str) -> dict[str, Any]:
    from everos_reflect.index.audit import list_derivations

    (row,) = list_derivations(rt.db(), strategy=strategy)
    return dict(row)


def test_a_conviction_citing_hundreds_of_insights_keeps_the_most_recent_and_says_so(
        rt: Runtime, fake_openai: Any) -> None:
    """A proposal citing more than MAX_CITATIONS insights was refused (its shift lost, its
    insights consumed), where a reconciliation or a revalidation citing as many kept the
    most recent: one rule now, said in the derivation row."""
    insights = rt.store.append_many(ADA, Kind.INSIGHT, [(
        {"timestamp": stamp(1 + n // 200, n % 200), "evidence": [], "depth": 1,
         "status": "active", "insight_type": "reflection"}, {"Insight": f"Insight {n}."})
        for n in range(250)])
    Indexer(rt).scan()
    fake_openai.script(lambda body: json.dumps({"convictions": [
        {"key": "risks", "text": "Deploys fail on Fridays.", "evidence": numbers(body)}]}))
    outcome = Engine(rt).trigger("update_worldview", timeout=120)
    assert len(numbers(fake_openai.chat_bodies()[-1])) == 250
    assert outcome.status == "ok", outcome
    assert outcome.counts.get("written") == 1 and outcome.counts.get("citations_cut") == 1
    [conviction] = rt.store.entries(ADA, Kind.CONVICTION)
    assert conviction.meta["evidence"] == [e.id for e in insights[-MAX_CITATIONS:]]
    row = row_of(rt, "update_worldview")
    assert (row["status"], row["outputs"]) == ("ok", [conviction.id])
    assert row["error"] == ("the conviction of key 'risks' cites 250 records: the "
                            f"{MAX_CITATIONS} most recent kept")
