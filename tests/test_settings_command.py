"""``settings`` shows everos.toml's keys as a root runs with them: the value in force, where
it comes from (the shipped default, ``everos.toml`` or an ``EVEROS_…`` variable), the default
and what each is for; a secret only as set or not. A person asking which model or threshold
a root runs with had to layer the defaults, the file and the environment in their head."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.settings import SECTIONS, Settings


def settings_json(root: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    result = CliRunner().invoke(cli, ["settings", *args, "--json", "--root", str(root)],
                                env=env)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture
def configured(root: Path, no_everos_env: None) -> Path:
    (root / "everos.toml").write_text('[llm]\nmodel = "m-1"\n[clustering]\nthreshold = 0.6\n')
    return root


def test_a_sections_keys_say_their_value_where_it_comes_from_and_the_default(
        configured: Path) -> None:
    doc = settings_json(configured, "llm", env={
        "EVEROS_LLM__MAX_RETRIES": "5", "EVEROS_LLM__API_KEY": "sk-secret",
        "EVEROS_LLM__BASE_URL": "http://me:pw@llm.local:8080/v1"})
    assert doc["strategies"] == {} and list(doc["sections"]) == ["llm"]
    rows = {r["key"]: r for r in doc["sections"]["llm"]}
    assert list(rows) == [k for k in vars(Settings().llm)]
    assert rows["model"] | {"help": None} == {
        "key": "model", "takes": "a string", "default": "gpt-4o-mini", "value": "m-1",
        "from": "everos.toml", "secret": False, "help": None}
    assert (rows["max_retries"]["value"], rows["max_retries"]["from"]) == (
        5, "EVEROS_LLM__MAX_RETRIES")
    assert (rows["provider"]["value"], rows["provider"]["from"]) == ("extractive", "default")
    assert (rows["api_key"]["value"], rows["api_key"]["secret"]) == ("(set)", True)
    assert rows["base_url"]["value"] == "http://me:***@llm.local:8080/v1"
    assert "sk-secret" not in json.dumps(doc) and ":pw@" not in json.dumps(doc)


def test_every_key_says_what_it_is_for_from_the_shipped_defaults(configured: Path) -> None:
    doc = settings_json(configured)
    assert list(doc["sections"]) == list(SECTIONS)
    assert doc["strategies"]  # and every strategy after them
    for section, rows in doc["sections"].items():
        for row in rows:
            assert row["help"], f"{section}.{row['key']} has no comment in default.toml"
    llm = {r["key"]: r for r in doc["sections"]["llm"]}
    # a comment carried on an indented line is read whole
    assert llm["max_prompt_tokens"]["help"].endswith("anything else is not sent")


def test_the_text_shows_the_value_default_and_origin_and_never_a_secret(
        configured: Path) -> None:
    result = CliRunner().invoke(cli, ["settings", "clustering", "--root", str(configured)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "[clustering]  (everos.toml)"
    assert "  threshold = 0.6  (a number; default 0.55; from everos.toml)" in lines
    assert "  time_window_days = 7.0  (a number)" in lines
    secret = CliRunner().invoke(cli, ["settings", "server", "--root", str(configured)],
                                env={"EVEROS_SERVER__TOKEN": "tok-123"})
    assert "  token = (set)  (a string; default (not set); from EVEROS_SERVER__TOKEN)" in (
        secret.stdout.splitlines())
    assert "tok-123" not in secret.stdout


# -- an invalid everos.toml: `settings` is how a person finds what is wrong --------------------

INVALID = '[llm]\ntimeout_seconds = "soon"\nmodel = "m-2"\n[server]\nport = 99999\n'


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_an_invalid_key_is_marked_with_its_reason_the_rest_shown_and_the_exit_is_1(
        root: Path, no_everos_env: None, as_json: bool) -> None:
    # it refused to run, as every command does, with the one line `lint` also gives
    (root / "everos.toml").write_text(INVALID)
    args = ["settings", "--root", str(root)] + (["--json"] if as_json else [])
    result = CliRunner().invoke(cli, args, env={"EVEROS_LLM__MAX_RETRIES": "many"})
    assert result.exit_code == 1, result.output
    assert 'llm.timeout_seconds: must be a number, got a string: "soon"' in result.stderr
    assert "server.port: must be a whole number from 1 to 65535, got 99999" in result.stderr
    if as_json:
        doc = json.loads(result.stdout)
        llm = {row["key"]: row for row in doc["sections"]["llm"]}
        assert llm["timeout_seconds"]["problem"] == (
            'everos.toml: must be a number, got a string: "soon"')
        assert llm["timeout_seconds"]["value"] == llm["timeout_seconds"]["default"]
        assert llm["max_retries"]["problem"].startswith("EVEROS_LLM__MAX_RETRIES: ")
        assert "problem" not in llm["model"] and llm["model"]["value"] == "m-2"
        port = {row["key"]: row for row in doc["sections"]["server"]}["port"]
        assert port["problem"] == "everos.toml: must be a whole number from 1 to 65535, got 99999"
        assert doc["strategies"]["reflect_episodes"]  # the strategies are shown too
        assert "invalid configuration" in doc["error"]
    else:
        assert "  model = 'm-2'" in result.stdout or '  model = "m-2"' in result.stdout
        assert ('      INVALID: everos.toml: must be a number, got a string: "soon" (the '
                "default is shown)") in result.stdout
        assert "[strategies.reflect_episodes]" in result.stdout
