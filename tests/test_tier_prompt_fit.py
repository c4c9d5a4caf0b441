"""A derived tier's prompt is fitted to ``[llm] max_prompt_tokens`` instead of failing.

The tiers show up to 200,000 characters of records a call; in Chinese or Japanese (two tokens a
character) that estimates to ~400k tokens, over the default budget of 100k, and since the
budget came the whole window was set aside unsent where it was sent before. Now each call
shows the records it ranks first as far as the budget holds, numbers them as shown (a reply's
``[n]`` resolves to a record the model saw), leaves the rest for a later run and counts them
(``left_out_over_budget``). Only a call whose least (one record, or two for a task that must
cite two) does not fit is set aside, as before. Through the real client and the fake server.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

from everos_reflect.embedding import HashEmbedder
from everos_reflect.index.audit import list_derivations
from everos_reflect.llm.budget import DEFAULT_MAX_PROMPT_TOKENS, estimate_tokens
from everos_reflect.llm.tasks import Record, fit_request
from everos_reflect.model import Kind
from everos_reflect.runtime import Runtime
from tests.test_aside_settings import ADA, openai_settings, run, user_text

pytest_plugins = ["tests.fake_openai"]

#: 4,000 characters (8,000 estimated tokens) of Chinese: at most 12 fit the default budget,
#: and 30 of them estimate ~240k tokens.
CJK = "评审被跳过发布日期总是优先运维团队很疲惫" * 200
LINE_RE = re.compile(r"^\[(\d+)\] \S+ [^:]*: (I\d\d) ", re.MULTILINE)


def runtime(root: Path, base_url: str, budget: int = DEFAULT_MAX_PROMPT_TOKENS) -> Runtime:
    settings = openai_settings(base_url)
    settings = replace(settings, llm=replace(settings.llm, max_prompt_tokens=budget))
    return Runtime(root, settings, embedder=HashEmbedder(32))


def cjk_insights(rt: Runtime, n: int, text: str = CJK) -> dict[str, str]:
    """``n`` long Chinese insights, each marked ``I00``..: marker → id."""
    eps = [e.id for e in rt.store.append_many(ADA, Kind.EPISODE, [(
        {"timestamp": "2026-10-01T09:00:00+00:00", "parent_type": "memcell",
         "parent_id": "mc_1"}, {"Subject": f"Release {d}", "Content": "Shipped."})
        for d in (1, 2)], day=date(2026, 10, 1))]
    made = rt.store.append_many(ADA, Kind.INSIGHT, [(
        {"timestamp": "2026-10-02T09:00:00+00:00", "evidence": eps, "depth": 1,
         "status": "active", "insight_type": "reflection"},
        {"Insight": f"I{i:02d} {text}"}) for i in range(n)], day=date(2026, 10, 2))
    return {f"I{i:02d}": e.id for i, e in enumerate(made)}


def shown(body: dict[str, Any]) -> dict[int, str]:
    """The records a request showed: number → marker."""
    return {int(n): marker for n, marker in LINE_RE.findall(user_text(body))}


def cite_first_and_last(body: dict[str, Any]) -> str:
    numbers = sorted(shown(body))
    return json.dumps({"convictions": [{"key": "principles", "text": "Reviews matter.",
                                        "evidence": [numbers[0], numbers[-1]]}]})


def test_a_cjk_window_over_the_budget_is_sent_fitted_citing_what_was_shown(
        root: Path, fake_openai: Any) -> None:
    rt = runtime(root, fake_openai.base_url)
    try:
        ids = cjk_insights(rt, 30)
        fake_openai.script(cite_first_and_last)

        counts = run(rt, "update_worldview")

        [body] = fake_openai.chat_bodies()
        assert estimate_tokens(body["messages"]) <= DEFAULT_MAX_PROMPT_TOKENS
        seen = shown(body)
        assert 2 <= len(seen) < 30 and sorted(seen) == list(range(1, len(seen) + 1))
        assert counts["left_out_over_budget"] == 30 - len(seen)
        assert "set_aside" not in counts and "failed" not in counts
        [conviction] = rt.store.entries(ADA, Kind.CONVICTION)
        assert conviction.meta["evidence"] == [ids[seen[1]], ids[seen[len(seen)]]]
        [row] = list_derivations(rt.db(), strategy="update_worldview")
        assert row["status"] == "ok"
    finally:
        rt.close()


def test_the_records_left_out_are_shown_by_the_next_run(root: Path, fake_openai: Any) -> None:
    rt = runtime(root, fake_openai.base_url)
    try:
        cjk_insights(rt, 20)
        fake_openai.script(cite_first_and_last, cite_first_and_last)

        first = run(rt, "update_worldview")
        second = run(rt, "update_worldview", threshold=1)

        one, two = (set(shown(b).values()) for b in fake_openai.chat_bodies())
        assert first["left_out_over_budget"] == 20 - len(one)
        assert not one & two and len(one | two) == 20
        assert "left_out_over_budget" not in second
    finally:
        rt.close()


def test_a_window_whose_least_record_does_not_fit_is_still_set_aside_unsent(
        root: Path, fake_openai: Any) -> None:
    rt = runtime(root, fake_openai.base_url, budget=1_000)
    try:
        cjk_insights(rt, 3, CJK[:500])  # one record alone is ~1,000 tokens

        assert run(rt, "update_worldview") == {"failed": 1, "set_aside": 3}

        assert fake_openai.chat_bodies() == []
        [row] = list_derivations(rt.db(), strategy="update_worldview")
        assert "over llm.max_prompt_tokens (1,000); not sent" in str(row["error"])
    finally:
        rt.close()


def test_a_task_citing_two_is_fitted_to_two_at_least_or_left_whole() -> None:
    records = [Record(f"r{i}", "episode", CJK[:750]) for i in range(4)]  # ~1,500 tokens
    values = {"question": "q?", "count": "1"}

    request, left_out = fit_request("insights", records, values, budget=3_000, min_records=2)

    # two do not fit: the request stays whole, for the client to refuse unsent
    assert [r.id for r in request.records] == ["r0", "r1", "r2", "r3"] and left_out == ()
    request, left_out = fit_request("insights", records, values, budget=4_000, min_records=2)
    assert [r.id for r in request.records] == ["r0", "r1"] and left_out == ("r2", "r3")


def test_chronological_records_keep_the_newest() -> None:
    records = [Record(f"r{i}", "episode", CJK[:750]) for i in range(4)]

    request, left_out = fit_request("questions", records, {"count": "1"}, budget=4_000,
                                    keep_last=True)

    assert [r.id for r in request.records] == ["r2", "r3"] and left_out == ("r0", "r1")


def conviction(rt: Runtime, key: str, text: str, day: int) -> str:
    """A current conviction of ``key`` written on October ``day`` (its id sorts by day)."""
    (made,) = rt.store.append_many(ADA, Kind.CONVICTION, [(
        {"timestamp": f"2026-10-{day:02d}T09:00:00+00:00", "key": key, "evidence": [],
         "depth": 2, "status": "active"}, {"Conviction": text})], day=date(2026, 10, day))
    return made.id


def convictions_shown(body: dict[str, Any]) -> dict[str, bool]:
    """The convictions a contradictions call showed, by marker: marked "just changed"?"""
    return {marker: changed == ", just changed" for changed, marker in re.findall(
        r"^\[\d+\] .*? conviction(, just changed)?: (C[A-Z]) ", user_text(body), re.MULTILINE)}


def test_a_changed_conviction_stays_pending_beside_an_unchanged_one_left_out(
        root: Path, fake_openai: Any) -> None:
    rt = runtime(root, fake_openai.base_url)
    try:
        conviction(rt, "identity", "CA " + CJK[:500], 5)
        conviction(rt, "strategy", "CB " + CJK[:500], 5)
        fake_openai.script(*['{"contradictions": []}'] * 3)
        run(rt, "detect_contradictions")  # A and B, compared
        conviction(rt, "risks", "CC Reviews get skipped.", 1)  # changed; its id sorts first
        rt.llm.max_prompt_tokens = 1_500  # C beside A, or beside B, but not beside both

        second = run(rt, "detect_contradictions")
        third = run(rt, "detect_contradictions")

        bodies = fake_openai.chat_bodies()
        assert len(bodies) == 3  # the third run asked about B beside C
        second_body, third_body = bodies[1:]
        assert convictions_shown(second_body) == {"CC": True, "CA": False}
        assert second["left_out_over_budget"] == 1
        # B was left out: C is compared with it by the next run, not taken as checked
        assert convictions_shown(third_body) == {"CC": True, "CB": False}
        assert "left_out_over_budget" not in third
        assert run(rt, "detect_contradictions") == {}  # every pair shown once: nothing due
    finally:
        rt.close()


def test_a_window_whose_fitted_call_fails_still_counts_what_it_left_out(
        root: Path, fake_openai: Any) -> None:
    rt = runtime(root, fake_openai.base_url)
    try:
        cjk_insights(rt, 30)
        fake_openai.script(500)  # the server fails the fitted call

        counts = run(rt, "update_worldview")

        [body] = fake_openai.chat_bodies()
        assert counts["failed"] == 1
        assert counts["left_out_over_budget"] == 30 - len(shown(body))
        [row] = list_derivations(rt.db(), strategy="update_worldview")
        assert row["status"] == "failed"
    finally:
        rt.close()
