"""``add`` (CLI, API, MCP) scores importance in one short attempt, not minutes of retries.

With an LLM configured and its server down or stalled, ``add`` waited timeout_seconds ×
(max_retries + 1), ~4 minutes by default, before scoring offline. Now the score is asked once,
within ``[llm] interactive_timeout_seconds``; past it the offline scorer answers, the Episode
is written all the same, and a note (stderr for the CLI, ``importance_note`` in the API's
answer) says the LLM was not reached. No wall-clock asserts: the attempts the server saw or
the client made, and the timeout the client was given.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.errors import ConfigError
from everos_reflect.llm import make_llm
from everos_reflect.llm import openai_llm as openai_module
from everos_reflect.llm.importance import score_importance
from everos_reflect.llm.openai_llm import OpenAILLM
from everos_reflect.model import UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import LLMSettings, packaged_text, parse_settings
from tests.api_client import ApiClient

pytest_plugins = ["tests.fake_openai"]

ANDREW = UserRef.of("u_andrew")
SUBJECT, CONTENT = "Adopted a dog", "Andrew decided to adopt a dog named Toby on Monday."


def closed_port() -> int:
    """A loopback port nothing listens on: a connection to it is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def attempts(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The timeout of each client built from now on, per request it hands to a connection
    (retries included): one entry per attempt made."""
    made: list[float] = []
    real = OpenAILLM._on_request

    def counted(self: OpenAILLM, request: object) -> None:
        made.append(getattr(self, "timeout_seconds", 0.0))
        real(self, request)

    monkeypatch.setattr(OpenAILLM, "_on_request", counted)
    return made


def episode_body(**extra: Any) -> dict[str, Any]:
    return {"user_id": ANDREW.user_id, "subject": SUBJECT, "content": CONTENT,
            "timestamp": "2026-09-10T10:00:00+00:00", **extra}


def test_cli_add_with_the_server_down_tries_once_writes_the_entry_and_says_why(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (root / "everos.toml").write_text(
        f'[llm]\nprovider = "openai"\nbase_url = "http://127.0.0.1:{closed_port()}/v1"\n'
        "api_key = \"k\"\n")
    made = attempts(monkeypatch)

    result = CliRunner().invoke(cli, ["add", "--root", str(root), "--user", "u_andrew",
                                      "--subject", SUBJECT, "--content", CONTENT,
                                      "--timestamp", "2026-09-10T10:00:00+00:00"])

    assert result.exit_code == 0, result.output
    assert made == [5.0]  # one attempt, with the interactive timeout (not 60 s × 4)
    [note] = result.stderr.splitlines()
    assert note.startswith("note: importance scored offline: the LLM was not reached")
    assert "connection failed (gave up after 1 attempt)" in note
    new_id = result.stdout.strip().split()[-1]
    entry = Runtime(root).store.get(ANDREW, new_id)
    assert entry.content == CONTENT
    assert entry.meta["importance"] == score_importance(f"{SUBJECT}: {CONTENT}")


def test_api_add_with_a_stalled_server_gives_up_after_one_short_attempt(
        root: Path, fake_openai: Any) -> None:
    fake_openai.script(*[fake_openai.Reply('{"importance": 9}', delay=30)] * 4)
    llm = OpenAILLM(model="m", base_url=fake_openai.base_url, api_key="k", timeout_seconds=60,
                    max_retries=3, interactive_timeout_seconds=0.5, sleep=lambda s: None)
    runtime = Runtime(root, embedder=HashEmbedder(32), llm=llm)
    try:
        resp = ApiClient(runtime)("POST", "/api/v1/memory/episodes", json=episode_body())

        assert resp.status_code == 201
        data = resp.json()["data"]
        assert len(fake_openai.chat_bodies()) == 1  # asked once, never retried
        quick = llm.interactive()
        assert (quick.timeout_seconds, quick.max_retries) == (0.5, 0)
        assert "request timed out (gave up after 1 attempt)" in data["importance_note"]
        entry = runtime.store.get(ANDREW, data["id"])
        assert entry.meta["importance"] == score_importance(f"{SUBJECT}: {CONTENT}")
    finally:
        runtime.close()


def test_api_add_with_the_server_up_takes_the_llm_score_without_a_note(
        root: Path, fake_openai: Any) -> None:
    fake_openai.script('{"importance": 9}')
    llm = OpenAILLM(model="m", base_url=fake_openai.base_url, api_key="k",
                    sleep=lambda s: None)
    runtime = Runtime(root, embedder=HashEmbedder(32), llm=llm)
    try:
        data = ApiClient(runtime)("POST", "/api/v1/memory/episodes",
                                  json=episode_body()).json()["data"]

        assert "importance_note" not in data
        assert runtime.store.get(ANDREW, data["id"]).meta["importance"] == 9
        [body] = fake_openai.chat_bodies()
        assert body["response_format"]["json_schema"]["schema"]["required"] == ["importance"]
    finally:
        runtime.close()


def test_the_interactive_timeout_is_configured_and_never_longer_than_the_request_timeout(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seconds: list[float] = []
    real = openai_module.deadline_http_client

    def spy(timeout: float, **kwargs: Any) -> Any:
        seconds.append(timeout)
        return real(timeout, **kwargs)

    monkeypatch.setattr(openai_module, "deadline_http_client", spy)
    llm = make_llm(LLMSettings(provider="openai", base_url="http://127.0.0.1:9/v1",
                               timeout_seconds=60.0, interactive_timeout_seconds=2.5))
    assert isinstance(llm, OpenAILLM)
    llm.interactive()
    assert llm.interactive() is llm.interactive()  # built once
    short = make_llm(LLMSettings(provider="openai", base_url="http://127.0.0.1:9/v1",
                                 timeout_seconds=1.0, interactive_timeout_seconds=2.5))
    assert isinstance(short, OpenAILLM)
    short.interactive()
    assert seconds == [60.0, 2.5, 1.0, 1.0]


@pytest.mark.parametrize("value", ["0", "-1", "100000"])
def test_interactive_timeout_out_of_range_is_refused_naming_file_and_key(value: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_settings(packaged_text("default.toml"),
                       f"[llm]\ninteractive_timeout_seconds = {value}\n", {},
                       "root/everos.toml")
    [(file, key, _reason)] = info.value.problems
    assert (file, key) == ("root/everos.toml", "llm.interactive_timeout_seconds")


def cli_add_json(root: Path) -> Any:
    return CliRunner().invoke(cli, ["add", "--root", str(root), "--user", "u_andrew",
                                    "--subject", SUBJECT, "--content", CONTENT, "--json",
                                    "--timestamp", "2026-09-10T10:00:00+00:00"])


def test_cli_add_json_with_the_server_down_carries_the_importance_note(root: Path) -> None:
    (root / "everos.toml").write_text(
        f'[llm]\nprovider = "openai"\nbase_url = "http://127.0.0.1:{closed_port()}/v1"\n'
        "api_key = \"k\"\n")

    result = cli_add_json(root)

    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["importance_note"].startswith("importance scored offline: the LLM was not "
                                             "reached")
    assert f"note: {doc['importance_note']}" in result.stderr
    entry = Runtime(root).store.get(ANDREW, doc["id"])
    assert entry.meta["importance"] == score_importance(f"{SUBJECT}: {CONTENT}")


def test_cli_add_json_with_the_llm_scoring_has_no_importance_note(
        root: Path, fake_openai: Any) -> None:
    fake_openai.script('{"importance": 9}')
    (root / "everos.toml").write_text(
        f'[llm]\nprovider = "openai"\nbase_url = "{fake_openai.base_url}"\napi_key = "k"\n')

    result = cli_add_json(root)

    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert "importance_note" not in doc
    assert Runtime(root).store.get(ANDREW, doc["id"]).meta["importance"] == 9
