"""What ``trigger`` prints in one line: a run that went fine and changed nothing says so."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from everos_reflect.cli.engine_cmds import outcome_line
from everos_reflect.cli.main import cli
from everos_reflect.engine.engine import RunOutcome


def test_a_run_with_nothing_to_merge_says_nothing_to_do(tmp_path: Path) -> None:
    root = tmp_path / "root"
    runner = CliRunner()
    assert runner.invoke(cli, ["init", str(root)]).exit_code == 0
    assert runner.invoke(cli, ["enable", "reflect_episodes", "--root", str(root)]).exit_code == 0

    result = runner.invoke(cli, ["trigger", "reflect_episodes", "--root", str(root)])

    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("reflect_episodes: ok (run run_")
    assert result.stdout.rstrip().endswith("— nothing to do [in-process]")


def test_counts_of_work_done_are_shown_without_nothing_to_do() -> None:
    done = RunOutcome("ok", "reflect_episodes", "run_1", {"merged": 2, "deferred_sources": 0})
    assert outcome_line(done, "daemon") == (
        "reflect_episodes: ok (run run_1) merged=2, deferred_sources=0 [daemon]")
    zeros = RunOutcome("ok", "reflect_episodes", "run_2", {"merged": 0, "deferred_sources": 0})
    assert outcome_line(zeros, "daemon").endswith(
        "merged=0, deferred_sources=0 — nothing to do [daemon]")
    failed = RunOutcome("failed", "reflect_episodes", "run_3", {}, error="boom")
    assert "nothing to do" not in outcome_line(failed, "daemon")
