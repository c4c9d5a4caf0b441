"""An empty text or list is "must not be empty", as a blank one is, at every edge: ``""``
was pydantic's "String should have at least 1 character" and ``[]`` "List should have at
least 1 item after validation, not 0", where ``"  "`` was "must not be empty"; ``search ''``
said "the search query is empty" where the API says "query: must not be empty". A blank
query is said in the same words as an empty one: "query must not be empty" was a second
wording (`search ''` and `briefing ''` differed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.runtime import Runtime
from tests.api_client import ApiClient


@pytest.mark.parametrize(("route", "body", "said"), [
    ("/api/v1/memory/search", {"query": ""}, "query: must not be empty"),
    ("/api/v1/memory/search", {"query": "q", "kinds": []}, "kinds: must not be empty"),
    ("/api/v1/memory/briefing", {"user_id": "u1", "query": ""}, "query: must not be empty"),
    ("/api/v1/memory/episodes", {"user_id": "u1", "subject": "", "content": "c"},
     "subject: must not be empty"),
    ("/api/v1/tasks", {"user_id": "u1", "task_type": "deploy", "goal": "g", "steps": [],
                       "outcome": "success"}, "steps: must not be empty"),
])
def test_an_empty_field_is_refused_as_must_not_be_empty(
        call: ApiClient, route: str, body: dict[str, object], said: str) -> None:
    resp = call("POST", route, json=body)
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["message"] == said


@pytest.mark.parametrize("route", ["/api/v1/memory/search", "/api/v1/memory/briefing"])
@pytest.mark.parametrize("query", ["", "  ", "\u200b"], ids=["empty", "spaces", "zwsp"])
def test_an_empty_or_blank_query_is_said_alike(call: ApiClient, route: str,
                                               query: str) -> None:
    resp = call("POST", route, json={"user_id": "u1", "query": query} if "briefing" in route
                else {"query": query})
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["message"] == "query: must not be empty"


@pytest.mark.parametrize("command", [["search"], ["briefing", "--user", "u1"]])
@pytest.mark.parametrize("query", ["", "  "], ids=["empty", "spaces"])
def test_the_cli_says_an_empty_query_as_the_api_does(
        root: Path, command: list[str], query: str) -> None:
    result = CliRunner().invoke(cli, [*command, query, "--root", str(root)])
    assert result.exit_code == 1, result.output
    assert result.stderr.strip() == "error: query: must not be empty"



# -- an id, a choice or a number given as "" is said to be empty, at every edge ----------------


@pytest.mark.parametrize(("argv", "said"), [
    (["undo", "", "--user", "u1"], "invalid entry id '': must not be empty"),
    (["explain", "", "--user", "u1"], "invalid entry id '': must not be empty"),
    (["provenance", "", "--user", "u1"], "invalid entry id '': must not be empty"),
    (["resolve", "", "--note", "n"], "invalid relation id '': must not be empty"),
    (["trigger", ""], "invalid strategy name '': must not be empty (known: "),
    (["enable", ""], "invalid strategy name '': must not be empty (known: "),
])
def test_an_empty_positional_id_is_said_to_be_empty(root: Path, argv: list[str],
                                                    said: str) -> None:
    # each said "invalid entry id '': expected e.g. ep_20261012_0001" (or "unknown strategy
    # ''"), a format misspelt where nothing was given
    result = CliRunner().invoke(cli, [*argv, "--root", str(root)])
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(f"error: {said}"), result.stderr
    assert len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize(("argv", "option", "takes"), [
    (["relations", "--status", ""], "--status", "one of: active, resolved, stale, retired"),
    (["search", "q", "--mode", ""], "--mode", "one of: hybrid, vector, keyword"),
    (["task", "add", "--user", "u1", "--type", "deploy", "--goal", "g", "--step", "s",
      "--outcome", ""], "--outcome", "one of: success, failure, partial"),
    (["reports", "--limit", ""], "--limit", "a whole number from 1 to 1000"),
])
def test_an_empty_choice_or_number_option_is_said_to_be_empty(
        root: Path, argv: list[str], option: str, takes: str) -> None:
    # "must be one of: …; got ''" / "must be a whole number from 1 to 1000, got ''"
    result = CliRunner().invoke(cli, [*argv, "--root", str(root)])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(
        f"error: Invalid value for '{option}': must not be empty ({takes}) (see "), result.stderr
    assert not list(root.rglob("*.md"))


@pytest.mark.parametrize(("method", "url", "body", "said"), [
    ("POST", "/api/v1/memory/search", {"query": "q", "mode": ""},
     "mode: must not be empty (one of: hybrid, vector, keyword)"),
    ("POST", "/api/v1/memory/search", {"query": "q", "kinds": [""]},
     "kinds.0: must not be empty (one of: episode, atomic_fact, insight, conviction, "
     "relation, task, lesson)"),
    ("POST", "/api/v1/tasks", {"user_id": "u1", "task_type": "deploy", "goal": "g",
                               "steps": ["s"], "outcome": ""},
     "outcome: must not be empty (one of: success, failure, partial)"),
    ("GET", "/api/v1/memory/relations?user_id=u1&status=", None,
     "status: must not be empty (one of: active, resolved, stale, retired)"),
    ("GET", "/api/v1/ome/runs?limit=", None,
     "limit: must not be empty (a whole number from 1 to 1000)"),
    ("GET", "/api/v1/memory/worldview?user_id=u1&history=", None,
     "history: must not be empty (true or false)"),
])
def test_the_api_says_an_empty_choice_or_number_is_empty(
        call: ApiClient, method: str, url: str, body: dict[str, object] | None,
        said: str) -> None:
    resp = call(method, url, **({"json": body} if body is not None else {}))
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["message"] == said


def test_a_request_with_several_empty_fields_names_each(call: ApiClient, root: Path) -> None:
    # the timestamp was checked by the writer once the model had passed: an empty task_type
    # and an empty timestamp named the task_type alone, and the timestamp on the next try
    resp = call("POST", "/api/v1/tasks", json={
        "user_id": "u1", "task_type": "", "goal": "g", "steps": ["s"], "outcome": "success",
        "timestamp": ""})
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["message"] == (
        "invalid task_type '': must not be empty; timestamp: must not be empty (leave it out "
        "for the time now)")
    resp = call("POST", "/api/v1/memory/episodes", json={
        "user_id": "u1", "subject": "", "content": "c", "timestamp": "2026-10-12"})
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["message"] == (
        "subject: must not be empty; timestamp: '2026-10-12' is not ISO 8601 with a date, a "
        "time and an offset (e.g. 2026-10-12T09:30:00+02:00)")
    assert not list(root.rglob("*.md"))


def test_a_timestamp_past_year_9999_in_utc_is_refused_by_the_request(call: ApiClient) -> None:
    # the writer's range check, now the request's: said with the request's other problems
    resp = call("POST", "/api/v1/memory/episodes", json={
        "user_id": "u1", "subject": "s", "content": "", "timestamp": "9999-12-31T23:00:00-05:00"})
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["message"] == (
        "content: must not be empty; timestamp: '9999-12-31T23:00:00-05:00' is outside years "
        "1-9999 once converted to UTC")


def test_the_library_says_an_empty_query_as_the_edges_do(root: Path) -> None:
    # search() and build_briefing() said "query must not be empty", without the colon
    from everos_reflect.briefing.build import build_briefing
    from everos_reflect.errors import InvalidRequest
    from everos_reflect.index.search import search
    from everos_reflect.model import UserRef

    runtime = Runtime(root, embedder=HashEmbedder(16))
    try:
        for ask in (lambda: search(runtime, " "),
                    lambda: build_briefing(runtime, UserRef.of("u1"), "")):
            with pytest.raises(InvalidRequest) as caught:
                ask()
            assert str(caught.value) == "query: must not be empty"
    finally:
        runtime.close()


def test_lint_says_an_empty_config_value_is_empty(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (root / "everos.toml").write_text('[llm]\nprovider = ""\n[scheduler]\ntimezone = ""\n')
    (root / "ome.toml").write_text('[strategies.reflect_episodes]\ncron = ""\n')
    monkeypatch.setenv("EVEROS_SERVER__PORT", "")
    monkeypatch.setenv("EVEROS_LLM__TIMEOUT_SECONDS", "")
    result = CliRunner().invoke(cli, ["lint", "--root", str(root)])
    assert result.exit_code == 1, result.output
    said = set(result.stdout.splitlines())
    assert {
        "everos.toml: llm.provider: must not be empty (one of: extractive, openai)",
        "everos.toml: scheduler.timezone: must not be empty (leave it out for UTC, or use an "
        "IANA name such as 'Europe/Paris')",
        "ome.toml: strategies.reflect_episodes.cron: invalid cron '': must not be empty "
        "(leave the key out for the default schedule)",
        "environment: EVEROS_SERVER__PORT: must not be empty (a whole number from 1 to 65535)",
        "environment: EVEROS_LLM__TIMEOUT_SECONDS: must not be empty (a number)",
    } <= said, result.stdout


def test_settings_says_an_empty_name_is_empty(root: Path) -> None:
    result = CliRunner().invoke(cli, ["settings", "", "--root", str(root)])
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(
        "error: invalid section or strategy name '': must not be empty (everos.toml sections: "
        "llm, "), result.stderr


@pytest.mark.parametrize(("extra", "shown"), [("", "''"), ("a b", "'a b'"), ("x", "'x'")])
def test_an_extra_argument_is_shown_quoted(root: Path, extra: str, shown: str) -> None:
    # click said "Got unexpected extra argument ()" of an empty one, and "(a b)" of one
    # holding a space, which read as two
    result = CliRunner().invoke(cli, ["strategies", extra, "--root", str(root)],
                                prog_name="everos-reflect")
    assert result.exit_code == 2, result.output
    assert result.stderr == (f"error: Got unexpected extra argument {shown} (see "
                             "'everos-reflect strategies --help')\n")
