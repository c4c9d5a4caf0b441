"""The extractive narrative keeps the date of its latest source: when every sentence said on
that day became the current state, the "Current state" label carries the date, which the
timeline no longer shows (session 42: "Current state: Mia uses Proton Mail ..." told nowhere
that she switched on 2026-03-09)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

from everos_reflect.index.snippet import make_snippet
from everos_reflect.llm.base import FactsRequest, MergeMember, MergeRequest
from everos_reflect.llm.extractive import ExtractiveLLM, narrative_sentences
from tests import merge_fixtures
from tests.merge_fixtures import paragraphs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import state_stories

LLM = ExtractiveLLM()

member = partial(merge_fixtures.member, subject="Email")


def test_a_change_said_alone_on_the_last_day_keeps_that_day_in_the_label() -> None:
    members = [
        member("2026-03-01", "Mia uses Gmail for personal email."),
        member("2026-03-05", "Mia reads her personal email every morning."),
        member("2026-03-09", "Mia uses Proton Mail for personal email now."),
    ]
    content = LLM.merge(MergeRequest("init", members)).content
    assert paragraphs(content) == [
        "2026-03-01: Mia uses Gmail for personal email.",
        "2026-03-05: Mia reads her personal email every morning.",
        "Current state (2026-03-09): Mia uses Proton Mail for personal email now.",
    ]
    # no more words than a dated line of that day would have spent
    assert len(content.split()) <= sum(len(m.content.split()) + 1 for m in members) + 2


def test_two_sources_keep_both_dates() -> None:
    content = LLM.merge(MergeRequest("init", [
        member("2026-03-01", "Mia uses Gmail for personal email."),
        member("2026-03-09", "Mia uses Proton Mail for personal email now."),
    ])).content
    assert "2026-03-01" in content
    assert "2026-03-09" in content


def test_a_last_day_the_timeline_shows_needs_no_date_in_the_label() -> None:
    content = LLM.merge(MergeRequest("init", [
        member("2026-03-01", "Mia uses Gmail for personal email."),
        member("2026-03-09", "Mia uses Proton Mail for personal email now. Mia reads her "
               "personal email every morning."),
    ])).content
    assert paragraphs(content)[-1] == "Current state: Mia uses Proton Mail for personal email now."
    assert "2026-03-09: Mia reads her personal email every morning." in content


def test_a_dated_label_is_read_back_as_the_current_state() -> None:
    content = ("2026-03-01: Mia uses Gmail for personal email.\n\n"
               "Current state (2026-03-09): Mia uses Proton Mail for personal email now.")
    last = narrative_sentences(content)[-1]
    assert (last.text, last.state) == ("Mia uses Proton Mail for personal email now.", True)
    assert LLM.extract_facts(FactsRequest(content)).facts == [
        "Mia uses Gmail for personal email.", "Mia uses Proton Mail for personal email now."]


def test_an_update_keeps_the_dated_label_a_current_state() -> None:
    existing = MergeMember(
        "ep_20260309_0009", datetime(2026, 3, 9, tzinfo=UTC), "Email",
        "2026-03-01: Mia uses Gmail for personal email.\n\n"
        "Current state (2026-03-09): Mia uses Proton Mail for personal email now.")
    content = LLM.merge(MergeRequest("update", [
        member("2026-03-12", "Mia reads her personal email every morning."),
    ], existing=existing)).content
    assert "Current state (2026-03-09)" not in content.split("\n\n")[0]
    assert "2026-03-09: Mia uses Proton Mail for personal email now." in content \
        or "Current state (2026-03-09): Mia uses Proton Mail" in content
    assert "(2026-03-09): 2026" not in content


def test_a_dated_label_dates_its_sentences() -> None:
    said = narrative_sentences("2026-07-01: Andrew lives in Denver.\n\n"
                               "2026-09-01: Andrew likes sourdough bread.\n\n"
                               "Current state (2026-08-18): Andrew moved to Portland.")
    assert [(s.day, s.state) for s in said] == [
        ("2026-07-01", False), ("2026-09-01", False), ("2026-08-18", True)]
    undated = narrative_sentences("Current state: Andrew moved to Portland.")[0]
    assert (undated.day, undated.state) == (None, True)


def test_an_update_that_makes_a_dated_state_history_keeps_its_day() -> None:
    """The narrative's own date is its newest source's (09-01, the bread); the move to
    Portland was said on 08-18: read back at 09-01, the update wrote a wrong date."""
    init = LLM.merge(MergeRequest("init", [
        member("2026-07-01", "Andrew lives in Denver."),
        member("2026-08-18", "Andrew moved to Portland."),
        member("2026-09-01", "Andrew likes sourdough bread."),
    ])).content
    assert paragraphs(init)[-1] == "Current state (2026-08-18): Andrew moved to Portland."
    existing = MergeMember("ep_20260901_0009", datetime(2026, 9, 1, tzinfo=UTC), "Home", init)
    content = LLM.merge(MergeRequest("update", [
        member("2026-10-05", "Andrew moved to Seattle."),
    ], existing=existing)).content
    assert paragraphs(content) == [
        "2026-07-01: Andrew lives in Denver.",
        "2026-08-18: Andrew moved to Portland.",
        "2026-09-01: Andrew likes sourdough bread.",
        "Current state (2026-10-05): Andrew moved to Seattle.",
    ]


def test_the_state_stories_bench_counts_a_dated_label_as_stated() -> None:
    # it read the final paragraph for a literal "current state:": every dated one was
    # counted as a narrative that merely said the new value last
    assert state_stories.stated("2026-03-01: Mia uses Gmail.\n\n"
                                "Current state (2026-03-09): Mia uses Proton Mail now.")
    assert state_stories.stated("2026-03-01: Mia uses Gmail.\n\n"
                                "Current state: Mia uses Proton Mail now.")
    assert not state_stories.stated("2026-03-01: Mia uses Gmail.\n\n"
                                    "2026-03-09: Mia uses Proton Mail now.")


def test_a_snippet_of_a_dated_current_state_carries_the_day_it_was_said() -> None:
    # the entry's own date (09-01, the bread) told the move as said on 09-01, and a passage
    # could run on from the bread's line into it, one date for both
    content = ("2026-07-01: Andrew lives in Denver.\n\n"
               "2026-09-01: Andrew likes sourdough bread.\n\n"
               "Current state (2026-08-18): Andrew moved to Portland.")
    snippet = make_snippet(content, "where does Andrew live now, Portland", date="2026-09-01")
    assert (snippet.text, snippet.date) == ("Andrew moved to Portland.", "2026-08-18")
    undated = make_snippet("2026-07-01: Andrew lives in Denver.\n\n"
                           "Current state: Andrew moved to Portland.",
                           "where does Andrew live now, Portland", date="2026-09-01")
    assert undated.date == "2026-09-01"
