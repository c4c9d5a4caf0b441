"""MCP over stdio: a number with a fraction or an exponent is quoted back as the client wrote
it, on a line of its own and in a batch, as the HTTP API quotes it: ``"top_k": 1e3`` was
refused "got 1000.0", a value nobody sent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_mcp_eof import _call, _opening, _serve


def _search(request_id: int, top_k: str) -> str:
    call = json.dumps(_call(request_id, "search", {"user_id": "ann", "query": "cat",
                                                  "top_k": "TOP_K"}))
    return call.replace('"TOP_K"', top_k)


def _errors(answers: list[object]) -> dict[object, str]:
    found: dict[object, str] = {}
    for answer in answers:
        for one in answer if isinstance(answer, list) else [answer]:
            if isinstance(one, dict) and "error" in one:
                found[one.get("id")] = one["error"]["message"]
    return found


def test_a_number_is_quoted_as_sent_alone_and_in_a_batch(
        root: Path, capfd: pytest.CaptureFixture[str]) -> None:
    lines = [_search(2, "1e3"), _search(3, "10.50"), _search(4, "-0"),
             "[" + _search(5, "1.0E3") + ", " + _search(6, "2.50") + "]",
             _search(7, "-0 ").replace('"query": "cat"', '"query": "cat", "n": 1e3')]
    piped = _opening() + ("\n".join(lines) + "\n").encode()

    answers, runtime = _serve(root, piped, capfd, raw=True)
    runtime.close()

    errors = _errors(answers)
    assert errors[2] == "top_k: must be a whole number from 1 to 100, got 1e3"
    assert errors[3] == "top_k: must be an integer, got a number: 10.50"
    assert errors[4] == "top_k: must be a whole number from 1 to 100, got -0"  # as before
    assert errors[5] == "top_k: must be a whole number from 1 to 100, got 1.0E3"
    assert errors[6] == "top_k: must be an integer, got a number: 2.50"
    assert errors[7].startswith("top_k: must be a whole number from 1 to 100, got -0")


def test_a_number_python_writes_alike_is_read_as_before(
        root: Path, capfd: pytest.CaptureFixture[str]) -> None:
    piped = _opening() + (_search(2, "5") + "\n" + _search(3, "5.0") + "\n").encode()
    answers, runtime = _serve(root, piped, capfd, raw=True)
    runtime.close()
    by_id = {a.get("id"): a for a in answers if isinstance(a, dict)}
    assert "result" in by_id[2], by_id[2]
    assert "result" in by_id[3], by_id[3]  # a whole number written with ".0", as before
