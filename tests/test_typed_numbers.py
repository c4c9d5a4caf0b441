"""Numbers typed as text: every numeric option of the CLI says what a person would ("must be
a whole number from 1 to 100"), and an option and the API's query parameter of the same name
accept and refuse the same values with the same words."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from click.testing import CliRunner, Result

from everos_reflect.cli.main import cli
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.runtime import Runtime
from tests.api_client import ApiClient


def run(root: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, [*args, "--root", str(root)], prog_name="everos-reflect")


@pytest.mark.parametrize(("args", "option", "bounds"), [
    (["search", "q", "--top-k"], "--top-k", "from 1 to 100"),
    (["search", "q", "--passages-per-entry"], "--passages-per-entry", "from 1 to 3"),
    (["reports", "--limit"], "--limit", "from 1 to 1000"),
    (["runs", "--limit"], "--limit", "from 1 to 1000"),
    (["lessons", "--task-type", "deploy", "--limit"], "--limit", "from 1 to 1000"),
    (["briefing", "q", "--user", "u1", "--max-tokens"], "--max-tokens", "from 1 to 32000"),
    (["add", "--user", "u1", "--subject", "s", "--content", "c", "--importance"],
     "--importance", "from 1 to 10"),
    (["serve", "--port"], "--port", "from 1 to 65535"),
])
@pytest.mark.parametrize("value", ["5.0", "five", "0x5", "+5", " 5", "0"])
def test_every_whole_number_option_says_whole_number_and_its_bounds(
        root: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], option: str, bounds: str,
        value: str) -> None:
    import everos_reflect.serve

    started: list[object] = []  # a port taken would start the daemon: never in a test
    monkeypatch.setattr(everos_reflect.serve, "serve", lambda *a, **k: started.append(k))
    result = run(root, *args, value)
    assert started == []
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.startswith(
        f"error: Invalid value for '{option}': must be a whole number {bounds}, "
        f"got {value!r}"), result.stderr
    assert "integer range" not in result.stderr


@pytest.mark.parametrize("value", ["nan", "inf", "1e3", "+5", " 5", "five", "86401", "-1"])
def test_the_trigger_timeout_says_a_number_of_seconds_and_its_bounds(
        root: Path, value: str) -> None:
    result = run(root, "trigger", "reflect_episodes", "--timeout", value)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(
        "error: Invalid value for '--timeout': must be a number of seconds from 0 to 86400, "
        f"got {value!r}"), result.stderr


@pytest.mark.parametrize("value", ["2.5", ".5", "7"])
def test_a_plain_trigger_timeout_is_read(root: Path, value: str) -> None:
    result = run(root, "trigger", "reflect_episodes", "--timeout", value, "--json")
    assert result.exit_code == 4, result.output  # disabled: the timeout was read
    assert '"status": "disabled"' in result.stdout


@pytest.fixture
def call(root: Path) -> Iterator[ApiClient]:
    runtime = Runtime(root, embedder=HashEmbedder(64))
    yield ApiClient(runtime)
    runtime.close()


@pytest.mark.parametrize(("command", "route"), [
    (["reports"], "/api/v1/ome/reports?"),
    (["runs"], "/api/v1/ome/runs?"),
    (["lessons", "--task-type", "deploy"], "/api/v1/lessons?task_type=deploy&"),
])
@pytest.mark.parametrize("value", ["+5", " 5", "5 ", "5.0", "0x5", "1_0", "\uff15", "0", "-1",
                                   "1001", "99999999999999999999", "05", "5", "1000"])
def test_the_cli_and_the_api_accept_and_refuse_the_same_limits_alike(
        root: Path, call: ApiClient, command: list[str], route: str, value: str) -> None:
    cli_result = run(root, *command, "--limit", value, "--json")
    resp = call("GET", f"{route}limit={quote(value)}")
    assert (cli_result.exit_code == 0) == (resp.status_code == 200), (
        cli_result.output, resp.text)
    if resp.status_code == 200:
        return
    assert resp.status_code == 422, resp.text
    api_says = resp.json()["error"]["message"].removeprefix("limit: ")
    assert cli_result.stderr.startswith(f"error: Invalid value for '--limit': {api_says}"), (
        cli_result.stderr, api_says)


@pytest.mark.parametrize(("args", "option", "route", "body", "field"), [
    (["search", "q", "--top-k"], "--top-k", "/api/v1/memory/search", {"query": "q"}, "top_k"),
    (["search", "q", "--passages-per-entry"], "--passages-per-entry", "/api/v1/memory/search",
     {"query": "q"}, "passages_per_entry"),
    (["briefing", "q", "--user", "u1", "--max-tokens"], "--max-tokens",
     "/api/v1/memory/briefing", {"user_id": "u1", "query": "q"}, "max_tokens"),
    (["add", "--user", "u1", "--subject", "s", "--content", "c", "--importance"],
     "--importance", "/api/v1/memory/episodes",
     {"user_id": "u1", "subject": "s", "content": "c"}, "importance"),
    (["trigger", "reflect_episodes", "--timeout"], "--timeout", "/api/v1/ome/trigger",
     {"name": "reflect_episodes"}, "timeout"),
])
@pytest.mark.parametrize("value", [-1, 100001])
def test_a_body_number_out_of_bounds_is_refused_in_the_words_of_the_cli_option(
        root: Path, call: ApiClient, args: list[str], option: str, route: str,
        body: dict[str, object], field: str, value: int) -> None:
    cli_result = run(root, *args, str(value))
    resp = call("POST", route, json={**body, field: value})
    assert cli_result.exit_code == 2, cli_result.output
    assert resp.status_code == 422, resp.text
    api_says = resp.json()["error"]["message"]
    assert api_says.startswith(f"{field}: must be a "), api_says
    words = api_says.removeprefix(f"{field}: ").split(", got ")[0]  # "must be … from 1 to 100"
    assert cli_result.stderr.startswith(
        f"error: Invalid value for '{option}': {words}, got '{value}'"), (cli_result.stderr,
                                                                           api_says)
    assert api_says == f"{field}: {words}, got {value}"


@pytest.mark.parametrize("digits", [20, 5000])
def test_a_number_of_thousands_of_digits_is_out_of_range_not_a_traceback(
        root: Path, call: ApiClient, digits: int) -> None:
    # int() refuses more than 4,300 digits with a ValueError: a traceback at the CLI, and
    # Python's "use sys.set_int_max_str_digits()" in the API's answer
    value = "9" * digits
    result = run(root, "search", "q", "--top-k", value)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "int_max_str_digits" not in result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: Invalid value for '--top-k': must be a whole number from 1 "
                           "to 100, got '9999"), line
    resp = call("GET", f"/api/v1/ome/runs?limit={value}")
    assert resp.status_code == 422, resp.text
    message = resp.json()["error"]["message"]
    assert message.startswith("limit: must be a whole number from 1 to 1000, got '9999")
    assert "int_max_str_digits" not in message


def test_a_body_number_of_many_digits_is_quoted_short(call: ApiClient) -> None:
    # JSON reads up to 4,300 digits: the message echoed every one of them
    body = '{"query": "q", "top_k": -' + "9" * 4000 + "}"
    resp = call("POST", "/api/v1/memory/search", content=body,
                headers={"content-type": "application/json"})
    assert resp.status_code == 422, resp.text
    message = resp.json()["error"]["message"]
    # shown compactly past 15 digits since session 49 (it was its first 60 digits and
    # "(4,001 characters)")
    assert message == "top_k: must be a whole number from 1 to 100, got -9.99e+3999"
    assert len(message) < 200, message


@pytest.mark.parametrize(("value", "read"), [("0" * 4999 + "5", True), ("0" * 5000, False)])
def test_leading_zeros_by_the_thousand_are_read_as_the_number(
        root: Path, call: ApiClient, value: str, read: bool) -> None:
    resp = call("GET", f"/api/v1/ome/runs?limit={value}")
    result = run(root, "runs", "--limit", value, "--json")
    assert "Traceback" not in result.output and "int_max_str_digits" not in resp.text
    assert (resp.status_code == 200) == read == (result.exit_code == 0), (resp.text,
                                                                          result.output)


@pytest.mark.parametrize("value", [" 8000", "8000 ", "+8000", "8000.0", "8e3", "0x1F40", "0",
                                   "70000", "1_000", "eighty"])
def test_the_port_variable_and_serve_port_refuse_the_same_values_in_the_same_words(
        root: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    # int() read EVEROS_SERVER__PORT=" 8000" (and "+8000") as 8000 while --port refused it,
    # and the file and the variable said "a port number 1-65535" where --port said "a whole
    # number from 1 to 65535"
    import everos_reflect.serve

    monkeypatch.setattr(everos_reflect.serve, "serve", lambda *a, **k: None)
    option = run(root, "serve", "--port", value)
    assert option.exit_code == 2, option.output
    said = option.stderr.removeprefix("error: Invalid value for '--port': ").split(" (see")[0]
    assert said.startswith("must be a whole number from 1 to 65535, got "), option.stderr
    monkeypatch.setenv("EVEROS_SERVER__PORT", value)
    linted = run(root, "lint")
    assert linted.exit_code == 1, linted.output
    assert f"environment: EVEROS_SERVER__PORT: {said}\n" in linted.output


def test_the_port_in_everos_toml_is_refused_in_the_words_of_serve_port(root: Path) -> None:
    (root / "everos.toml").write_text("[server]\nport = 0\n", "utf-8")
    linted = run(root, "lint")
    assert "everos.toml: server.port: must be a whole number from 1 to 65535, got 0" in (
        linted.output)


@pytest.mark.parametrize(("name", "value", "kind"), [
    ("EVEROS_LLM__MAX_RETRIES", " 5", "an integer"),
    ("EVEROS_LLM__MAX_RETRIES", "+5", "an integer"),
    ("EVEROS_LLM__MAX_RETRIES", "5.0", "an integer"),
    ("EVEROS_LLM__TIMEOUT_SECONDS", "1e3", "a number"),
    ("EVEROS_LLM__TIMEOUT_SECONDS", " 2.5", "a number"),
    ("EVEROS_LLM__TIMEOUT_SECONDS", "+2.5", "a number"),
])
def test_a_number_variable_is_read_as_an_option_is(name: str, value: str, kind: str) -> None:
    from everos_reflect.errors import ConfigError
    from everos_reflect.settings import ENV_FILE, packaged_text, parse_settings

    with pytest.raises(ConfigError) as info:
        parse_settings(packaged_text("default.toml"), None, {name: value})
    assert info.value.problems == [(ENV_FILE, name, f"must be {kind}, got {value!r}")]


def test_plain_number_variables_are_read() -> None:
    from everos_reflect.settings import packaged_text, parse_settings

    settings = parse_settings(packaged_text("default.toml"), None, {
        "EVEROS_LLM__MAX_RETRIES": "5", "EVEROS_LLM__TIMEOUT_SECONDS": ".5",
        "EVEROS_SERVER__PORT": "8001", "EVEROS_CLUSTERING__THRESHOLD": "0.7"})
    assert (settings.llm.max_retries, settings.llm.timeout_seconds, settings.server.port,
            settings.clustering.threshold) == (5, 0.5, 8001, 0.7)


@pytest.mark.parametrize(("host", "said"), [
    ("", "must not be empty"), ("  ", "must not be empty"),
    (" 127.0.0.1", "must be a host name or address with no spaces, got ' 127.0.0.1'"),
])
def test_serve_host_is_refused_as_the_server_host_setting_is(
        root: Path, monkeypatch: pytest.MonkeyPatch, host: str, said: str) -> None:
    # --host '' was taken for "not given": the configured host was served, nothing said
    import everos_reflect.serve

    started: list[object] = []
    monkeypatch.setattr(everos_reflect.serve, "serve", lambda *a, **k: started.append(k))
    result = run(root, "serve", "--host", host)
    assert started == []
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: Invalid value for '--host': {said}"), result.stderr
    monkeypatch.setenv("EVEROS_SERVER__HOST", host)
    assert f"environment: EVEROS_SERVER__HOST: {said}\n" in run(root, "lint").output
