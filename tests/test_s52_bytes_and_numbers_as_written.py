"""What a user typed is named as they typed it: a byte of a command-line value that is not
UTF-8 as the byte (0xFF), not as Python's inside ("U+DCFF"); a JSON number with a fraction or
an exponent as the client wrote it ("1e3"), not as Python writes it ("1000.0")."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.model import surrogate_problem
from everos_reflect.problem_words import lookalike, unknown_strategy
from tests.api_client import ApiClient


@pytest.mark.parametrize(("value", "says"), [
    ("caf\udcff", "holds the byte 0xFF, which is not UTF-8 text"),
    ("\udc80x", "holds the byte 0x80, which is not UTF-8 text"),
    # a lone surrogate that stands for no byte (a library caller's text) keeps its code point
    ("x\ud83d", "holds U+D83D, a lone surrogate, which is not text"),
    ("plain", None),
])
def test_surrogate_problem_names_the_byte_the_user_s_text_holds(
        value: str, says: str | None) -> None:
    assert surrogate_problem(value) == says


def test_a_name_holding_such_a_byte_says_which_byte() -> None:
    assert lookalike("learn_lesson\udcffs") == "its character 13 is the byte 0xFF, not UTF-8 text"
    assert "U+DCFF" not in unknown_strategy("learn_lesson\udcffs", ["learn_lessons"])


def test_trigger_of_a_name_with_a_byte_that_is_no_utf8_names_the_byte(root: Path) -> None:
    result = CliRunner().invoke(cli, ["trigger", "learn_lesson\udcffs", "--root", str(root)])
    assert result.exit_code == 1, result.output
    assert result.stderr.endswith("; its character 13 is the byte 0xFF, not UTF-8 text\n")
    assert "U+DC" not in result.stderr


@pytest.mark.parametrize(("number", "shown"), [
    ("1e3", "got 1e3"), ("1.0E3", "got 1.0E3"), ("1000.000", "got 1000.000"),
    ("-5e0", "got -5e0"),
])
def test_a_json_number_out_of_range_is_quoted_as_sent(
        call: ApiClient, number: str, shown: str) -> None:
    resp = call("POST", "/api/v1/memory/search",
                content=f'{{"user_id": "u1", "query": "x", "top_k": {number}}}',
                headers={"content-type": "application/json"})
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["message"] == (
        f"top_k: must be a whole number from 1 to 100, {shown}")


def test_a_fraction_where_an_integer_is_wanted_is_quoted_as_sent(call: ApiClient) -> None:
    resp = call("POST", "/api/v1/memory/search",
                content='{"user_id": "u1", "query": "x", "top_k": 10.50}',
                headers={"content-type": "application/json"})
    assert resp.json()["error"]["message"] == "top_k: must be an integer, got a number: 10.50"


def test_seconds_out_of_range_are_quoted_as_sent(call: ApiClient) -> None:
    resp = call("POST", "/api/v1/ome/trigger",
                content='{"name": "reflect_episodes", "timeout": 1.50e5}',
                headers={"content-type": "application/json"})
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["message"] == (
        "timeout: must be a number of seconds from 0 to 86400, got 1.50e5")


def test_a_long_number_is_quoted_bounded(call: ApiClient) -> None:
    digits = "0." + "0" * 5000 + "5"  # read as 0.0
    resp = call("POST", "/api/v1/memory/search",
                content=f'{{"user_id": "u1", "query": "x", "top_k": {digits}}}',
                headers={"content-type": "application/json"})
    message = resp.json()["error"]["message"]
    assert len(message) < 400, message
    assert message.startswith("top_k: must be a whole number from 1 to 100, got 0.000")
    assert message.endswith("… (5,003 characters)")


def test_a_float_written_as_python_writes_it_is_read_as_before(call: ApiClient) -> None:
    resp = call("POST", "/api/v1/ome/trigger",
                content='{"name": "reflect_episodes", "timeout": 2.5, "force": true}',
                headers={"content-type": "application/json"})
    assert resp.status_code == 200, resp.text
