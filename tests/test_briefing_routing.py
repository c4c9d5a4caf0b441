"""The typed read path: a labelled table of questions, pattern (insights first) vs instance
(Episodes first)."""

from __future__ import annotations

import pytest

from everos_reflect.briefing.routing import route, scores

LABELLED: list[tuple[str, str]] = [
    # pattern: what is generally true across records
    ("What usually breaks our deploys?", "pattern"),
    ("Does Andrew always want logs before a retry?", "pattern"),
    ("How often do the nightly backups fail?", "pattern"),
    ("What kind of food does Caroline prefer?", "pattern"),
    ("What tends to go wrong when we migrate the database?", "pattern"),
    ("Is there a recurring problem with the payment service?", "pattern"),
    ("What have we learned about rolling back releases?", "pattern"),
    ("Why do the staging deploys keep timing out?", "pattern"),
    ("What works best when onboarding a new customer?", "pattern"),
    ("What are the common causes of failed builds?", "pattern"),
    ("How does Melanie generally spend her weekends?", "pattern"),
    ("What is the overall trend in Joanna's running times?", "pattern"),
    ("Whenever the cache is cold, what happens to latency?", "pattern"),
    ("What lessons apply to certificate renewals?", "pattern"),
    ("Which habits help Nate stay focused?", "pattern"),
    ("What is the root cause of the flaky integration tests?", "pattern"),
    ("Every time we upgrade Postgres, what do we forget?", "pattern"),
    ("What rule of thumb should I follow for hotfixes?", "pattern"),
    # instance: one occurrence, wants the dated source
    ("When did the last deploy fail?", "instance"),
    ("What did Andrew say about his dog on Monday?", "instance"),
    ("What happened during the outage on 2026-10-12?", "instance"),
    ("Who approved the release yesterday?", "instance"),
    ("How many pets does Andrew have?", "instance"),
    ("Where did Caroline go on vacation last month?", "instance"),
    ("What was the error message in the failed migration?", "instance"),
    ("When was the API key rotated?", "instance"),
    ("What time did the backup finish this morning?", "instance"),
    ("Which day did Melanie start her new job?", "instance"),
    ("What did the customer ask for in the call two weeks ago?", "instance"),
    ("Did the deploy on Friday pass its health checks?", "instance"),
    ("What is the name of Andrew's new dog?", "instance"),
    ("How much did the new laptop cost?", "instance"),
    ("What was the first thing Joanna wrote about her screenplay?", "instance"),
    ("Deploy the billing service to production", "instance"),
]


def test_table_is_large_enough_and_balanced() -> None:
    labels = [label for _, label in LABELLED]
    assert len(LABELLED) >= 30
    assert labels.count("pattern") >= 15 and labels.count("instance") >= 15


@pytest.mark.parametrize(("question", "label"), LABELLED)
def test_routes_labelled_question(question: str, label: str) -> None:
    assert route(question) == label, scores(question)


def test_no_cue_falls_back_to_instance() -> None:
    assert scores("Deploy the billing service") == (0, 0)
    assert route("Deploy the billing service") == "instance"
