"""What a run record, ``runs``, ``status``, ``trigger`` and an API or MCP answer say of a
failure: its cause in a person's words, not a Python class name and errno number
("OSError: [Errno 28] No space left on device", "ValueError: …"). Only a defect of the
program names its type ("internal error (KeyError: 'between')")."""

from __future__ import annotations

import errno
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.embedding import HashEmbedder
from everos_reflect.engine import registry
from everos_reflect.engine.engine import Engine
from everos_reflect.engine.registry import RunContext, Strategy
from everos_reflect.errors import InvalidId, describe
from everos_reflect.runtime import Runtime


@pytest.mark.parametrize(("exc", "said"), [
    (OSError(errno.ENOSPC, "No space left on device"), "No space left on device"),
    (OSError(errno.ENOSPC, "No space left on device", "/r/u/episode-2026-10-12.md"),
     "No space left on device: /r/u/episode-2026-10-12.md"),
    (ValueError("the reply is not JSON"), "the reply is not JSON"),
    (RuntimeError("provider down"), "provider down"),
    (InvalidId("invalid user_id '..'"), "invalid user_id '..'"),
    (KeyError("between"), "internal error (KeyError: 'between')"),
    (TypeError("unhashable type: 'list'"), "internal error (TypeError: unhashable type: 'list')"),
    (AssertionError(), "internal error (AssertionError)"),
])
def test_a_failure_is_said_by_its_cause(exc: Exception, said: str) -> None:
    assert describe(exc) == said


class Full(Strategy):
    """A run that fails as a full disk fails it."""

    name = "disk_full_test"
    description = "test double"

    def run(self, ctx: RunContext) -> dict[str, int]:
        raise OSError(errno.ENOSPC, "No space left on device")


@pytest.fixture
def full() -> Iterator[Full]:
    strategy = Full()
    registry.register(strategy)
    yield strategy
    registry.unregister(strategy.name)


def test_a_failed_run_records_the_cause_without_the_exception_type(
        root: Path, full: Full) -> None:
    runtime = Runtime(root, embedder=HashEmbedder(16))
    try:
        out = Engine(runtime).trigger(full.name, force=True)
        assert (out.status, out.error) == ("failed", "No space left on device")
        assert Engine(runtime, recover=False).last_run(full.name)["error"] == (
            "No space left on device")
    finally:
        runtime.close()
    listed = CliRunner().invoke(cli, ["runs", "--root", str(root)])
    assert "    No space left on device" in listed.stdout, listed.output
    assert "OSError" not in listed.stdout and "Errno" not in listed.stdout
    rows = json.loads(CliRunner().invoke(cli, ["runs", "--root", str(root), "--json"]).stdout)[
        "runs"]
    assert rows[0]["error"] == "No space left on device"


def _library_errors() -> list[tuple[Exception, str]]:
    import httpx
    import ray.exceptions

    request = httpx.Request("POST", "http://127.0.0.1:8000/api/v1/ome/trigger")
    return [
        (httpx.ReadError("", request=request), "read error"),
        (httpx.RemoteProtocolError("Server disconnected without sending a response.",
                                   request=request),
         "Server disconnected without sending a response."),
        (ray.exceptions.WorkerCrashedError(),
         "The worker died unexpectedly while executing this task. Check "
         "python-core-worker-*.log files for more information."),
        (ray.exceptions.RayTaskError("run", "Traceback (most recent call last): ...",
                                     OSError(errno.ENOSPC, "No space left on device")),
         "No space left on device"),
        (TimeoutError(), "timeout error"),
        (OSError(errno.EIO, ""), "Input/output error"),
    ]


@pytest.mark.parametrize("case", range(6))
def test_a_library_error_is_said_by_its_message_or_its_kind_in_words(case: int) -> None:
    # ray_backend wrote "Ray: WorkerCrashedError: The worker died …", the daemon client
    # "(ReadError)" for an error without text, and an OSError without text said nothing at
    # all (an empty reason in the run record)
    exc, said = _library_errors()[case]
    assert describe(exc) == said
