"""The library's ``search()`` and ``build_briefing()`` say a bad argument in the words the
HTTP API (and so MCP) says the same value in: one wording per problem at every edge. The
library said "top_k must be an integer from 1 to 100", "unknown search mode 'x': use one of
…" and "query is 10,001 characters; the most is 10,000" where the API said "top_k: must be a
whole number from 1 to 100, got 0", "mode: must be one of: …" and "query: must be at most
10,000 characters, got 10,001"."""

from __future__ import annotations

from typing import Any

import pytest

from everos_reflect.briefing.build import build_briefing
from everos_reflect.errors import InvalidEpisode, InvalidRequest
from everos_reflect.index.search import MAX_TOP_K, search
from everos_reflect.model import (
    MAX_BRIEFING_QUERY_CHARS,
    MAX_BRIEFING_TOKENS,
    MAX_QUERY_CHARS,
    UserRef,
    new_episode,
)
from everos_reflect.runtime import Runtime
from tests.api_client import ApiClient

SEARCH_CASES: list[tuple[dict[str, Any], str]] = [
    ({"top_k": 0}, f"top_k: must be a whole number from 1 to {MAX_TOP_K}, got 0"),
    ({"top_k": MAX_TOP_K + 1},
     f"top_k: must be a whole number from 1 to {MAX_TOP_K}, got {MAX_TOP_K + 1}"),
    ({"top_k": True}, "top_k: must be an integer, got a boolean: true"),
    ({"top_k": "5"}, 'top_k: must be an integer, got a string: "5"'),
    ({"passages_per_entry": 9}, "passages_per_entry: must be a whole number from 1 to 3, got 9"),
    ({"passages_per_entry": None}, "passages_per_entry: must be an integer, got null"),
    ({"mode": "fuzzy"}, "mode: must be one of: hybrid, vector, keyword; got 'fuzzy'"),
    ({"mode": "HYBRID"}, "mode: must be one of: hybrid, vector, keyword; got 'HYBRID'"),
    ({"mode": ""}, "mode: must not be empty (one of: hybrid, vector, keyword)"),
    ({"query": "z" * (MAX_QUERY_CHARS + 1)},
     f"query: must be at most {MAX_QUERY_CHARS:,} characters, got {MAX_QUERY_CHARS + 1:,}"),
    ({"query": "  "}, "query: must not be empty"),
    ({"query": 5}, "query: must be a string, got a number: 5"),
    ({"kinds": []}, "kinds: must not be empty"),  # searched Episodes, as if none was given
]


@pytest.mark.parametrize(("given", "said"), SEARCH_CASES)
def test_search_says_a_bad_argument_as_the_api_says_it(
        rt: Runtime, call: ApiClient, given: dict[str, Any], said: str) -> None:
    arguments = {"query": "dog", **given}

    with pytest.raises(InvalidRequest) as refused:
        search(rt, **arguments)
    answer = call("POST", "/api/v1/memory/search", json=arguments)

    assert str(refused.value) == said
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["message"] == said


@pytest.mark.parametrize(("given", "field"), [
    ({"kinds": ["episode", "note"]}, "kinds"), ({"kind": "note"}, "kind")])
def test_search_says_an_unknown_kind_as_the_api_and_kind_option_say_it(
        rt: Runtime, given: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        search(rt, "dog", **given)

    assert str(refused.value) == (
        f"{field}: must be one of: episode, atomic_fact, insight, conviction, relation, task, "
        "lesson; got 'note'")


@pytest.mark.parametrize(("given", "said"), [
    ({"max_tokens": 0}, f"max_tokens: must be a whole number from 1 to {MAX_BRIEFING_TOKENS}, "
                        "got 0"),
    ({"max_tokens": True}, "max_tokens: must be an integer, got a boolean: true"),
    ({"query": "q" * (MAX_BRIEFING_QUERY_CHARS + 1)},
     f"query: must be at most {MAX_BRIEFING_QUERY_CHARS:,} characters, got "
     f"{MAX_BRIEFING_QUERY_CHARS + 1:,}"),
    ({"query": "\u200b"}, "query: must not be empty"),
])
def test_build_briefing_says_a_bad_argument_as_the_api_says_it(
        rt: Runtime, call: ApiClient, given: dict[str, Any], said: str) -> None:
    arguments = {"query": "dog", "max_tokens": 500, **given}

    with pytest.raises(InvalidRequest) as refused:
        build_briefing(rt, UserRef.of("u1"), arguments["query"],
                       max_tokens=arguments["max_tokens"])
    answer = call("POST", "/api/v1/memory/briefing", json={"user_id": "u1", **arguments})

    assert str(refused.value) == said
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["message"] == said


@pytest.mark.parametrize(("importance", "said"), [
    (0, "importance: must be a whole number from 1 to 10, got 0"),
    (True, "importance: must be an integer, got a boolean: true"),
])
def test_new_episode_says_a_bad_importance_as_the_api_says_it(
        call: ApiClient, importance: Any, said: str) -> None:
    # it said "must be a whole number 1-10, got 0"
    with pytest.raises(InvalidEpisode) as refused:
        new_episode(UserRef.of("u1"), subject="s", content="c", importance=importance)
    answer = call("POST", "/api/v1/memory/episodes",
                  json={"user_id": "u1", "subject": "s", "content": "c",
                        "importance": importance})

    assert str(refused.value) == said
    assert answer.json()["error"]["message"] == said


@pytest.mark.parametrize(("top_k", "shown"), [(1e300, "1e+300"), (0.0, "0.0"), (101, "101")])
def test_a_whole_number_out_of_range_is_shown_as_it_was_sent(
        call: ApiClient, top_k: float, shown: str) -> None:
    # JSON's 1e300 is a whole number to the schema: it was said as its 301 digits, cut
    answer = call("POST", "/api/v1/memory/search", json={"query": "dog", "top_k": top_k})

    assert answer.json()["error"]["message"] == \
        f"top_k: must be a whole number from 1 to {MAX_TOP_K}, got {shown}"
