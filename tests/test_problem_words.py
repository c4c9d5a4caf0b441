"""A key left out, a key not taken and a value outside a fixed set are said in the same
words by the HTTP API, MCP, the CLI and the config files: "missing required key", "unknown
key (did you mean 'top_k'?)", "must be one of: hybrid, vector, keyword; got 'x'". pydantic's
own ("Field required", "Extra inputs are not permitted", "Input should be 'hybrid', …")
reached the API's 422 answers, MCP's errors and the CLI."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from everos_reflect.api.models import SearchRequest, TaskRecordRequest
from everos_reflect.api.ops import validation_message
from everos_reflect.engine.registry import validate_ome
from everos_reflect.errors import ConfigError
from everos_reflect.fleet.config import parse_fleet
from everos_reflect.settings import packaged_text, parse_settings
from tests.api_client import ApiClient

PYDANTIC_WORDS = ("Field required", "Extra inputs", "Input should be")


@pytest.mark.parametrize(("url", "body", "said"), [
    ("/api/v1/memory/search", {}, "query: missing required key"),
    ("/api/v1/memory/search", {"query": "x", "top_kk": 3},
     "top_kk: unknown key (did you mean 'top_k'?)"),
    ("/api/v1/memory/search", {"query": "x", "mode": "fuzzy"},
     "mode: must be one of: hybrid, vector, keyword; got 'fuzzy'"),
    ("/api/v1/memory/search", {"query": "x", "kinds": ["bogus"]},
     "kinds.0: must be one of: episode, atomic_fact, insight, conviction, relation, task, "
     "lesson; got 'bogus'"),
    ("/api/v1/ome/trigger", {"nam": "reflect_episodes"},
     "name: missing required key; nam: unknown key (did you mean 'name'?)"),
    ("/api/v1/tasks", {"user_id": "u1", "task_type": "deploy", "goal": "g", "steps": ["s"],
                       "outcome": "won"},
     "outcome: must be one of: success, failure, partial; got 'won'"),
])
def test_the_api_says_a_body_problem_in_the_config_files_words(
        call: ApiClient, url: str, body: dict[str, Any], said: str) -> None:
    resp = call("POST", url, json=body)
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"] == {"code": "invalid_request", "message": said}


@pytest.mark.parametrize(("url", "said"), [
    ("/api/v1/memory/insights", "user_id: missing required parameter"),
    ("/api/v1/memory/relations?user_id=u1&status=open",
     "status: must be one of: active, resolved, stale, retired; got 'open'"),
])
def test_the_api_says_a_query_problem_in_the_same_words(
        call: ApiClient, url: str, said: str) -> None:
    resp = call("GET", url)
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["message"] == said


def test_an_mcp_tool_argument_not_taken_is_told_the_one_meant() -> None:
    # what mcp_server.call answers: the tool's model validates the arguments
    with pytest.raises(ValidationError) as caught:
        SearchRequest.model_validate({"query": "x", "user": "u1"})
    said = validation_message(caught.value.errors(), SearchRequest)
    assert said == "user: unknown key (did you mean 'user_id'?)"


def test_the_cli_says_a_request_model_problem_as_the_api_does(
        capsys: pytest.CaptureFixture[str]) -> None:
    from everos_reflect.cli.common import validated

    with pytest.raises(SystemExit):
        validated(TaskRecordRequest, user_id="u1", task_type="deploy", goal="g", steps=["s"],
                  outcome="won")
    err = capsys.readouterr().err
    assert err == "error: outcome: must be one of: success, failure, partial; got 'won'\n"


def _problems(make: Any) -> list[tuple[str, str, str]]:
    with pytest.raises(ConfigError) as caught:
        make()
    return caught.value.problems


def test_the_config_files_say_an_unknown_key_and_a_choice_in_the_same_words() -> None:
    assert _problems(lambda: parse_settings(
        packaged_text("default.toml"), '[llm]\nprovider = "anthropic"\n', {},
        "everos.toml")) == [
        ("everos.toml", "llm.provider", "must be one of: extractive, openai; got 'anthropic'")]
    # ome.toml listed every setting there is for a misspelt one
    assert _problems(lambda: validate_ome(
        {"reflect_episodes": {"max_clusterz_per_run": 3}}, "ome.toml")) == [
        ("ome.toml", "strategies.reflect_episodes.max_clusterz_per_run",
         "unknown setting (did you mean 'max_clusters_per_run'?)")]
    assert _problems(lambda: parse_fleet('roots = ["r"]\nmax_retrys = 2\n')) == [
        ("fleet.toml", "max_retrys", "unknown key (did you mean 'max_retries'?)")]


def test_no_pydantic_words_reach_a_refused_request(call: ApiClient) -> None:
    for body in ({}, {"query": 5, "zzz": 1, "mode": 3}, {"query": "x", "kinds": "episode"}):
        message = call("POST", "/api/v1/memory/search", json=body).json()["error"]["message"]
        assert not any(words in message for words in PYDANTIC_WORDS), message
