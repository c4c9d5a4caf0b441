"""Seed 004's walkthrough end to end through the real ``openai`` client and the loopback fake
server: insights → a commitments and a strategy conviction → one self-contradiction → a second
→ a reconciliation insight → the next worldview run reads it. Request bodies are asserted."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.engine.engine import Engine
from everos_reflect.llm.openai_llm import OpenAILLM
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from everos_reflect.strategies import belief_views

pytest_plugins = ["tests.fake_openai"]

ADA = UserRef.of("ada")
OBSERVATION = "Merged the payments fix without waiting for the review."
COMMIT = "Deliver the contracted SSO and audit-log roadmap to Meridian, Halcyon and Corva by " \
         "quarter end."
PIVOT = "Redirect engineering to the self-serve SMB flywheel and stop starting bespoke " \
        "enterprise work."
PRINCIPLE = "Reliability before velocity, always."
RISK = "Shipping fast past review to hold launch dates."
EDGE_1 = "Stopping enterprise engineering now would break the still-active enterprise " \
         "delivery commitments."
EDGE_2 = "Shipping hotfixes past review contradicts putting reliability before velocity."
RECONCILED = "I keep committing to ship fast while claiming reliability is the priority."


def user_text(body: dict[str, Any]) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


def numbers(body: dict[str, Any]) -> dict[str, int]:
    """``{text: n}`` of the ``[n] date kind: text`` record lines of a request."""
    found = re.findall(r"^\[(\d+)\] \S+ [^:]+: (.*)$", user_text(body), re.MULTILINE)
    return {text: int(n) for n, text in found}


def n_of(body: dict[str, Any], needle: str) -> int:
    return next(n for text, n in numbers(body).items() if needle in text)


def reply(build: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[[dict[str, Any]], Any]:
    return lambda body: build(body)


def schema_keys(body: dict[str, Any]) -> list[str]:
    assert body["response_format"]["type"] == "json_schema"
    return list(body["response_format"]["json_schema"]["schema"]["properties"])


def seed(rt: Runtime, *texts: str) -> list[str]:
    (ep,) = rt.store.append_many(ADA, Kind.EPISODE, [(
        {"timestamp": "2026-10-12T09:00:00+00:00", "parent_type": "memcell",
         "parent_id": "mc_1", "importance": 8},
        {"Subject": "Payments fix", "Content": OBSERVATION})])
    (ep2,) = rt.store.append_many(ADA, Kind.EPISODE, [(
        {"timestamp": "2026-10-13T09:00:00+00:00", "parent_type": "memcell",
         "parent_id": "mc_2", "importance": 7},
        {"Subject": "Launch", "Content": "Shipped three hotfixes past review to hold a launch "
                                         "date."})])
    made = rt.store.append_many(ADA, Kind.INSIGHT, [(
        {"evidence": [ep.id, ep2.id], "depth": 1, "status": "active",
         "insight_type": "reflection"}, {"Insight": t}) for t in texts])
    return [e.id for e in made]


def trigger(rt: Runtime, name: str) -> dict[str, int]:
    outcome = Engine(rt).trigger(name, timeout=60)
    assert outcome.status == "ok", outcome
    return outcome.counts


OBSERVATIONS = [
    ("2026-10-05T09:00:00+00:00", "Meridian call", "Confirmed the SSO and audit-log roadmap "
     "delivery to Meridian for quarter end."),
    ("2026-10-06T09:00:00+00:00", "Halcyon contract", "Signed the Halcyon renewal: SSO and audit "
     "logs are contracted for this quarter."),
    ("2026-10-07T09:00:00+00:00", "Planning", "Proposed moving all engineering to self-serve "
     "signups, which grew 40% this month."),
    ("2026-10-08T09:00:00+00:00", "Payments fix", OBSERVATION),
]


def observe_and_reflect(rt: Runtime, fake_openai: Any) -> list[str]:
    """Observations → reflect_insights (seed 000) → three cited insights."""
    for ts, subject, content in OBSERVATIONS:
        rt.store.append(ADA, Kind.EPISODE, {"timestamp": ts, "parent_type": "memcell",
                                            "parent_id": "mc_obs", "importance": 9},
                        {"Subject": subject, "Content": content})
    fake_openai.script(
        {"questions": ["What has the agent promised, and what does it now plan?"]},
        reply(lambda b: {"insights": [
            {"insight": "Enterprise delivery promises remain binding even when priorities "
                        "change.", "evidence": [n_of(b, "Meridian"), n_of(b, "Halcyon")]},
            {"insight": "The SSO and audit-log roadmap was promised to enterprise customers.",
             "evidence": [n_of(b, "Meridian"), n_of(b, "Halcyon")]},
            {"insight": "Self-serve signups grow faster than enterprise deals, and reviews are "
                        "skipped to ship.",
             "evidence": [n_of(b, "self-serve"), n_of(b, "payments fix")]},
        ]}))
    assert trigger(rt, "reflect_insights")["written"] == 3
    return [e.id for e in rt.store.entries(ADA, Kind.INSIGHT)]


def test_the_self_auditing_loop_of_seed_004(root: Path, fake_openai: Any) -> None:
    (root / "ome.toml").write_text("".join(
        f"[strategies.{n}]\nenabled = true\ncooldown_seconds = 0\n"
        for n in ("update_worldview", "detect_contradictions", "reconcile"))
        + "[strategies.reflect_insights]\nenabled = true\ncooldown_seconds = 0\n"
          "threshold = 30\nmin_episodes = 4\nquestions = 1\n")
    llm = OpenAILLM(model="fake-model", base_url=fake_openai.base_url, api_key="k",
                    max_retries=0, timeout_seconds=10, sleep=lambda s: None)
    rt = Runtime(root, Settings(), embedder=HashEmbedder(32), llm=llm)
    try:
        assert len(observe_and_reflect(rt, fake_openai)) == 3
        # 1. three insights → commitments + strategy
        fake_openai.script(reply(lambda b: {"convictions": [
            {"key": "commitments", "text": COMMIT,
             "evidence": [n_of(b, "binding"), n_of(b, "SSO")]},
            {"key": "strategy", "text": PIVOT, "evidence": [n_of(b, "Self-serve")]}]}))
        assert trigger(rt, "update_worldview") == {"owners": 1, "written": 2}
        body = fake_openai.chat_bodies()[-1]
        assert schema_keys(body) == ["convictions"]
        assert "commitments" in user_text(body) and len(numbers(body)) == 3
        view = {r["key"]: r for r in belief_views.worldview(rt, ADA)}
        assert (view["commitments"]["text"], view["strategy"]["text"]) == (COMMIT, PIVOT)

        # 2. the write triggers the detector → one edge
        fake_openai.script(reply(lambda b: {"contradictions": [
            {"between": [n_of(b, "Redirect"), n_of(b, "Deliver")], "text": EDGE_1}]}))
        assert trigger(rt, "detect_contradictions") == {"owners": 1, "written": 1}
        body = fake_openai.chat_bodies()[-1]
        assert schema_keys(body) == ["contradictions"]
        assert "just changed" in user_text(body)
        assert trigger(rt, "reconcile") == {}  # census of one: not yet

        # 3. more insights → principles + risks → a second edge
        seed(rt, "Reliability is named the top priority in every plan.",
             "Three hotfixes shipped past review to hold a launch date.",
             "Review waits are skipped when a date is at risk.")
        fake_openai.script(reply(lambda b: {"convictions": [
            {"key": "principles", "text": PRINCIPLE, "evidence": [n_of(b, "Reliability")]},
            {"key": "risks", "text": RISK, "evidence": [n_of(b, "hotfixes"),
                                                        n_of(b, "Review waits")]}]}))
        assert trigger(rt, "update_worldview")["written"] == 2
        fake_openai.script(reply(lambda b: {"contradictions": [
            {"between": [n_of(b, "Reliability before"), n_of(b, "Shipping fast")],
             "text": EDGE_2}]}))
        assert trigger(rt, "detect_contradictions")["written"] == 1

        # 4. census 2 → a reconciliation insight citing both edges and their convictions
        fake_openai.script(reply(lambda b: {"insight": RECONCILED, "evidence": [
            n_of(b, "Stopping enterprise"), n_of(b, "hotfixes past review contradicts"),
            n_of(b, "Reliability before"), n_of(b, "Shipping fast")]}))
        assert trigger(rt, "reconcile") == {"owners": 1, "written": 1}
        body = fake_openai.chat_bodies()[-1]
        assert schema_keys(body) == ["insight", "evidence"]
        rec = next(e for e in rt.store.entries(ADA, Kind.INSIGHT)
                   if e.meta.get("insight_type") == "reconciliation")
        assert rec.content == RECONCILED and rec.meta["depth"] == 4
        assert {i.split("_")[0] for i in rec.meta["evidence"]} == {"rel", "wv"}

        # 5. the loop closes: the next worldview run reads the reconciliation
        seed(rt, "Customers noticed the Monday/Tuesday reversal.",
             "The team asked which plan is real.")
        fake_openai.script(reply(lambda b: {"convictions": [
            {"key": "identity", "text": "An agent that audits its own promises.",
             "evidence": [n_of(b, "I keep committing")]}]}))
        assert trigger(rt, "update_worldview")["written"] == 1
        body = fake_openai.chat_bodies()[-1]
        assert any(RECONCILED in text for text in numbers(body))
        assert "reconciliation insight" in user_text(body)
        identity = next(r for r in belief_views.worldview(rt, ADA) if r["key"] == "identity")
        assert identity["evidence"] == [rec.id] and identity["depth"] == 5
        # every record stands: nothing was edited or deleted by the loop
        assert len(belief_views.relations(rt, ADA, status="active")) == 2

        # 6. every tier is cited: the reconciliation descends to what the agent saw
        def below(ids: list[str]) -> list[str]:
            return [c for i in ids for c in rt.store.get(ADA, i).meta.get("evidence", [])]

        level, texts = [rec.id], set()
        while level:
            level = below(level)
            texts |= {rt.store.get(ADA, i).content for i in level if i.startswith("ep_")}
        assert OBSERVATION in texts
    finally:
        rt.close()
