"""Every tier's prompt is bounded: each record shown is cut to a share of the prompt, marked,
and keeps its number (its id); the records of one prompt together stay under a fixed size.

Records come from people (hand-written Episodes, edited insights and convictions) and models,
bounded only by the log's entry size (256 KiB): 100 such records went whole into one prompt."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.engine.registry import RunContext, validate_strategy_settings
from everos_reflect.llm import ScriptedLLM
from everos_reflect.llm.tasks import Record, TaskRequest
from everos_reflect.model import Kind
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import belief_views
from everos_reflect.strategies.insights import NAME as INSIGHTS
from everos_reflect.strategies.insights import ReflectInsights
from everos_reflect.strategies.revalidate import NAME as REVALIDATE
from everos_reflect.strategies.revalidate import RevalidateInsights
from tests.reflect_fixtures import add_episode, make_runtime
from tests.test_belief_tiers import (
    ADA,
    add_insights,
    cite,
    contradiction,
    run,
    second_contradiction,
    seed_worldview,
    worldview_reply,
)
from tests.test_belief_tiers import llm as llm  # the tier tests' fixtures
from tests.test_belief_tiers import rt as rt
from tests.test_provenance import DEV, edit_file, setup

pytest_plugins = ["tests.fake_openai"]

HUGE = 200_000  # one entry's text, under the log's 256 KiB entry cap
# the bounds (llm/tasks.py), stated here so that every test below reads as a fact
MAX_RECORD_PROMPT_CHARS = 8_000
MAX_RECORDS_PROMPT_CHARS = 200_000
MAX_VALUE_PROMPT_CHARS = 20_000
MARK = re.compile(r"… \(clipped from ([\d,]+) characters\)$")


def clipped_from(text: str) -> int | None:
    found = MARK.search(text)
    return int(found.group(1).replace(",", "")) if found else None


# -- the shared rule --------------------------------------------------------------------------


def test_the_bounds_are_the_ones_these_tests_state() -> None:
    from everos_reflect.llm import tasks

    assert (tasks.MAX_RECORD_PROMPT_CHARS, tasks.MAX_RECORDS_PROMPT_CHARS,
            tasks.MAX_VALUE_PROMPT_CHARS) == (MAX_RECORD_PROMPT_CHARS,
                                              MAX_RECORDS_PROMPT_CHARS, MAX_VALUE_PROMPT_CHARS)


def test_short_records_are_shown_whole_and_long_ones_share_the_rest() -> None:
    from everos_reflect.llm.tasks import clip_records

    records = [Record("a", "insight", "short"), Record("b", "insight", "x" * 150_000),
               Record("c", "insight", "y" * 150_000), Record("d", "insight", "z" * 3_000)]
    shown, cut = clip_records(records)
    assert cut == ["b", "c"]
    assert [r.id for r in shown] == ["a", "b", "c", "d"]  # the numbering keeps every record
    assert shown[0] is records[0] and shown[3] is records[3]
    assert shown[1].text == "x" * MAX_RECORD_PROMPT_CHARS + "… (clipped from 150,000 characters)"


def test_many_long_records_together_stay_under_the_prompt_cap() -> None:
    from everos_reflect.llm.tasks import clip_records

    records = [Record(f"r{i}", "episode", "w" * 50_000) for i in range(100)]
    shown, cut = clip_records(records)
    assert len(cut) == 100
    body = sum(len(MARK.sub("", r.text)) for r in shown)
    assert body <= MAX_RECORDS_PROMPT_CHARS
    assert all(clipped_from(r.text) == 50_000 for r in shown)


def test_past_200_long_records_they_share_the_prompt_cap_instead_of_growing_it() -> None:
    """The 1,000-character floor held past 200 records: 1,000 of them showed 1,000,000."""
    from everos_reflect.llm.tasks import MAX_RECORDS_PER_CALL, clip_records

    records = [Record(f"r{i}", "episode", "w" * 5_000) for i in range(MAX_RECORDS_PER_CALL)]
    shown, cut = clip_records(records)
    assert len(cut) == MAX_RECORDS_PER_CALL
    assert sum(len(MARK.sub("", r.text)) for r in shown) <= MAX_RECORDS_PROMPT_CHARS
    assert all(len(MARK.sub("", r.text)) == 200 for r in shown)


def test_200_long_records_keep_the_1000_character_floor() -> None:
    from everos_reflect.llm.tasks import clip_records

    shown, _ = clip_records([Record(f"r{i}", "episode", "w" * 5_000) for i in range(200)])
    assert all(len(MARK.sub("", r.text)) == 1_000 for r in shown)


@pytest.mark.parametrize("tier", ["update_worldview", "detect_contradictions", "reconcile",
                                  "revalidate_insights", "learn_lessons"])
def test_a_tier_refuses_max_records_past_what_one_call_may_show(tier: str) -> None:
    from everos_reflect.errors import ConfigError

    assert validate_strategy_settings(tier, {"max_records": 1_000}, "ome.toml")[
        "max_records"] == 1_000
    with pytest.raises(ConfigError) as caught:
        validate_strategy_settings(tier, {"max_records": 1_001}, "ome.toml")
    assert str(caught.value) == (
        f"invalid configuration: ome.toml: strategies.{tier}.max_records: must be between 2 "
        "and 1,000 (the records one call shows; they share 200,000 characters)")


def test_max_records_of_reflect_insights_and_reflection_are_run_limits_left_unbounded() -> None:
    # their windows are not shown whole: reflect_insights shows the 100 most recent records
    for name in ("reflect_insights", "reflect_episodes"):
        assert validate_strategy_settings(name, {"max_records": 5_000}, "ome.toml")[
            "max_records"] == 5_000


def test_a_request_clips_its_values_and_a_record_label() -> None:
    req = TaskRequest(records=(Record("wv_1", "k" * 5_000 + " conviction", "text"),),
                      values={"insight": "i" * 100_000, "count": "3"})
    assert req.clipped == ("wv_1",)
    assert req.clipped_values == ("insight",)
    assert clipped_from(req.values["insight"]) == 100_000
    assert len(req.values["insight"]) < MAX_VALUE_PROMPT_CHARS + 50
    assert req.values["count"] == "3"
    assert clipped_from(req.records[0].kind) == 5_011


# -- each tier --------------------------------------------------------------------------------


def test_worldview_shows_a_huge_insight_clipped_and_can_still_cite_it(
        rt: Runtime, llm: ScriptedLLM) -> None:
    (big,) = add_insights(rt, "Enterprise promises remain binding. " + "b" * HUGE)
    add_insights(rt, "SSO roadmap promised to Meridian.", "Self-serve signups grow.")
    llm.queue_task("worldview", worldview_reply(
        ("commitments", "Keep the enterprise promises.", ["binding", "SSO"])))
    assert run(rt, "update_worldview") == {"owners": 1, "written": 1, "clipped": 1}
    ((_, req),) = llm.task_requests
    shown = {r.id: r.text for r in req.records}
    assert clipped_from(shown[big]) == HUGE + len("Enterprise promises remain binding. ")
    assert len(shown[big]) < MAX_RECORD_PROMPT_CHARS + 50
    (row,) = belief_views.worldview(rt, ADA)
    assert big in row["evidence"]


def test_worldview_prompt_of_a_full_window_of_huge_insights_is_bounded(
        rt: Runtime, llm: ScriptedLLM) -> None:
    ids = add_insights(rt, *(f"Insight {i}: " + "c" * 60_000 for i in range(30)))
    llm.queue_task("worldview", {"convictions": []})
    assert run(rt, "update_worldview") == {"owners": 1, "clipped": 30}
    ((_, req),) = llm.task_requests
    assert [r.id for r in req.records] == ids
    assert sum(len(r.text) for r in req.records) <= MAX_RECORDS_PROMPT_CHARS + 30 * 40


def test_a_window_whose_call_fails_still_counts_its_clipped_records(
        rt: Runtime, llm: ScriptedLLM) -> None:
    """The failed window's run record said nothing of them (only the log named them)."""
    from everos_reflect.errors import ProviderUnavailable

    add_insights(rt, "Enterprise promises remain binding. " + "b" * HUGE,
                 "SSO roadmap promised to Meridian.", "Self-serve signups grow.")
    llm.queue_task("worldview", ProviderUnavailable("HTTP 503: overloaded"))
    assert run(rt, "update_worldview", "failed") == {"failed": 1, "clipped": 1}


def test_a_hand_written_huge_conviction_is_clipped_for_the_detector_and_the_worldview(
        rt: Runtime, llm: ScriptedLLM) -> None:
    ids = seed_worldview(rt, llm)
    path = rt.store.path_for_id(ADA, ids["strategy"])
    edit_file(path, "stop bespoke enterprise work.", "stop bespoke enterprise work. "
              + "s" * HUGE)
    llm.queue_task("contradictions", contradiction(("Redirect", "Deliver")))
    assert run(rt, "detect_contradictions") == {"owners": 1, "written": 1, "clipped": 1}
    _, req = llm.task_requests[-1]
    texts = {r.id: r.text for r in req.records}
    assert clipped_from(texts[ids["strategy"]]) is not None
    assert "clipped" not in texts[ids["commitments"]]

    add_insights(rt, "Seven.", "Eight.", "Nine.")
    llm.queue_task("worldview", {"convictions": []})
    run(rt, "update_worldview")
    _, req = llm.task_requests[-1]
    assert len(req.values["current"]) < 5_000
    assert clipped_from(req.values["current"].splitlines()[-1]) is not None


def test_reconcile_shows_a_huge_hand_edited_edge_clipped(rt: Runtime, llm: ScriptedLLM) -> None:
    seed_worldview(rt, llm)
    llm.queue_task("contradictions", contradiction(("Redirect", "Deliver")))
    run(rt, "detect_contradictions")
    second_contradiction(rt, llm)
    edge = belief_views.relations(rt, ADA)[0]["id"]
    edit_file(rt.store.path_for_id(ADA, edge), "breaks the enterprise commitments.",
              "breaks the enterprise commitments. " + "e" * HUGE)

    def reconciliation(req: TaskRequest) -> dict[str, Any]:
        return {"insight": "Speed and reliability keep colliding.",
                "evidence": cite(req, *(r.id for r in req.records
                                        if r.kind == "self-contradiction"))}

    llm.queue_task("reconciliation", reconciliation)
    counts = run(rt, "reconcile")
    assert counts["clipped"] == 2 and counts["written"] == 1  # both edges say it
    _, req = llm.task_requests[-1]
    assert clipped_from(next(r.text for r in req.records if r.id == edge)) is not None
    (rec,) = [e for e in rt.store.entries(ADA, Kind.INSIGHT)
              if e.meta.get("insight_type") == "reconciliation"]
    assert edge in rec.meta["evidence"]


def test_insights_questions_show_a_huge_hand_written_episode_clipped(root: Path) -> None:
    llm = ScriptedLLM()
    rt = make_runtime(root, llm)
    try:
        for i in range(3):
            add_episode(rt, DEV, f"2026-09-0{i + 1}T09:00:00+00:00", f"Standup {i}",
                        f"Standup {i} about billing.", importance=9)
        big = add_episode(rt, DEV, "2026-09-05T09:00:00+00:00", "Dump",
                          "A pasted log. " + "l" * HUGE, importance=9)
        llm.queue_task("questions", {"questions": ["What fills the logs?"]})
        llm.queue_task("insights", {"insights": []})
        values = validate_strategy_settings(INSIGHTS, {"enabled": True}, "ome.toml")
        counts = ReflectInsights().run(RunContext(rt, values, "run_i", "manual", force=True))
        assert counts["clipped"] >= 1
        name, req = llm.task_requests[0]
        assert name == "questions"
        text = next(r.text for r in req.records if r.id == big.id)
        assert clipped_from(text) is not None and len(text) < MAX_RECORD_PROMPT_CHARS + 50
    finally:
        rt.close()


def test_revalidation_shows_huge_evidence_and_a_huge_stale_insight_clipped(
        root: Path, fake_openai: Any) -> None:
    from everos_reflect.llm.openai_llm import OpenAILLM

    rt, eps, first, _second = setup(root)
    try:
        path = rt.store.path_for_id(DEV, eps[1].id)
        edit_file(path, "on day 16.", "on day 16. " + "d" * HUGE)  # makes `first` stale
        edit_file(rt.store.path_for_id(DEV, first.id), "All three reverts touched auth.",
                  "All three reverts touched auth. " + "i" * HUGE)
        from everos_reflect.index.sync import Indexer

        Indexer(rt).scan()
        rt.__dict__["llm"] = OpenAILLM(model="fake-model", base_url=fake_openai.base_url,
                                       api_key="k", max_retries=0, sleep=lambda s: None)
        fake_openai.script(*[json.dumps({"verdict": "retire", "insight": "",
                                         "evidence": []})] * 3)
        values = validate_strategy_settings(REVALIDATE, {"enabled": True}, "ome.toml")
        counts = RevalidateInsights().run(RunContext(rt, values, "run_r", "manual",
                                                     force=True))
        assert counts["clipped"] >= 1
        for body in fake_openai.chat_bodies():
            user = next(m["content"] for m in body["messages"] if m["role"] == "user")
            assert len(user) < MAX_VALUE_PROMPT_CHARS + 3 * MAX_RECORD_PROMPT_CHARS + 5_000
        first_body = fake_openai.chat_bodies()[0]
        user = next(m["content"] for m in first_body["messages"] if m["role"] == "user")
        assert user.count("(clipped from 200,") == 2  # the stale insight and its evidence
    finally:
        rt.close()
