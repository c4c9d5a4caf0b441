"""What ``trigger`` prints in one line: a run that went fine and changed nothing says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.engine_cmds import outcome_line
from everos_reflect.cli.main import cli
from everos_reflect.engine.engine import RunOutcome

#: why a Reflection run over clusters all merged (or none) had nothing to do
NO_NEW = ("no new Episodes to merge: no cluster of 2 or more live Episodes was formed or joined "
          "by a new Episode since the last merge")


def test_a_run_with_nothing_to_merge_says_nothing_to_do(tmp_path: Path) -> None:
    root = tmp_path / "root"
    runner = CliRunner()
    assert runner.invoke(cli, ["init", str(root)]).exit_code == 0
    assert runner.invoke(cli, ["enable", "reflect_episodes", "--root", str(root)]).exit_code == 0

    result = runner.invoke(cli, ["trigger", "reflect_episodes", "--root", str(root)])

    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("reflect_episodes: ok (run run_")
    assert result.stdout.rstrip().endswith(f"— nothing to do: {NO_NEW} [in-process]")


def test_counts_of_work_done_are_shown_without_nothing_to_do() -> None:
    done = RunOutcome("ok", "reflect_episodes", "run_1", {"merged": 2, "deferred_sources": 0})
    assert outcome_line(done, "daemon") == (
        "reflect_episodes: ok (run run_1) merged=2, deferred_sources=0 [daemon]")
    zeros = RunOutcome("ok", "reflect_episodes", "run_2", {"merged": 0, "deferred_sources": 0})
    assert outcome_line(zeros, "daemon").endswith(
        "merged=0, deferred_sources=0 — nothing to do [daemon]")
    failed = RunOutcome("failed", "reflect_episodes", "run_3", {}, error="boom")
    assert "nothing to do" not in outcome_line(failed, "daemon")


def test_a_run_whose_catch_up_sync_indexed_logs_says_so_not_nothing_to_do(
        tmp_path: Path) -> None:
    root = tmp_path / "root"
    runner = CliRunner()
    assert runner.invoke(cli, ["init", str(root)]).exit_code == 0
    assert runner.invoke(cli, ["enable", "reflect_episodes", "--root", str(root)]).exit_code == 0
    for day in ("2026-10-12", "2026-10-13"):
        added = runner.invoke(cli, ["add", "--root", str(root), "--user", "u1", "--subject",
                                    "S", "--content", f"note of {day}",
                                    "--timestamp", f"{day}T10:00:00+00:00"])
        assert added.exit_code == 0, added.output

    first = runner.invoke(cli, ["trigger", "reflect_episodes", "--root", str(root), "--json"])
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["logs_indexed"] == 2

    again = runner.invoke(cli, ["trigger", "reflect_episodes", "--root", str(root)])
    assert again.stdout.rstrip().endswith(f"— nothing to do: {NO_NEW} [in-process]"), again.output


def test_a_run_that_only_indexed_says_what_it_indexed() -> None:
    indexed = RunOutcome("ok", "reflect_episodes", "run_1", {}, logs_indexed=2)
    assert outcome_line(indexed, "in-process") == (
        "reflect_episodes: ok (run run_1) — indexed 2 logs, nothing else to do [in-process]")
    one = RunOutcome("ok", "reflect_insights", "run_2", {"written": 0}, logs_indexed=1)
    assert "written=0 — indexed 1 log, nothing else to do" in outcome_line(one, "daemon")
    merged = RunOutcome("ok", "reflect_episodes", "run_3", {"merged": 1}, logs_indexed=1)
    assert "nothing" not in outcome_line(merged, "daemon")


def test_the_daemon_answer_says_how_many_logs_its_run_indexed(tmp_path: Path) -> None:
    # `trigger` through a daemon reads the same field from the API's answer
    from everos_reflect.embedding import HashEmbedder
    from everos_reflect.engine.daemon import RunOutcome as DaemonOutcome
    from everos_reflect.runtime import Runtime
    from everos_reflect.settings import Settings
    from tests.api_client import ApiClient

    root = tmp_path / "root"
    runner = CliRunner()
    assert runner.invoke(cli, ["init", str(root)]).exit_code == 0
    added = runner.invoke(cli, ["add", "--root", str(root), "--user", "u1", "--subject", "S",
                                "--content", "one note", "--timestamp", "2026-10-12T10:00:00Z"])
    assert added.exit_code == 0, added.output
    runtime = Runtime(root, Settings(), embedder=HashEmbedder(16))
    try:
        answer = ApiClient(runtime)("POST", "/api/v1/ome/trigger",
                                    json={"name": "reflect_episodes", "force": True})
    finally:
        runtime.close()
    body = answer.json()
    assert (body["status"], body["logs_indexed"]) == ("ok", 1), body
    outcome = DaemonOutcome(**{k: v for k, v in body.items()
                               if k in DaemonOutcome.__dataclass_fields__})
    assert outcome_line(outcome, "daemon").endswith(
        f"— indexed 1 log, nothing else to do: {NO_NEW} [daemon]")


def test_a_wait_that_timed_out_says_the_run_goes_on() -> None:
    waited = RunOutcome("timeout", "reflect_episodes", "run_1")
    assert outcome_line(waited, "daemon") == (
        "reflect_episodes: timeout (run run_1) — still running; `everos-reflect runs` shows "
        "how it ends [daemon]")


def test_an_unknown_strategy_is_refused_before_a_daemon_out_of_reach_is_tried(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # it said "the daemon (pid 1) could not be reached (…); running in-process", then
    # "error: unknown strategy 'nosuch'"
    import socket

    from everos_reflect.engine.daemon import write_daemon

    root = tmp_path / "root"
    assert CliRunner().invoke(cli, ["init", str(root)]).exit_code == 0
    with socket.socket() as sock:  # a port nothing listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    write_daemon(root, {"pid": 1, "host": "127.0.0.1", "port": port, "root": str(root)})

    result = CliRunner().invoke(cli, ["trigger", "nosuch", "--root", str(root)])

    assert result.exit_code == 1
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("error: unknown strategy 'nosuch' (known: ")
    assert [r.getMessage() for r in caplog.records] == []
