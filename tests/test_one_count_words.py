"""A count of one reads as one: ``briefing --max-tokens 1`` said "(nothing fits in 1 tokens)",
and an offline ``do`` lesson learned beside a single failed task was written "… and none of
the 1 failed ones." into the user's lesson log."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.procedural.learning import offline_candidates
from everos_reflect.procedural.tasks import TaskRecord


def _task(n: int, outcome: str, steps: tuple[str, ...]) -> TaskRecord:
    return TaskRecord(id=f"tk_20261001_000{n}", task_type="deploy", outcome=outcome,
                      goal="Deploy the web service", steps=steps)


def test_a_do_lesson_beside_one_failure_says_the_failed_one() -> None:
    tasks = [_task(1, "success", ("check logs", "deploy")),
             _task(2, "success", ("check logs", "deploy")),
             _task(3, "failure", ("deploy",))]
    [lesson] = offline_candidates(tasks)
    assert lesson.text == ('Do "check logs": when learned, all 2 successful deploy tasks did '
                           "it and the failed one did not.")


def test_a_do_lesson_beside_two_failures_counts_them() -> None:
    tasks = [_task(1, "success", ("check logs",)), _task(2, "success", ("check logs",)),
             _task(3, "failure", ("deploy",)), _task(4, "failure", ("deploy",))]
    [lesson] = offline_candidates(tasks)
    assert lesson.text.endswith("did it and none of the 2 failed ones.")


def test_a_briefing_of_one_token_says_one_token(tmp_path: Path, no_everos_env: None) -> None:
    root = tmp_path / "root"
    runner = CliRunner()
    assert runner.invoke(cli, ["init", str(root)]).exit_code == 0
    result = runner.invoke(cli, ["briefing", "deploy", "--root", str(root), "--user", "u1",
                                 "--max-tokens", "1"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "(nothing fits in 1 token)\n"
