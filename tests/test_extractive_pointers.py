"""A sentence that points back at the one before it in its own source stays next to it in the
narrative: when that one became the current state, the pointer goes with it (issue 10: the
demo's "The bot said it is prorated on the next invoice." stood alone on a dated line, away
from what "it" is, and its fact named nothing)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

from everos_reflect.llm.base import FactsRequest, MergeMember, MergeRequest
from everos_reflect.llm.extractive import ExtractiveLLM
from tests import merge_fixtures
from tests.merge_fixtures import paragraphs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import fact_anaphora

LLM = ExtractiveLLM()

member = partial(merge_fixtures.member, subject="Running")


def facts(text: str) -> list[str]:
    return LLM.extract_facts(FactsRequest(text)).facts


def coach_left_in_the_timeline(members: list[MergeMember], state: str) -> None:
    """The merge of ``members`` ends in the undated current state ``state``, and the coach's
    pointer stays on its own dated line, where it was said."""
    content = LLM.merge(MergeRequest("init", members)).content
    assert paragraphs(content)[-1] == f"Current state: {state}"
    assert "2026-09-01: The coach said it is a good distance for her." in content


def test_a_pointer_goes_with_the_current_state_it_points_at() -> None:
    content = LLM.merge(MergeRequest("init", [
        member("2026-08-01", "Priya runs 5 km in the park every week."),
        member("2026-09-01", "Priya runs 12 km in the park every week. The coach said it is a "
               "good distance for her."),
        member("2026-09-05", "Priya bought new shoes for the winter."),
    ])).content
    assert paragraphs(content) == [
        "2026-08-01: Priya runs 5 km in the park every week.",
        "2026-09-05: Priya bought new shoes for the winter.",
        "Current state (2026-09-01): Priya runs 12 km in the park every week. The coach said "
        "it is a good distance for her.",
    ]
    # and its fact says what "it" is
    assert facts(content)[-1] == ("Priya runs 12 km in the park every week. The coach said it "
                                  "is a good distance for her.")


def test_a_pointer_of_another_source_stays_where_it_was_said() -> None:
    # the same day, but another Episode: what it points at is not known
    coach_left_in_the_timeline([
        member("2026-08-01", "Priya runs 5 km in the park every week."),
        member("2026-09-01", "Priya runs 12 km in the park every week.", n=1),
        member("2026-09-01", "The coach said it is a good distance for her.", n=2),
    ], "Priya runs 12 km in the park every week.")


def test_a_pointer_after_history_stays_in_the_timeline() -> None:
    content = LLM.merge(MergeRequest("init", [
        member("2026-08-01", "Priya runs 5 km in the park every week. The coach said it is too "
               "little for her."),
        member("2026-09-01", "Priya runs 12 km in the park every week."),
    ])).content
    assert paragraphs(content) == [
        "2026-08-01: Priya runs 5 km in the park every week. The coach said it is too little "
        "for her.",
        "Current state (2026-09-01): Priya runs 12 km in the park every week.",
    ]


def test_a_pointer_after_a_sentence_that_leans_itself_is_not_carried() -> None:
    # "loves that" points back too: what "it" is, is unclear, so it is not moved
    coach_left_in_the_timeline([
        member("2026-08-01", "Priya runs 5 km in the park every week."),
        member("2026-09-01", "Priya runs 12 km in the park every week and loves that. The coach "
               "said it is a good distance for her."),
    ], "Priya runs 12 km in the park every week and loves that.")


def test_an_update_that_replaces_the_state_keeps_the_pointer_next_to_it() -> None:
    init = LLM.merge(MergeRequest("init", [
        member("2026-08-01", "Priya runs 5 km in the park every week."),
        member("2026-09-01", "Priya runs 12 km in the park every week. The coach said it is a "
               "good distance for her."),
    ])).content
    existing = MergeMember("ep_20260901_0009", datetime(2026, 9, 1, tzinfo=UTC), "Running", init)
    content = LLM.merge(MergeRequest("update", [
        member("2026-10-01", "Priya runs 20 km in the park every week."),
    ], existing=existing)).content
    assert paragraphs(content) == [
        "2026-08-01: Priya runs 5 km in the park every week.",
        "2026-09-01: Priya runs 12 km in the park every week. The coach said it is a good "
        "distance for her.",
        "Current state (2026-10-01): Priya runs 20 km in the park every week.",
    ]


def test_the_bench_counts_a_pointer_with_what_it_points_at_as_standing_alone() -> None:
    # the joined fact was counted as pointing back: the bench read "said it is" anywhere
    assert fact_anaphora.leans("Sam asked whether the credit carries over. The bot said it is "
                               "prorated on the next invoice.") == (False, False)
    assert fact_anaphora.leans("The bot said it is prorated on the next invoice.") == (
        False, True)
    assert fact_anaphora.leans("He asked the assistant to remember this as a standing "
                               "rule.") == (True, True)
