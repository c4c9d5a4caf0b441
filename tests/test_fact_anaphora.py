"""Extracted facts stand alone where the offline provider can tell what a leading pronoun
stands for, and stay as written where it cannot (issue 10: the briefing and search serve a
fact alone). Sentences from the demo root."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from everos_reflect.llm.base import FactsRequest, MergeMember, MergeRequest
from everos_reflect.llm.extractive import ExtractiveLLM

LLM = ExtractiveLLM()


def facts(text: str) -> list[str]:
    return LLM.extract_facts(FactsRequest(text)).facts


def test_a_possessive_pronoun_after_the_main_person_names_them() -> None:
    got = facts("2026-08-01: Andrew accepted Northwind Robotics' offer and gave notice at Lumen "
                "Analytics. His last day at Lumen is August 14 and he starts at Northwind on "
                "August 24.\n\n2026-08-02: Andrew told Jess.")
    assert got[1] == ("Andrew's last day at Lumen is August 14 and he starts at Northwind on "
                      "August 24.")


def test_they_after_two_names_is_the_pair() -> None:
    got = facts("2026-08-15: Andrew and Jess arrived in Portland after the two-day drive from "
                "Denver. They are staying in a short-term rental in Sellwood while they look at "
                "houses to rent. Their landlord lives next door.")
    assert got[1:] == [
        "Andrew and Jess are staying in a short-term rental in Sellwood while they look at "
        "houses to rent.",
        "Andrew and Jess's landlord lives next door.",
    ]


@pytest.mark.parametrize("text", [
    # the sentence before is about Andrew's sister, not Andrew
    "Andrew walked the dogs. Andrew's sister Jess visited for the weekend. She loved the dogs.",
    # two people before: "he" is either
    "Andrew walked the dogs. Andrew and Tom went hiking. He fell on the way down.",
    # the sentence before names nobody: "he" is the boss, not the person of the text
    "Andrew walked the dogs. Andrew met his new boss. The boss is strict. He shouts a lot.",
    # a company before: "he" is not Northwind
    "Andrew walked the dogs. Northwind Robotics offered Andrew the Staff SRE role. He is "
    "leaning towards yes and wants to talk it over with his partner, Jess, first.",
    # one name before: "they" is a group
    "Andrew walked the dogs. Andrew met the movers. They come on Thursday.",
    # someone unnamed with the name
    "Andrew walked the dogs. Andrew and his sister went hiking. They got lost.",
])
def test_a_pronoun_without_one_clear_antecedent_is_kept_as_written(text: str) -> None:
    assert facts(text)[-1] == text.rsplit(". ", 1)[1]


def test_a_pronoun_never_leans_on_another_days_line() -> None:
    got = facts("2026-07-27: Andrew has a final-round interview on Thursday.\n"
                "2026-07-30: He is leaning towards yes.")
    assert got[-1] == "He is leaning towards yes."


def test_he_after_the_main_person_on_a_dated_line_names_them() -> None:
    got = facts("2026-07-27: Andrew has a final-round interview on Thursday with Northwind "
                "Robotics.\n\n2026-08-01: Andrew accepted the offer. He starts at Northwind on "
                "August 24.")
    assert got[-1] == "Andrew starts at Northwind on August 24."


def test_a_merge_keeps_they_so_the_narrative_stays_within_its_sources_words() -> None:
    def member(day: str, content: str) -> MergeMember:
        ts = datetime.fromisoformat(day).replace(tzinfo=UTC)
        return MergeMember(f"ep_{day.replace('-', '')}_0001", ts, "Move", content)

    narrative = LLM.merge(MergeRequest("init", [
        member("2026-08-11", "Andrew is packing up the Denver apartment."),
        member("2026-08-15", "Andrew and Jess arrived in Portland after the two-day drive from "
               "Denver. They are staying in a short-term rental in Sellwood."),
    ])).content
    assert "They are staying in a short-term rental in Sellwood." in narrative
    assert "Andrew and Jess are staying in a short-term rental in Sellwood." in facts(narrative)


def test_a_sentence_that_points_back_is_one_fact_with_the_sentence_before() -> None:
    got = facts("2026-07-23: Sam confirmed the Fernhill workspace is on the Team plan now and "
                "asked whether unused Starter plan credit carries over after the upgrade. The "
                "bot said it is prorated on the next invoice.")
    assert got == ["Sam confirmed the Fernhill workspace is on the Team plan now and asked "
                   "whether unused Starter plan credit carries over after the upgrade. The bot "
                   "said it is prorated on the next invoice."]


def test_remember_this_carries_what_it_points_at() -> None:
    got = facts("2026-07-09: Andrew said the first step after a failed deploy is always to read "
                "the logs. Andrew asked the assistant to remember this as a standing rule.")
    assert got == ["Andrew said the first step after a failed deploy is always to read the logs. "
                   "Andrew asked the assistant to remember this as a standing rule."]


@pytest.mark.parametrize("text", [
    # the sentence before leans itself: "this" may be the rule said before both
    "2026-07-09: Andrew repeated that when a deploy fails, the first step is always to read "
    "the logs, not to retry it. A blind retry of a failed deploy hid a flaky migration at "
    "Lumen last quarter and he doesn't want that again. He asked the assistant to remember "
    "this as a standing rule.",
    # nothing before it on its line (the line before is another day's)
    "2026-07-22: Sam upgraded the Fernhill workspace from Starter to the Team plan.\n\n"
    "2026-07-23: The bot said it is prorated on the next invoice.",
    # what it points at is in the sentence itself
    "2026-09-11: Andrew restated his standing rule for failed deploys. The assistant had "
    "suggested retrying the failed rollout straight away, and he asked it not to do that again.",
])
def test_a_pointer_without_one_clear_antecedent_is_kept_as_written(text: str) -> None:
    last = text.rsplit(". ", 1)[1] if "\n\n" not in text else text.split(": ", 2)[-1]
    assert facts(text)[-1] == last


def test_a_pronoun_of_the_other_gender_than_a_relative_before_is_the_main_person() -> None:
    # LoCoMo conv-48, session 2
    got = facts("Deborah's father passed away two days before the conversation. She is trying "
                "to channel her grief by spending more time with family and cherishing "
                "memories. Deborah started a yoga class.")
    assert got[1] == ("Deborah is trying to channel her grief by spending more time with family "
                      "and cherishing memories.")


@pytest.mark.parametrize("text", [
    # the father is a "he": after him, "He" may be either
    "Deborah's father passed away two days before the conversation. He was ill. Deborah "
    "started a yoga class.",
    # Andrew is a "he" ("his dogs"): "Her" after him is someone else's
    "Andrew walked his dogs. Andrew's sister visited. Andrew cooked. Her visit was short.",
])
def test_a_pronoun_that_cannot_be_the_person_is_kept(text: str) -> None:
    kept = next(s for s in text.split(". ") if s.startswith(("He ", "Her ")))
    assert kept.rstrip(".") + "." in facts(text)
