"""A 5,000-character value sent where a short one is expected is quoted short in the error,
at every edge (CLI, HTTP API 422 bodies, MCP errors): its first 60 characters, ``…`` and its
length, never the whole value (``model.quoted``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from mcp.shared.exceptions import MCPError

from everos_reflect.cli.main import cli
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.errors import InvalidId
from everos_reflect.model import Kind, UserRef, quoted_value
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from tests.api_client import ApiClient

LONG = "z" * 5000
SHORT = f"'{'z' * 60}…' (5,000 characters)"


@pytest.fixture
def runtime(root: Path) -> Iterator[Runtime]:
    rt = Runtime(root, Settings(), embedder=HashEmbedder())
    yield rt
    rt.close()


def _short(message: str) -> None:
    assert SHORT in message, message[:300]
    assert "z" * 61 not in message and len(message) < 400, message[:300]


def test_quoted_value_cuts_any_value_and_keeps_short_ones_as_repr() -> None:
    assert quoted_value("abc") == "'abc'" and quoted_value(7) == "7"
    assert quoted_value(None) == "None" and quoted_value([1, "a"]) == "[1, 'a']"
    assert quoted_value(LONG) == SHORT
    assert quoted_value(["z"] * 2000) == f"{str(['z'] * 20)[:60]}… (10,000 characters)"


@pytest.mark.parametrize(("method", "url", "body"), [
    ("POST", "/api/v1/memory/search", {"query": "q", "mode": LONG}),
    ("POST", "/api/v1/memory/search", {"query": "q", "kinds": [LONG]}),
    ("POST", "/api/v1/tasks", {"user_id": "u1", "task_type": "deploy", "goal": "g",
                               "steps": ["s"], "outcome": LONG}),
    ("POST", "/api/v1/memory/episodes", {"user_id": "u1", "subject": "s", "content": "c",
                                         "timestamp": LONG}),
    ("GET", f"/api/v1/memory/relations?user_id=u1&status={LONG}", None),
])
def test_the_api_quotes_a_long_bad_value_short(runtime: Runtime, method: str, url: str,
                                               body: dict[str, Any] | None) -> None:
    # pydantic's literal_error input and the timestamp check echoed all 5,000 characters
    resp = ApiClient(runtime)(method, url, **({"json": body} if body else {}))
    assert resp.status_code == 422, resp.text[:300]
    _short(resp.json()["error"]["message"])


@pytest.mark.parametrize("args", [
    ["add", "--user", "u1", "--subject", "s", "--content", "c", "--timestamp", LONG],
    ["search", "q", "--mode", LONG],  # "must be one of: …; got …"
    ["search", "q", f"--mode={LONG}"],
    ["briefing", "q", "--user", "u1", "--max-tokens", LONG],  # "must be a whole number"
    ["relations", "--user", "u1", "--status", LONG],
    ["trigger", LONG],
    [LONG],  # click's "No such command"
])
def test_the_cli_quotes_a_long_bad_value_short(root: Path, args: list[str]) -> None:
    result = CliRunner().invoke(cli, [*args, "--root", str(root)])
    assert result.exit_code != 0
    (line,) = result.output.splitlines()
    assert line.startswith("error: ")
    _short(line)


@pytest.mark.parametrize("args", [
    ["status", "--root", f"/tmp/{LONG}"],  # OSError: File name too long
    ["init", f"/tmp/{LONG}"],
    ["lint", "--root", "/tmp/" + "/".join(["z" * 200] * 10)],  # "no memory root at …" twice
], ids=["status", "init", "no-root"])
def test_the_cli_names_a_long_root_short(args: list[str]) -> None:
    # the path was printed whole: a 5,033-character error line
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1
    (line,) = result.output.splitlines()
    assert line.startswith("error: ") and "characters)" in line
    assert "z" * 61 not in line and len(line) < 400, line[:300]


def test_an_unknown_long_option_is_quoted_short(root: Path) -> None:
    result = CliRunner().invoke(cli, ["search", "q", "--" + LONG])
    (line,) = result.output.splitlines()
    assert f"'--{'z' * 58}…' (5,002 characters)" in line and len(line) < 400


def test_mcp_quotes_a_long_bad_value_short(runtime: Runtime) -> None:
    from everos_reflect.api import mcp_server

    [spec] = [t for t in mcp_server.tools() if t.name == "search"]
    with pytest.raises(MCPError) as caught:
        mcp_server.call(runtime, spec, {"query": "q", "mode": LONG})
    _short(caught.value.message)


MANY = 3000


@pytest.mark.parametrize(("method", "url", "body"), [
    ("GET", f"/api/v1/ome/runs?{LONG}=1", None),
    ("GET", f"/api/v1/memory/worldview?user_id=u1&{LONG}=2", None),
    ("POST", "/api/v1/memory/search", {"query": "q", LONG: 1}),
    ("POST", "/api/v1/memory/episodes", {"user_id": "u1", "subject": "s", "content": "c",
                                         LONG: 1}),
], ids=["query-runs", "query-worldview", "body-search", "body-episode"])
def test_the_api_names_a_long_unknown_parameter_short(runtime: Runtime, method: str, url: str,
                                                      body: dict[str, Any] | None) -> None:
    # the name of an unknown query parameter or body field was echoed whole (a 5,102-character
    # 422 body for a 5,000-character name)
    resp = ApiClient(runtime)(method, url, **({"json": body} if body else {}))
    assert resp.status_code == 422, resp.text[:300]
    _short(resp.json()["error"]["message"])


@pytest.mark.parametrize(("method", "url", "body", "rest"), [
    ("GET", "/api/v1/ome/runs?" + "&".join(f"p{i}=1" for i in range(MANY)), None,
     "and 2,995 more;"),
    ("POST", "/api/v1/memory/search", {"query": "q", **{f"k{i}": 1 for i in range(MANY)}},
     "and 2,990 more problems"),
], ids=["query", "body"])
def test_the_api_counts_thousands_of_unknown_parameters(runtime: Runtime, method: str,
                                                        url: str, body: dict[str, Any] | None,
                                                        rest: str) -> None:
    # each was listed: a 26 kB message for 3,000 query parameters, 116 kB for body keys
    resp = ApiClient(runtime)(method, url, **({"json": body} if body else {}))
    assert resp.status_code == 422, resp.text[:300]
    message = resp.json()["error"]["message"]
    assert len(message) < 600 and rest in message, message[:300]


def test_mcp_names_a_long_unknown_argument_short(runtime: Runtime) -> None:
    from everos_reflect.api import mcp_server

    [spec] = [t for t in mcp_server.tools() if t.name == "search"]
    with pytest.raises(MCPError) as caught:
        mcp_server.call(runtime, spec, {"query": "q", LONG: 1})
    _short(caught.value.message)
    with pytest.raises(MCPError) as caught:
        mcp_server.call(runtime, spec, {"query": "q", **{f"k{i}": 1 for i in range(MANY)}})
    assert len(caught.value.message) < 600 and "and 2,990 more problems" in caught.value.message


def test_an_owner_id_that_is_not_the_user_is_quoted_short(runtime: Runtime) -> None:
    with pytest.raises(InvalidId) as caught:
        runtime.store.append(UserRef.of("u1"), Kind.EPISODE,
                             {"owner_id": LONG, "timestamp": "2026-10-12T09:00:00+00:00",
                              "parent_type": "memcell", "parent_id": "mc_1"},
                             {"Subject": "s", "Content": "c"})
    _short(str(caught.value))
    with pytest.raises(InvalidId) as caught:
        runtime.store.append_many(UserRef.of("u1"), Kind.EPISODE, [
            ({"owner_id": LONG, "timestamp": "2026-10-12T09:00:00+00:00",
              "parent_type": "memcell", "parent_id": "mc_1"}, {"Subject": "s", "Content": "c"})])
    _short(str(caught.value))


# --- config files: everos.toml, the environment, fleet.toml, serve's host -------------------

BIG_INT = "9" * 4000  # a TOML integer tomllib reads (up to 4,300 digits)
BIG_COMPACT = "9.99e+3999"  # a refused number of a range, as a config file shows it
DEEP = "/".join(["z" * 99] * 10)  # 999 characters, each name short enough to look up


@pytest.mark.parametrize(("user_text", "env", "short"), [
    (f'[llm]\nprovider = "{LONG}"\n', {}, SHORT),  # one of
    (f'[llm]\nbase_url = "{LONG}"\n', {}, SHORT),
    (f'[scheduler]\ntimezone = "{LONG}"\n', {}, SHORT),
    (f'[llm]\nmodel = ["{LONG}"]\n', {}, "(5,004 characters)"),  # not a string
    (f"[llm]\nmax_retries = {BIG_INT}\n", {}, BIG_COMPACT),  # out of range
    (f"[server]\nport = {BIG_INT}\n", {}, BIG_COMPACT),
    (None, {"EVEROS_LLM__MAX_RETRIES": LONG}, SHORT),  # not an integer
    (None, {"EVEROS_INDEX__SEARCH_MODE": LONG}, SHORT),
    (None, {"EVEROS_EMBEDDING__LOW_MEMORY": LONG}, SHORT),  # not true or false
], ids=["choice", "url", "timezone", "type", "range", "port", "env-int", "env-choice",
        "env-bool"])
def test_a_settings_error_quotes_a_long_value_short(user_text: str | None, env: dict[str, str],
                                                    short: str) -> None:
    # "must be one of 'extractive', 'openai', got 'zzzz…" echoed all 5,000 characters
    from everos_reflect.errors import ConfigError
    from everos_reflect.settings import packaged_text, parse_settings

    with pytest.raises(ConfigError) as caught:
        parse_settings(packaged_text("default.toml"), user_text, env)
    message = str(caught.value)
    assert short in message and len(message) < 400, message[:300]


@pytest.mark.parametrize("text", [
    f'roots = ["a", 7{BIG_INT}]\n',
    f'roots = ["a"]\nray_address = "{LONG}"\n',
    f'roots = ["a"]\ntask_cpus = "{LONG}"\n',
    f'roots = ["a"]\nmax_retries = -{BIG_INT}\n',
    f'roots = ["a"]\nroots_per_worker = {BIG_INT}\n',
    f'roots = ["a"]\nprobe_work = "{LONG}"\n',
], ids=["roots", "ray_address", "number", "bound", "roots_per_worker", "probe_work"])
def test_a_fleet_error_quotes_a_long_value_short(text: str) -> None:
    from everos_reflect.errors import ConfigError
    from everos_reflect.fleet.config import parse_fleet

    with pytest.raises(ConfigError) as caught:
        parse_fleet(text)
    message = str(caught.value)
    assert ("characters)" in message or BIG_COMPACT in message) and len(message) < 400, \
        message[:300]
    assert "z" * 61 not in message and "9" * 61 not in message


def test_fleet_roots_that_name_no_folder_are_quoted_short(tmp_path: Path) -> None:
    # A name too long to look up raised OSError, quoting the whole path, instead of a problem.
    from everos_reflect.errors import ConfigError
    from everos_reflect.fleet.config import parse_fleet, resolve_roots

    # (a root of more than 4,096 characters is refused by parse_fleet itself)
    name = "z" * 3000  # longer than a file name may be, shorter than a path
    config = parse_fleet(f'roots = ["{DEEP}", "{DEEP}*", "{name}", "~{name}/x"]\n',
                         str(tmp_path / "fleet.toml"))
    with pytest.raises(ConfigError) as caught:
        resolve_roots(config)
    problems = {key: reason for _, key, reason in caught.value.problems}
    assert problems["roots[0]"].endswith("(999 characters) does not exist")
    assert problems["roots[1]"].endswith("(1,000 characters) matches no folder")
    assert problems["roots[2]"].startswith(f"'{'z' * 60}…' (3,000 characters) cannot be "
                                           "looked up (")
    assert "(3,003 characters): no home folder is known for " in problems["roots[3]"]
    message = str(caught.value)
    assert "z" * 100 not in message and len(message) < 1000, message[:300]


def test_serving_a_long_non_loopback_host_without_a_token_is_quoted_short() -> None:
    from everos_reflect.engine.daemon import check_bind
    from everos_reflect.errors import EverosError

    with pytest.raises(EverosError) as caught:
        check_bind(LONG, None)
    _short(str(caught.value))


@pytest.mark.parametrize(("user_text", "env"), [
    (f"[llm]\n{LONG} = 1\n", {}),  # an unknown key
    (f"[{LONG}]\nx = 1\n", {}),  # an unknown section
    (None, {f"EVEROS_LLM__{LONG}": "1"}),  # an unknown variable, named twice
    ('[llm]\n"x\\u001b[31m\\nllm.model: fine" = 1\n', {}),  # a quoted key, raw escapes
], ids=["key", "section", "env", "control"])
def test_a_settings_error_names_a_long_or_unprintable_key_short(
        user_text: str | None, env: dict[str, str]) -> None:
    # a key is text of the file as much as a value: it was named whole, and raw
    from everos_reflect.errors import ConfigError
    from everos_reflect.settings import packaged_text, parse_settings

    with pytest.raises(ConfigError) as caught:
        parse_settings(packaged_text("default.toml"), user_text, env)
    message = str(caught.value)
    assert len(message) < 400 and "z" * 61 not in message, message[:300]
    assert message.isprintable(), message[:300]


@pytest.mark.parametrize("text", [
    f"{LONG} = 1\n",  # an unknown top-level key
    f"[strategies.{LONG}]\nx = 1\n",  # an unknown strategy
    f"[strategies.reflect_insights]\n{LONG} = 1\n",  # an unknown setting
], ids=["top", "strategy", "setting"])
def test_an_ome_error_names_a_long_key_short(tmp_path: Path, text: str) -> None:
    from everos_reflect.engine.registry import validate_ome
    from everos_reflect.errors import ConfigError
    from everos_reflect.lint import config_problems
    from everos_reflect.settings import parse_ome

    with pytest.raises(ConfigError) as caught:
        validate_ome(parse_ome(text), "ome.toml")
    message = str(caught.value)
    assert len(message) < 600 and "z" * 61 not in message, message[:300]
    (tmp_path / "ome.toml").write_text(text)
    (problem,) = config_problems(tmp_path)  # lint names it as the daemon does
    assert len(problem.message) < 600 and "z" * 61 not in problem.message


def test_a_fleet_error_names_a_long_key_short() -> None:
    from everos_reflect.errors import ConfigError
    from everos_reflect.fleet.config import parse_fleet

    with pytest.raises(ConfigError) as caught:
        parse_fleet(f'roots = ["a"]\n{LONG} = 1\n')
    assert len(str(caught.value)) < 400, str(caught.value)[:300]


def test_a_merge_of_hand_written_long_subjects_writes_a_subject_within_the_bound(
    tmp_path: Path,
) -> None:
    # The extractive title is a source's subject: one of 800 characters, written by hand
    # (lint warns), became the narrative's subject whole, over what add may write.
    from everos_reflect.llm import ExtractiveLLM
    from tests.reflect_fixtures import ANDREW, PETS, add_episode, make_runtime, run_reflection

    rt = make_runtime(tmp_path, ExtractiveLLM())
    try:
        for timestamp, subject, content in PETS:
            add_episode(rt, ANDREW, timestamp, f"{subject} {'and his days out ' * 50}", content)
        assert run_reflection(rt)["merged"] == 1
        [narrative] = [e for e in rt.store.entries(ANDREW, Kind.EPISODE)
                       if e.parent_type == "cluster"]
    finally:
        rt.close()
    assert len(narrative.subject) <= 500 and narrative.subject.endswith("\u2026")
    assert narrative.subject.startswith("Andrew")
