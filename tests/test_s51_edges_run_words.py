"""What a run says when it ends: its counts in words, and an in-process ``trigger``'s failure
reason said once.

The engine logged a run's counts as a Python dict (``{'deferred_sources': 0, 'failed':
1}``), and an in-process ``trigger`` of a run whose one cluster's LLM call failed printed the
reason three times: the strategy's warning, the engine's closing log record and the outcome's
reason.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli

REASON = "connection failed (gave up after 1 attempt)"


def closed_port() -> int:
    """A loopback port nothing listens on: a connection to it is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def a_root_whose_llm_is_down(tmp_path: Path) -> Path:
    """A root with Reflection enabled, one cluster of three Episodes to merge, and an LLM
    server nobody listens at (no retry)."""
    root = tmp_path / "root"
    runner = CliRunner()
    assert runner.invoke(cli, ["init", str(root)]).exit_code == 0
    assert runner.invoke(cli, ["enable", "reflect_episodes", "--root", str(root)]).exit_code == 0
    for day in (11, 12, 13):
        added = runner.invoke(cli, [
            "add", "--root", str(root), "--user", "u1", "--subject", "Dog",
            "--content", f"Andrew walked his dog Rex in the park, walk {day}",
            "--timestamp", f"2026-10-{day}T10:00:00+00:00"])
        assert added.exit_code == 0, added.output
    with (root / "everos.toml").open("a") as toml:
        toml.write(f'\n[llm]\nprovider = "openai"\nbase_url = "http://127.0.0.1:{closed_port()}'
                   '/v1"\napi_key = "k"\nmax_retries = 0\n')
    return root


def test_counts_are_said_in_words_in_their_order() -> None:
    from everos_reflect.engine.engine import counts_words

    assert counts_words({"merged": 3, "deferred_sources": 0, "failed": 1204}) == (
        "3 merged, 0 deferred sources, 1,204 failed")
    assert counts_words({}) == "nothing counted"


def test_the_log_of_a_run_s_end_says_its_counts_in_words(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = a_root_whose_llm_is_down(tmp_path)
    with caplog.at_level(logging.INFO, logger="everos_reflect.engine.engine"):
        result = CliRunner().invoke(cli, ["trigger", "reflect_episodes", "--root", str(root)])
    assert result.exit_code == 1, result.output
    [end] = [r.getMessage() for r in caplog.records
             if r.name == "everos_reflect.engine.engine" and " failed: " in r.getMessage()]
    assert "0 deferred sources, 1 failed (every unit failed" in end, end
    assert "{" not in end


def test_an_in_process_trigger_says_the_failure_once(tmp_path: Path) -> None:
    """Run as a person runs it (a process of its own): under pytest the log records go to
    pytest's handlers, not to the command's stderr."""
    root = a_root_whose_llm_is_down(tmp_path)

    result = subprocess.run(
        [sys.executable, "-m", "everos_reflect.cli.main", "trigger", "reflect_episodes",
         "--root", str(root)], capture_output=True, text=True, timeout=300, check=False)

    assert result.returncode == 1, result.stderr
    assert result.stdout.startswith("reflect_episodes: failed (run run_")
    assert (result.stdout + result.stderr).count(REASON) == 1, result.stderr
    # said in the outcome's reason, which names the cluster
    [reason] = [line for line in result.stderr.splitlines() if REASON in line]
    assert reason.startswith("  every unit failed (failed=1); failed: ")
    assert "cluster cl_" in reason


def test_a_warning_the_reason_does_not_carry_is_still_printed(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The held warnings are dropped only when the outcome's reason quotes all they say."""
    from everos_reflect.cli.engine_cmds import RunLog

    handler = RunLog()
    log = logging.getLogger("everos_reflect.strategy.some_strategy")
    log.addHandler(handler)
    log.propagate = False
    try:
        log.warning("cluster %s of %s skipped: %s", "cl_1", "u1", "boom")
        log.warning("cluster %s of %s skipped: %s", "cl_2", "u1", "a reason cut short")
    finally:
        log.removeHandler(handler)
        log.propagate = True
    assert capsys.readouterr().err == ""  # held until the run ends
    handler.print_held("failed: u1: cluster cl_1: boom; u1: cluster cl_2: a reason cu…")
    assert capsys.readouterr().err == "cluster cl_2 of u1 skipped: a reason cut short\n"
