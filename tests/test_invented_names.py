"""A merge may not invent names or dates in words: the check beside the numbers one.

Pure cases first (what counts as stated, what an honest rewrite may do), then Reflection
through the real ``openai`` client against the loopback fake server: a lying reply is rejected
and reported, its sources left as they were.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.engine.registry import validate_strategy_settings
from everos_reflect.errors import ConfigError
from everos_reflect.llm.base import MergeMember
from everos_reflect.llm.openai_llm import OpenAILLM
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.invented import invented_name_or_date
from tests.reflect_fixtures import (
    ANDREW,
    add_episode,
    all_entries,
    check_invariants,
    make_runtime,
    reports,
    run_reflection,
)

pytest_plugins = ["tests.fake_openai"]

MELANIE = [
    MergeMember("ep_20260504_0001", datetime(2026, 5, 4, 10, tzinfo=UTC), "Melanie's move",
                "Melanie moved to Denver in May. She works at Acme Labs now."),
    MergeMember("ep_20260601_0001", datetime(2026, 6, 1, 10, tzinfo=UTC), "New job",
                "Melanie started at the New York office of Acme Labs on 2026-06-03."),
]


def check(content: str, *, title: str = "Melanie's year", facts: tuple[str, ...] = (),
          members: list[MergeMember] = MELANIE) -> str | None:
    return invented_name_or_date(members, title, content, list(facts))


@pytest.mark.parametrize("content", [
    "Melanie moved to Denver in May and works at Acme Labs.",
    # dates in words from the dates the sources carry: a timestamp, an ISO date in the text
    "On Monday, the fourth of May, Melanie moved to Denver.",
    "On Wednesday, June third, Melanie started at Acme Labs in New York.",
    "May 4: Melanie moved to Denver.",
    # a sentence's opening word is not read as a name; a name moved inside a sentence is found
    "Later, Melanie joined the New York office. Eventually she settled in.",
    "In May, Melanie's Denver move; in June, Acme Labs' New York office.",
    "Melanie, a Denverite now, works for Acme Lab.",  # forms of a source's words
    "Melanie moved. I think she may stay.",  # "I" and "may" are no names or months
])
def test_an_honest_rewrite_passes(content: str) -> None:
    assert check(content) is None


@pytest.mark.parametrize(("content", "facts", "token", "what"), [
    ("Melanie moved to Boston in May.", (), "Boston", "the narrative"),
    ("Melanie moved to Denver in March.", (), "March", "the narrative"),
    ("Melanie moved to Denver on Tuesday.", (), "Tuesday", "the narrative"),
    ("Melanie moved to Denver on the fifth of May.", (), "fifth", "the narrative"),
    ("Melanie moved to Denver on May twenty-first.", (), "twenty-first", "the narrative"),
    ("Melanie works at Acme Labs in New Jersey.", (), "New Jersey", "the narrative"),
    ("Melanie works at York Labs.", (), "York Labs", "the narrative"),  # known words, new name
    ("Melanie moved to Denver; Jessica helped her.", (), "Jessica", "the narrative"),
    ("Melanie moved to Denver.", ("Melanie moved with Jessica.",), "Jessica", "a fact"),
])
def test_a_name_or_date_no_source_states_is_named(content: str, facts: tuple[str, ...],
                                                   token: str, what: str) -> None:
    why = check(content, facts=facts)
    assert why is not None and why.startswith(f"{what} states {token!r}, which none of its "
                                              "sources does")


def test_a_title_is_read_for_names_unless_it_is_in_title_case() -> None:
    assert check("Melanie moved.", title="Melanie's Move and New Job") is None
    assert check("Melanie moved.", title="Melanie's move to Boston") is not None
    assert "March" in (check("Melanie moved.", title="Melanie's March Move") or "")


def test_names_are_not_read_where_capitals_mark_every_noun() -> None:
    german = [MergeMember("ep_20260504_0001", datetime(2026, 5, 4, tzinfo=UTC), "Umzug",
                          "Melanie zog im Mai nach Denver. Sie arbeitet jetzt bei Acme.")]
    assert check("Melanie zog nach Denver, wo sie jetzt bei Acme arbeitet; die Wohnung ist "
                 "klein.", members=german, title="Umzug") is None
    assert check("Melanie zog im März nach Denver.", members=german) is None  # not English
    assert check("Melanie moved to Denver in March.", members=german) is not None


# --- Reflection through the OpenAI client and the fake server --------------------------------

SOURCES = [
    ("2026-05-04T10:00:00+00:00", "Melanie's move", "Melanie moved to Denver in May."),
    ("2026-05-11T10:00:00+00:00", "Melanie's move settled",
     "Melanie moved to Denver and likes her new flat."),
]
LYING = {"title": "Melanie's move",
         "content": "Melanie moved to Boston in March and likes her new flat."}
HONEST = {"title": "Melanie's Move",
          "content": "In May, Melanie moved to Denver, where she likes her new flat."}
FACTS = {"facts": ["Melanie moved in May.", "Melanie likes her new flat."]}


def _runtime(root: Path, fake: Any) -> Runtime:
    llm = OpenAILLM(model="fake-model", base_url=fake.base_url, api_key="k", max_retries=0,
                    sleep=lambda s: None)
    rt = make_runtime(root, llm)
    for ts, subject, content in SOURCES:
        add_episode(rt, ANDREW, ts, subject, content)
    return rt


def test_a_lying_merge_is_rejected_reported_and_writes_nothing(
        root: Path, fake_openai: Any) -> None:
    fake_openai.script(LYING, FACTS)
    rt = _runtime(root, fake_openai)
    before = {p: p.read_bytes() for p in rt.store.iter_files()}

    counts = run_reflection(rt)

    assert counts.get("rejected") == 1 and not counts.get("merged"), counts
    merge_body, facts_body = fake_openai.chat_bodies()
    prompt = "\n".join(m["content"] for m in merge_body["messages"])
    assert "Do not invent names, dates, numbers" in prompt
    assert all(content in prompt for _, _, content in SOURCES)
    assert LYING["content"] in json.dumps(facts_body)
    [report] = reports(rt)
    assert report["status"] == "rejected" and report["merged_entry_id"] is None
    assert report["error"] == ("the narrative states 'March', which none of its sources does "
                               "(a merge may not invent dates)")
    assert {p: p.read_bytes() for p in rt.store.iter_files()} == before
    assert all(e.deprecated_by is None for e in all_entries(rt).values())
    check_invariants(rt)


def test_an_invented_name_is_named_in_the_report(root: Path, fake_openai: Any) -> None:
    fake_openai.script({**LYING, "content": "Melanie moved to Boston in May."}, FACTS)
    rt = _runtime(root, fake_openai)

    assert run_reflection(rt).get("rejected") == 1
    assert reports(rt)[0]["error"] == ("the narrative states 'Boston', which none of its "
                                       "sources does (a merge may not invent names)")


def test_an_honest_paraphrase_with_dates_in_words_is_merged(
        root: Path, fake_openai: Any) -> None:
    fake_openai.script(HONEST, FACTS)
    rt = _runtime(root, fake_openai)

    counts = run_reflection(rt)

    assert counts.get("merged") == 1, (counts, reports(rt))
    [narrative] = [e for e in all_entries(rt).values() if e.parent_type == "cluster"]
    assert narrative.content == HONEST["content"]


def test_the_name_check_has_its_own_switch(root: Path, fake_openai: Any) -> None:
    fake_openai.script(LYING, FACTS)
    rt = _runtime(root, fake_openai)

    counts = run_reflection(rt, reject_invented_names=False)  # the numbers check stays on

    assert counts.get("merged") == 1, (counts, reports(rt))


def test_the_switch_is_a_validated_boolean() -> None:
    from everos_reflect.strategies.reflect import NAME

    assert validate_strategy_settings(NAME, {}, "ome.toml")["reject_invented_names"] is True
    with pytest.raises(ConfigError, match="reject_invented_names"):
        validate_strategy_settings(NAME, {"reject_invented_names": "yes"}, "ome.toml")
