"""``trigger`` run in this process that stops waiting (``--timeout``) and then waits for the
run to finish says what a trigger that waited says: why a run that went fine had nothing to
do (``reason``). It read the outcome back from the run record, which has no field for it, and
said "nothing to do" alone."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.engine import registry
from everos_reflect.engine.engine import Engine
from everos_reflect.engine.registry import RunContext, Strategy

REASON = "nothing new since the last run, says the test double"


class Gated(Strategy):
    """A run that does nothing, once let through, and can tell why."""

    name = "gated_idle_test"
    description = "test double"

    def __init__(self) -> None:
        self.gate = threading.Event()

    def run(self, ctx: RunContext) -> dict[str, int]:
        self.gate.wait(60)
        return {}

    def idle_reason(self, runtime: Any, settings: Any, counts: Any) -> str | None:
        return REASON


@pytest.fixture
def gated(monkeypatch: pytest.MonkeyPatch) -> Iterator[Gated]:
    strategy = Gated()
    registry.register(strategy)
    wait_idle = Engine.wait_idle

    def let_through_then_wait(self: Engine, timeout: float | None = None) -> bool:
        # the trigger stopped waiting (timeout 0, the run held): now the run may end
        strategy.gate.set()
        return wait_idle(self, timeout)

    monkeypatch.setattr(Engine, "wait_idle", let_through_then_wait)
    yield strategy
    strategy.gate.set()
    registry.unregister(strategy.name)


def test_a_trigger_that_outwaits_its_timeout_still_says_why_there_was_nothing_to_do(
        root: Path, gated: Gated) -> None:
    result = CliRunner().invoke(cli, ["trigger", gated.name, "--force", "--timeout", "0",
                                      "--json", "--root", str(root)])
    assert result.exit_code == 0, result.output
    assert "the run goes on in this process" in result.stderr  # it did time out first
    answer = json.loads(result.stdout)
    assert (answer["status"], answer["reason"]) == ("ok", REASON)


def test_the_text_line_after_a_timeout_says_the_reason(root: Path, gated: Gated) -> None:
    result = CliRunner().invoke(cli, ["trigger", gated.name, "--force", "--timeout", "0",
                                      "--root", str(root)])
    assert result.exit_code == 0, result.output
    assert f"nothing to do: {REASON}" in result.stdout


def test_an_engine_keeps_the_outcome_of_a_finished_run_by_its_id(
        root: Path, gated: Gated) -> None:
    from everos_reflect.embedding import HashEmbedder
    from everos_reflect.runtime import Runtime

    runtime = Runtime(root, embedder=HashEmbedder(16))
    try:
        engine = Engine(runtime)
        gated.gate.set()
        out = engine.trigger(gated.name, force=True, timeout=None)
        assert out.run_id is not None
        assert engine.outcome_of(out.run_id) == out
        assert engine.outcome_of("run_nosuch") is None
    finally:
        runtime.close()
