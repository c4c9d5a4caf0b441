"""The engine's recovery hook: every registered strategy is asked to settle what a crash
interrupted — before each of its runs, at ``serve`` start-up, and before a CLI write when it
says a writer must wait — and a derived tier recovers through its commit intents."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from everos_reflect.engine import registry
from everos_reflect.engine.engine import Engine, lock_path
from everos_reflect.engine.recovery import has_interrupted, recover_all, settle
from everos_reflect.engine.registry import RunContext, Strategy, validate_strategy_settings
from everos_reflect.index import cursors
from everos_reflect.index.audit import list_derivations
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import insights as insights_mod
from everos_reflect.strategies.insights import NAME, ReflectInsights
from tests.reflect_fixtures import add_episode, make_runtime

DEV = UserRef.of("u_dev")


class Journaled(Strategy):
    """A strategy with its own interrupted work: ``pending`` units until recovered."""

    name = "journaled_test"
    description = "test double"

    def __init__(self) -> None:
        self.pending = 0
        self.order: list[str] = []

    def run(self, ctx: RunContext) -> dict[str, int]:
        self.order.append("run")
        return {"done": 1}

    def recover(self, runtime: Runtime) -> dict[str, int]:
        self.order.append("recover")
        n, self.pending = self.pending, 0
        return {"recovered": n} if n else {}

    def has_interrupted(self, root: Path) -> bool:
        return self.pending > 0


@pytest.fixture
def journaled() -> Iterator[Journaled]:
    strategy = Journaled()
    registry.register(strategy)
    yield strategy
    registry.unregister(strategy.name)


@pytest.fixture
def rt(root: Path) -> Iterator[Runtime]:
    runtime = make_runtime(root, ExtractiveLLM())
    yield runtime
    runtime.close()


def test_the_engine_recovers_a_strategy_before_its_run_and_records_it(
        rt: Runtime, journaled: Journaled) -> None:
    journaled.pending = 2
    outcome = Engine(rt).trigger(journaled.name, force=True, timeout=30)
    assert outcome.status == "ok"
    assert journaled.order == ["recover", "run"]
    assert outcome.counts == {"done": 1, "recovered": 2}
    assert Engine(rt).last_run(journaled.name)["counts"] == {"done": 1, "recovered": 2}


def test_start_up_asks_every_strategy_and_skips_one_whose_lock_is_held(
        rt: Runtime, journaled: Journaled) -> None:
    journaled.pending = 1
    path = lock_path(rt.root, journaled.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    held = FileLock(str(path), thread_local=False)
    held.acquire()
    try:
        assert journaled.name not in recover_all(rt)  # its running owner recovers itself
        assert journaled.pending == 1
    finally:
        held.release()
    assert recover_all(rt)[journaled.name] == {"recovered": 1}
    assert recover_all(rt).get(journaled.name) is None  # idempotent


def test_a_writing_command_settles_only_what_says_it_must(
        rt: Runtime, journaled: Journaled) -> None:
    assert not has_interrupted(rt.root)
    journaled.pending = 3
    assert has_interrupted(rt.root)
    assert settle(rt) == 3
    assert not has_interrupted(rt.root)


# -- a derived tier: commit intents ------------------------------------------------------------


def history(rt: Runtime) -> None:
    for i in range(20):
        add_episode(rt, DEV, f"2026-08-{1 + i % 28:02d}T09:00:00+00:00", f"Standup {i}",
                    f"Daily standup number {i} about the billing dashboard.", importance=8)
    for week in range(4):
        add_episode(rt, DEV, f"2026-10-{1 + 7 * week:02d}T09:00:00+00:00", "Deploy retry",
                    "Before retrying the deploy the user asked to see the kubernetes logs.",
                    importance=8)


def window(rt: Runtime) -> dict[str, str]:
    settings = validate_strategy_settings(NAME, {}, "ome.toml")
    return ReflectInsights().pending(rt, DEV, settings)[1]


class PowerCut(BaseException):
    """Stands for the process dying (not an Exception: one of those fails the owner
    alone)."""


def crash(monkeypatch: pytest.MonkeyPatch, rt: Runtime, target: tuple[Any, str]) -> None:
    def cut(*args: Any, **kwargs: Any) -> None:
        raise PowerCut("the process died here")

    with monkeypatch.context() as patch:
        patch.setattr(*target, cut)
        assert Engine(rt, recover=False).trigger(NAME, force=True, timeout=60).status == \
            "failed"


def test_an_interrupted_insight_commit_is_recovered_at_start_up_though_new_episodes_came(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    history(rt)
    before = window(rt)
    crash(monkeypatch, rt, (insights_mod, "sync"))  # after the Markdown write
    written = rt.store.entries(DEV, Kind.INSIGHT)
    assert written and len(cursors.intents(rt.db(), NAME)) == 1
    late = add_episode(rt, DEV, "2026-10-30T09:00:00+00:00", "Late", "A later episode.",
                       importance=3)  # the window key a re-run would compute has changed
    assert recover_all(rt)[NAME] == {"recovered": 1}
    assert cursors.intents(rt.db(), NAME) == []
    assert rt.store.entries(DEV, Kind.INSIGHT) == written  # nothing written twice
    (row,) = list_derivations(rt.db(), strategy=NAME)
    assert row["status"] == "ok" and sorted(row["inputs"]) == sorted(before)
    assert sorted(row["outputs"]) == sorted(e.id for e in written)
    assert list(window(rt)) == [late.id]  # the cursor moved by exactly the crashed window
    indexed = {r[0] for r in rt.db().execute("SELECT id FROM entries WHERE kind='insight'")}
    assert indexed == {e.id for e in written}


def test_an_intent_with_nothing_written_is_withdrawn_and_the_window_stays(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    history(rt)
    before = window(rt)
    crash(monkeypatch, rt, (ReflectInsights, "_write"))  # before any Markdown write
    assert rt.store.entries(DEV, Kind.INSIGHT) == []
    assert recover_all(rt)[NAME] == {"withdrawn": 1}
    assert cursors.intents(rt.db(), NAME) == [] and list_derivations(rt.db()) == []
    assert window(rt) == before
    outcome = Engine(rt).trigger(NAME, force=True, timeout=60)  # the next run does the work
    assert outcome.status == "ok" and outcome.counts.get("written", 0) >= 1


KILLED_RUN = """
import os, sys
from pathlib import Path
from everos_reflect.engine.engine import Engine
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.strategies import insights
from tests.reflect_fixtures import make_runtime

def die(*args, **kwargs):
    os._exit(9)  # the process dies here: no exception, no finally, no clean-up

insights.sync = die  # right after the insights' Markdown write
rt = make_runtime(Path(sys.argv[1]), ExtractiveLLM())
Engine(rt).trigger("reflect_insights", force=True, timeout=120)
"""


def test_a_process_killed_mid_commit_leaves_an_intent_the_next_start_finishes(
        rt: Runtime) -> None:
    import subprocess
    import sys

    history(rt)
    before = window(rt)
    done = subprocess.run([sys.executable, "-c", KILLED_RUN, str(rt.root)],
                          cwd=Path(__file__).resolve().parents[1], timeout=300,
                          capture_output=True, text=True)
    assert done.returncode == 9, done.stderr[-2000:]
    written = rt.store.entries(DEV, Kind.INSIGHT)
    assert written, "the kill came after the Markdown write"
    assert len(cursors.intents(rt.db(), NAME)) == 1 and list_derivations(rt.db()) == []
    Engine(rt).recover()  # the dead process's run row → abandoned
    assert Engine(rt).last_run(NAME)["status"] == "abandoned"
    assert recover_all(rt)[NAME] == {"recovered": 1}
    assert rt.store.entries(DEV, Kind.INSIGHT) == written
    assert window(rt) == {} and sorted(list_derivations(rt.db())[0]["inputs"]) == sorted(before)
