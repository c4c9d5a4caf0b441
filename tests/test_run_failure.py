"""Failure looks like failure: a run whose every unit failed is ``failed``, a run where some
failed is ``partial`` — in the run record, the trigger's answer, ``status`` and the exit code of
``trigger``. ``trigger`` on a disabled strategy without ``--force`` exits non-zero."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli import engine_cmds
from everos_reflect.cli.main import cli
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.engine import registry
from everos_reflect.engine.engine import Engine, list_runs
from everos_reflect.engine.registry import RunContext, Strategy, judge_counts
from everos_reflect.errors import ProviderUnavailable
from everos_reflect.llm.base import ScriptedLLM
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from everos_reflect.strategies.reflect import ReflectEpisodes
from tests.reflect_fixtures import make_runtime, seed_pets


class Counted(Strategy):
    """Returns whatever counts the test sets."""

    name = "counted_test"
    description = "test double"
    failure_counts = ("failed",)
    unit_counts = ("done", "failed")

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def run(self, ctx: RunContext) -> dict[str, int]:
        return dict(self.counts)


@pytest.fixture
def counted() -> Iterator[Counted]:
    strategy = Counted()
    registry.register(strategy)
    yield strategy
    registry.unregister(strategy.name)


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Runtime]:
    rt = Runtime(tmp_path, Settings(), embedder=HashEmbedder())
    yield rt
    rt.close()


@pytest.mark.parametrize(("counts", "status"), [
    ({"done": 3}, "ok"),
    ({}, "ok"),
    ({"done": 2, "failed": 1}, "partial"),
    ({"failed": 4}, "failed"),
])
def test_run_status_follows_its_units(runtime: Runtime, counted: Counted,
                                      counts: dict[str, int], status: str) -> None:
    counted.counts = counts
    outcome = Engine(runtime).trigger(counted.name, force=True, timeout=10)

    assert outcome.status == status
    [run] = list_runs(runtime, strategy=counted.name)
    assert run["status"] == status and run["counts"] == counts
    if status == "ok":
        assert run["error"] is None
    else:
        assert "failed" in run["error"] and outcome.error == run["error"]


def test_without_declared_units_any_failure_is_partial() -> None:
    class Plain(Strategy):
        name = "plain"

    assert judge_counts(Plain(), {"failed": 2}) == ("partial", "2 units failed (failed=2)")
    assert judge_counts(Plain(), {"merged": 2})[0] == "ok"


def test_a_run_where_every_answer_was_rejected_is_failed_a_single_rejection_is_not() -> None:
    judge = ReflectEpisodes()

    status, why = judge_counts(judge, {"rejected": 6})
    assert status == "failed" and why is not None and "rejected=6" in why
    assert judge_counts(judge, {"rejected": 2, "failed": 1})[0] == "failed"
    assert judge_counts(judge, {"merged": 3, "rejected": 1}) == ("ok", None)
    assert judge_counts(judge, {"stale": 1, "rejected": 1}) == ("ok", None)  # stale: not failed
    assert judge_counts(judge, {"merged": 1, "rejected": 1, "failed": 1})[0] == "partial"


def test_reflection_whose_every_merge_was_rejected_is_recorded_failed(tmp_path: Path) -> None:
    lossy = ("Andrew's dogs", "Andrew has a dog.")  # drops every other fact: the guard refuses
    rt = make_runtime(tmp_path, ScriptedLLM([lossy] * 10, [["Andrew has a dog."]] * 10))
    seed_pets(rt)
    before = {p: p.read_bytes() for p in rt.store.iter_files()}

    outcome = Engine(rt).trigger(ReflectEpisodes.name, force=True, timeout=60)

    assert outcome.status == "failed", outcome
    assert outcome.counts.get("rejected") and not outcome.counts.get("merged")
    assert "rejected" in (outcome.error or "")
    assert {p: p.read_bytes() for p in rt.store.iter_files()} == before


def _failing_reflection_root(root: Path) -> Runtime:
    llm = ScriptedLLM([ProviderUnavailable("HTTP 500 from the provider")] * 10)
    rt = make_runtime(root, llm)
    seed_pets(rt)
    return rt


def test_reflection_whose_every_cluster_failed_is_recorded_failed(tmp_path: Path) -> None:
    rt = _failing_reflection_root(tmp_path)

    outcome = Engine(rt).trigger(ReflectEpisodes.name, force=True, timeout=60)

    assert outcome.status == "failed", outcome
    assert outcome.counts.get("failed") == 1 and not outcome.counts.get("merged")
    assert list_runs(rt)[0]["status"] == "failed"
    from everos_reflect.engine.engine import strategies_status

    [row] = [r for r in strategies_status(rt) if r["name"] == ReflectEpisodes.name]
    assert row["last_run"]["status"] == "failed"  # what `status` and the API show


def _cli_with(monkeypatch: pytest.MonkeyPatch, rt: Runtime) -> CliRunner:
    monkeypatch.setattr(engine_cmds, "open_runtime", lambda root: rt)
    return CliRunner()


def test_trigger_exit_code_is_1_when_every_unit_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = _failing_reflection_root(tmp_path)

    result = _cli_with(monkeypatch, rt).invoke(
        cli, ["trigger", ReflectEpisodes.name, "--force", "--root", str(tmp_path)])

    assert result.exit_code == 1, result.output
    assert "reflect_episodes: failed" in result.stdout
    assert "every unit failed" in result.stderr


def test_trigger_exit_code_is_3_on_partial_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runtime: Runtime, counted: Counted
) -> None:
    counted.counts = {"done": 1, "failed": 1}

    result = _cli_with(monkeypatch, runtime).invoke(
        cli, ["trigger", counted.name, "--force", "--json", "--root", str(runtime.root)])

    assert result.exit_code == 3, result.output
    assert '"status": "partial"' in result.stdout


def test_trigger_of_a_disabled_strategy_without_force_exits_4(
    monkeypatch: pytest.MonkeyPatch, runtime: Runtime, counted: Counted
) -> None:
    result = _cli_with(monkeypatch, runtime).invoke(
        cli, ["trigger", counted.name, "--root", str(runtime.root)])

    assert result.exit_code == 4, result.output
    assert "counted_test is disabled" in result.stderr and "force" in result.stderr
    assert list_runs(runtime) == []  # nothing ran


def test_an_in_process_run_that_raised_is_reported_without_a_traceback(tmp_path: Path) -> None:
    # A real process (pytest's own log capture would hide the difference): with no logging
    # configured, the engine's log.exception went to Python's last-resort handler, which
    # printed the whole traceback above the one-line error (SPEC §8: no traceback).
    import os
    import subprocess
    import sys

    root = tmp_path / "root"
    env = {**os.environ, "EVEROS_ROOT": str(root), "HOME": str(tmp_path),
           "EVEROS_EMBEDDING__PROVIDER": "openai", "EVEROS_EMBEDDING__MODEL": "m",
           "EVEROS_EMBEDDING__BASE_URL": "http://127.0.0.1:9/v1",  # nothing listens there
           "EVEROS_EMBEDDING__MAX_RETRIES": "0"}
    cli_main = [sys.executable, "-m", "everos_reflect.cli.main"]
    # the setup runs in-process (two interpreter starts fewer); only the failing run needs one
    for args in (["init", str(root)], ["add", "--user", "u1", "--subject", "S", "--content", "C"]):
        setup = CliRunner().invoke(cli, args, env=env)
        assert setup.exit_code == 0, setup.output

    done = subprocess.run([*cli_main, "trigger", ReflectEpisodes.name, "--force"], env=env,
                          capture_output=True, text=True, timeout=120)

    assert done.returncode == 1, done.stderr
    assert "reflect_episodes: failed" in done.stdout
    assert "Traceback" not in done.stderr
    assert "attempt 1 failed: embedding request to" in done.stderr
    assert "ProviderUnavailable" not in done.stderr
