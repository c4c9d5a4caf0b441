"""A request field of the wrong JSON type is named in JSON's words, with the value as JSON
writes it: the API and MCP answered pydantic's "Input should be a valid dictionary" or "a
valid list" (Python's type names) and never said what was sent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from tests.api_client import ApiClient


@pytest.fixture
def call(root: Path) -> Iterator[ApiClient]:
    runtime = Runtime(root, Settings(), embedder=HashEmbedder())
    yield ApiClient(runtime)
    runtime.close()


@pytest.mark.parametrize(("path", "body", "message"), [
    ("/api/v1/ome/trigger", ["reflect_episodes"],
     'body: must be an object, got an array: ["reflect_episodes"]'),
    ("/api/v1/ome/trigger", {"name": "reflect_episodes", "force": "yes"},
     'force: must be true or false, got a string: "yes"'),
    ("/api/v1/ome/trigger", {"name": 5}, "name: must be a string, got a number: 5"),
    ("/api/v1/ome/trigger", {"name": None}, "name: must be a string, got null"),
    ("/api/v1/ome/trigger", {"name": "reflect_episodes", "timeout": "soon"},
     'timeout: must be a number, got a string: "soon"'),
    ("/api/v1/memory/search", {"query": "q", "kinds": "episode"},
     'kinds: must be an array, got a string: "episode"'),
    ("/api/v1/memory/search", {"query": "q", "top_k": 2.5},
     "top_k: must be an integer, got a number: 2.5"),
    ("/api/v1/memory/episodes",
     {"user_id": "u", "subject": "s", "content": "c", "importance": True},
     "importance: must be an integer, got a boolean: true"),
])
def test_a_field_of_the_wrong_type_is_named_in_jsons_words(
        call: ApiClient, path: str, body: object, message: str) -> None:
    resp = call("POST", path, json=body)
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"] == {"code": "invalid_request", "message": message}


def test_a_long_value_is_cut_to_about_60_characters() -> None:
    from everos_reflect.model import json_got

    shown = json_got(list(range(1000)))
    assert shown.startswith("an array: [0, 1, 2,")
    assert shown.endswith(" (4,890 characters)")
    assert len(shown.removeprefix("an array: ").split("…")[0]) == 60


def test_an_mcp_argument_of_the_wrong_type_reads_the_same() -> None:
    from everos_reflect.api.ops import validation_message

    # MCP's tool calls and the API share this message (one wording at every edge)
    problems = [{"type": "dict_type", "loc": ("params", "arguments"), "msg": "Input should be "
                 "a valid dictionary", "input": [1, 2]}]
    assert validation_message(problems) == "params.arguments: must be an object, got an " \
                                           "array: [1, 2]"


@pytest.mark.parametrize(("value", "said"), [
    (3, "a number: 3"), (None, "null"), (["u1"], 'an array: ["u1"]'), (True, "a boolean: true"),
])
def test_an_id_or_timestamp_of_the_wrong_type_is_said_in_the_same_words(
        value: object, said: str) -> None:
    # the core said Python's type names: "user_id must be a string, got int", "must be text,
    # got NoneType", where the API said "got a number: 3" of the same value
    from everos_reflect.errors import InvalidId
    from everos_reflect.model import UserRef, parse_new_timestamp, validate_name

    with pytest.raises(InvalidId) as raised:
        validate_name(value, "user_id")
    assert str(raised.value) == f"user_id must be a string, got {said}"
    with pytest.raises(InvalidId) as raised:
        UserRef.of(value)  # type: ignore[arg-type]
    assert str(raised.value) == f"user_id must be a string, got {said}"
    if value is not None:  # None is "now"
        with pytest.raises(ValueError) as raised_ts:
            parse_new_timestamp(value)  # type: ignore[arg-type]
        assert str(raised_ts.value) == f"must be text, got {said}"
