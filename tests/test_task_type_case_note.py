"""Lessons are served per task type, and task types are case-sensitive: ``--task-type Deploy``
for a user whose lessons are of ``deploy`` got no lesson and no word (``briefing`` printed its
block without them, ``lessons`` said "no lessons for task type 'Deploy' yet"), as if nothing
had been learned. Both now name the task types the user has lessons for."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime

REF = UserRef.of("u_ops")


def _root_with_a_deploy_lesson(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    assert CliRunner().invoke(cli, ["init", str(root)]).exit_code == 0
    runtime = Runtime(root, embedder=HashEmbedder(16))
    try:
        runtime.store.append(REF, Kind.LESSON, {
            "owner_id": REF.user_id, "timestamp": "2026-10-01T10:00:00+00:00",
            "task_type": "deploy", "lesson_type": "do", "status": "active",
            "confirmations": 2}, {"Lesson": "Check the logs before retrying."})
    finally:
        runtime.close()
    return root


def test_lessons_of_another_case_name_the_task_types_there_are(
        tmp_path: Path, no_everos_env: None) -> None:
    root = _root_with_a_deploy_lesson(tmp_path)
    args = ["lessons", "--root", str(root), "--user", "u_ops", "--task-type"]
    result = CliRunner().invoke(cli, [*args, "Deploy"])
    assert result.exit_code == 0, result.output
    assert result.stdout == ("no lessons for task type 'Deploy' yet; this user has lessons for "
                             "deploy\n")
    assert "Check the logs" in CliRunner().invoke(cli, [*args, "deploy"]).stdout


def test_a_briefing_for_another_case_says_so_on_stderr(
        tmp_path: Path, no_everos_env: None) -> None:
    root = _root_with_a_deploy_lesson(tmp_path)
    args = ["briefing", "logs", "--root", str(root), "--user", "u_ops", "--task-type"]
    result = CliRunner().invoke(cli, [*args, "Deploy"])
    assert result.exit_code == 0, result.output
    assert "Lessons" not in result.stdout
    assert result.stderr == ("note: no lessons for task type 'Deploy'; this user has lessons "
                             "for deploy\n")
    typed = CliRunner().invoke(cli, [*args, "deploy"])
    assert "Lessons for deploy" in typed.stdout and typed.stderr == ""
    assert CliRunner().invoke(cli, [*args, "Deploy", "--json"]).stderr == ""
