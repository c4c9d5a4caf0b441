"""MCP over stdio: a session's tool calls take effect in the order the client sent them.

The SDK runs each request as it arrives, side by side, so an agent that piped ``add_episode``
and then ``search`` could get a search that did not see the new Episode. A call that writes
now starts once every call sent before it is done, any call once every write sent before it
is done; reads still run side by side.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.api import mcp_server, ops
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from tests.test_mcp_eof import _call, _line, _opening, _serve

EPISODE = {"user_id": "u_ann", "subject": "Pets", "content": "Ann adopted a grey cat called Miso.",
           "timestamp": "2026-10-12T09:30:00+00:00"}
SEARCH = {"query": "grey cat Miso", "user_id": "u_ann"}


class Waits(logging.Handler):
    """Which calls waited for their turn (the server logs each at debug level)."""

    def __init__(self) -> None:
        super().__init__()
        self.any = threading.Event()
        self._of: dict[str, threading.Event] = {}

    def of(self, request_id: int) -> threading.Event:
        return self._of.setdefault(str(request_id), threading.Event())

    def emit(self, record: logging.LogRecord) -> None:
        if "waits for" in record.msg:
            self.of(record.args[0]).set()  # type: ignore[index]
            self.any.set()


@pytest.fixture
def waits(caplog: pytest.LogCaptureFixture) -> Iterator[Waits]:
    mcp_server.log.addHandler(handler := Waits())
    try:
        with caplog.at_level(logging.DEBUG, logger="everos_reflect.mcp"):
            yield handler
    finally:
        mcp_server.log.removeHandler(handler)


def _wrap(monkeypatch: pytest.MonkeyPatch, name: str,
          before: Callable[[], None], after: Callable[[], None] = lambda: None) -> None:
    """``ops.<name>`` runs ``before`` first and ``after`` once done."""
    real = getattr(ops, name)

    def wrapped(runtime: Runtime, body: Any) -> dict[str, Any]:
        before()
        try:
            return real(runtime, body)
        finally:
            after()

    monkeypatch.setattr(ops, name, wrapped)


def test_a_search_sent_right_after_add_episode_sees_the_new_episode(
    root: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    waits: Waits,
) -> None:
    # add_episode is held until the search waits for it, or, should the search not wait,
    # until the search starts: then the search ran beside the write
    added, searched_early = threading.Event(), threading.Event()

    def hold() -> None:
        assert waits.any.wait(timeout=60) or searched_early.is_set()

    def search_starts() -> None:
        if not added.is_set():
            searched_early.set()
            waits.any.set()

    _wrap(monkeypatch, "add_episode", hold, added.set)
    _wrap(monkeypatch, "search", search_starts)
    piped = _opening() + _line(_call(2, "add_episode", EPISODE)) + \
        _line(_call(3, "search", SEARCH))

    answers, runtime = _serve(root, piped, capfd)
    runtime.close()

    assert not searched_early.is_set(), "search ran before add_episode was done"
    added_id = answers[2][0]["result"]["structuredContent"]["id"]
    assert [h["id"] for h in answers[3][0]["result"]["structuredContent"]["episodes"]] == [
        added_id]


def test_a_write_waits_for_the_reads_sent_before_it(
    root: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    waits: Waits,
) -> None:
    # the search is held until add_episode waits for it, or, should it not wait, until
    # add_episode starts: then the write ran beside the read sent before it
    write_started = threading.Event()
    seen: list[bool] = []

    def hold() -> None:
        assert waits.any.wait(timeout=60)
        seen.append(write_started.is_set())

    def write_starts() -> None:
        write_started.set()
        waits.any.set()

    _wrap(monkeypatch, "search", hold)
    _wrap(monkeypatch, "add_episode", write_starts)
    piped = _opening() + _line(_call(2, "search", SEARCH)) + \
        _line(_call(3, "add_episode", EPISODE))

    answers, runtime = _serve(root, piped, capfd)
    runtime.close()

    assert seen == [False], "add_episode started before the search sent before it was done"
    assert answers[2][0]["result"]["structuredContent"] == {"episodes": []}
    assert answers[3][0]["result"]["structuredContent"]["id"].startswith("ep_20261012_")


def test_reads_sent_together_run_side_by_side(
    root: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the first search returns only once the second has started: run one after the
    # other, they would never both answer
    second_started = threading.Event()
    calls: list[str] = []

    def search_starts() -> None:
        calls.append("search")
        if len(calls) == 1:
            assert second_started.wait(timeout=60), "the second read waited for the first"
        else:
            second_started.set()

    _wrap(monkeypatch, "search", search_starts)
    piped = _opening() + _line(_call(2, "search", SEARCH)) + _line(_call(3, "search", SEARCH))

    answers, runtime = _serve(root, piped, capfd)
    runtime.close()

    assert [answers[i][0]["result"]["structuredContent"] for i in (2, 3)] == [
        {"episodes": []}] * 2


def test_a_call_cancelled_while_it_waits_does_not_hold_back_those_after_it(
    root: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    waits: Waits,
) -> None:
    # add_episode is held until the search sent last waits for it: by then the client's
    # cancel of the record_task waiting behind the write has been read, so the record_task
    # never runs, and the search runs once the write is done
    added = threading.Event()

    def hold() -> None:
        assert waits.of(4).wait(timeout=60)

    def search_starts() -> None:
        assert added.is_set(), "search ran before add_episode was done"

    _wrap(monkeypatch, "add_episode", hold, added.set)
    _wrap(monkeypatch, "search", search_starts)
    piped = _opening() + b"".join(_line(m) for m in [
        _call(2, "add_episode", EPISODE),
        _call(3, "record_task", {"user_id": "u_ann", "task_type": "deploy", "goal": "ship",
                                 "steps": ["build"], "outcome": "success"}),
        {"jsonrpc": "2.0", "method": "notifications/cancelled",
         "params": {"requestId": 3, "reason": "changed my mind"}},
        _call(4, "search", SEARCH),
    ])

    answers, runtime = _serve(root, piped, capfd, quiet_seconds=30)
    try:
        tasks = runtime.store.entries(UserRef.of("u_ann"), Kind.TASK)
    finally:
        runtime.close()

    assert tasks == []
    assert set(answers) == {1, 2, 4}
    added_id = answers[2][0]["result"]["structuredContent"]["id"]
    assert [h["id"] for h in answers[4][0]["result"]["structuredContent"]["episodes"]] == [
        added_id]
