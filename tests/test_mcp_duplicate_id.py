"""MCP over stdio: a request whose id a request in flight already has.

The SDK ran both and answered both with that id, so the client could not tell which answer
was which. The second is answered Invalid Request naming the id and is not run; once the
first is answered, the id is free again.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types

from everos_reflect.api import mcp_server, ops
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from tests import test_mcp_eof
from tests.test_mcp_eof import _call, _line, _opening

TASK = {"user_id": "u1", "task_type": "deploy", "goal": "ship", "steps": ["build"],
        "outcome": "success"}


@pytest.fixture
def search_held(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """``search`` answers no hit once a duplicate id was refused (or, should none be, once
    ``record_task`` runs); the names of the calls that ran."""
    ran: list[str] = []
    release = threading.Event()

    class Release(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "is in flight" in record.getMessage():
                release.set()

    def held(runtime: Runtime, body: Any) -> dict[str, Any]:
        assert release.wait(timeout=60), "no duplicate refused"
        ran.append("search")
        return {"episodes": []}

    def record(runtime: Runtime, body: Any) -> dict[str, Any]:
        ran.append("record_task")
        release.set()
        return record_task(runtime, body)

    record_task = ops.record_task
    monkeypatch.setattr(ops, "search", held)
    monkeypatch.setattr(ops, "record_task", record)
    mcp_server.log.addHandler(handler := Release())
    try:
        yield ran
    finally:
        mcp_server.log.removeHandler(handler)


def _serve(root: Path, piped: bytes, capfd: pytest.CaptureFixture[str], raw: bool = False,
           stdin: Any = None) -> tuple[Any, Runtime]:
    """:func:`tests.test_mcp_eof._serve`, reading ``stdin`` when given."""
    if stdin is None:
        return test_mcp_eof._serve(root, piped, capfd, raw=raw)
    runtime = Runtime(root, Settings(), embedder=HashEmbedder())
    try:
        anyio.run(lambda: mcp_server.serve_stdio(runtime, stdin))
    except BaseException:
        runtime.close()
        raise
    answers: dict[Any, list[dict[str, Any]]] = {}
    for line in capfd.readouterr().out.splitlines():
        answer = json.loads(line)
        answers.setdefault(answer.get("id"), []).append(answer)
    return answers, runtime


def _tasks(runtime: Runtime) -> list[Any]:
    try:
        return runtime.store.entries(UserRef.of("u1"), Kind.TASK)
    finally:
        runtime.close()


def test_a_request_whose_id_is_in_flight_is_refused_and_not_run(
    root: Path, capfd: pytest.CaptureFixture[str], search_held: list[str]
) -> None:
    piped = _opening() + _line(_call(7, "search", {"query": "cats", "user_id": "u1"})) + \
        _line(_call(7, "record_task", TASK))

    answers, runtime = _serve(root, piped, capfd)

    assert _tasks(runtime) == []
    assert search_held == ["search"]
    assert set(answers) == {1, 7}
    answered, refused = sorted(answers[7], key=lambda a: "error" in a)
    assert refused["error"] == {"code": types.INVALID_REQUEST,
                                "message": "id 7 is already in use by a request in flight",
                                "data": {"code": "duplicate_id"}}
    assert answered["result"]["structuredContent"] == {"episodes": []}


def test_a_batch_refuses_an_id_in_flight_and_its_own_repeated_id(
    root: Path, capfd: pytest.CaptureFixture[str], search_held: list[str]
) -> None:
    piped = _opening() + _line(_call("s", "search", {"query": "cats", "user_id": "u1"})) + \
        json.dumps([_call("s", "record_task", TASK), _call(6, "lessons", {"task_type": "x"}),
                    _call(6, "record_task", TASK)]).encode() + b"\n"

    answers, runtime = _serve(root, piped, capfd, raw=True)

    assert _tasks(runtime) == []
    assert search_held == ["search"]
    [array] = [a for a in answers if isinstance(a, list)]
    [opened, alone] = [a for a in answers if a is not array]
    assert opened["id"] == 1
    assert alone["id"] == "s" and alone["result"]["structuredContent"] == {"episodes": []}
    assert [(a["id"], a["error"]["message"]) for a in array if "error" in a] == [
        ("s", 'id "s" is already in use by a request in flight'),
        (6, "id 6 is already in use by a request in flight")]
    assert [a["result"]["structuredContent"] for a in array if "result" in a] == [
        {"lessons": [], "total": 0}]


class _Paced:
    """stdin whose line ``gate_at`` is read only once ``gate`` is set."""

    def __init__(self, piped: bytes, gate_at: int, gate: threading.Event) -> None:
        self._lines = iter(enumerate(piped.splitlines(keepends=True)))
        self._gate_at, self._gate = gate_at, gate

    def readline(self, size: int = -1) -> bytes:
        number, line = next(self._lines, (None, b""))
        if number == self._gate_at:
            assert self._gate.wait(timeout=60), "the first request was never answered"
        return line


def test_an_id_is_free_again_once_its_request_is_answered(
    root: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    answered = threading.Event()
    settled = mcp_server.Unanswered.settled

    def noting(self: mcp_server.Unanswered, request_id: Any) -> bool:
        if request_id == 7:
            answered.set()
        return settled(self, request_id)

    monkeypatch.setattr(mcp_server.Unanswered, "settled", noting)
    piped = _opening() + _line(_call(7, "lessons", {"task_type": "deploy"})) + \
        _line(_call(7, "record_task", TASK))
    stdin = _Paced(piped, gate_at=3, gate=answered)  # the second request 7

    answers, runtime = _serve(root, piped, capfd, stdin=stdin)

    [task] = _tasks(runtime)
    first, second = answers[7]
    assert first["result"]["structuredContent"] == {"lessons": [], "total": 0}
    assert second["result"]["structuredContent"]["id"] == task.id
