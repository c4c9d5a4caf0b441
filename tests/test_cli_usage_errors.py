"""Bad options and arguments: one ``error:`` line on stderr (SPEC §8), click's exit code kept.

Click printed a usage block (``Usage: …``, ``Try '… --help' for help.``, a blank line, then
``Error: …``): four lines for one mistake, unlike every other error of the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from everos_reflect.cli.main import cli


def invoke(args: list[str]) -> Result:
    return CliRunner().invoke(cli, args, prog_name="everos-reflect")


@pytest.mark.parametrize(("args", "code", "says"), [
    (["search", "dogs", "--passages-per-entry", "9"], 2,
     "error: Invalid value for '--passages-per-entry': must be a whole number from 1 to 3, "
     "got '9'"),
    (["search"], 2, "error: Missing argument 'QUERY' (see 'everos-reflect search --help')"),
    (["reports", "--limit", "x"], 2,
     "error: Invalid value for '--limit': must be a whole number from 1 to 1000, got 'x'"),
    (["status", "--bogus"], 2, "error: No such option '--bogus'"),
    (["search", "dogs", "--kinds", "insight"], 2,
     "error: No such option '--kinds'. Did you mean '--kind'?"),
    (["undo", "ep_20261012_0001"], 2, "error: Missing option '--user'"),
    (["insights", "--root", "ROOT", "--user"], 2,
     "error: Option '--user' requires an argument (see 'everos-reflect insights --help')"),
    (["trigger", "reflect_episodes", "--timeout", "-1"], 2,
     "error: Invalid value for '--timeout': must be a number of seconds from 0 to 86400, "
     "got '-1'"),
    (["nosuchcommand"], 2, "error: No such command 'nosuchcommand'"),
])
def test_a_bad_option_is_one_error_line_naming_it_with_the_usage_exit_code(
    root: Path, args: list[str], code: int, says: str
) -> None:
    if args[0] != "nosuchcommand" and "ROOT" not in args:
        args = [*args, "--root", "ROOT"]
    result = invoke([str(root) if a == "ROOT" else a for a in args])
    assert result.exit_code == code, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(says), lines[0]
    assert "help" in lines[0]  # still says where the usage is


@pytest.mark.parametrize(("args", "option", "choices"), [
    (["search", "dogs", "--mode", "fuzzy"], "--mode", "hybrid, vector, keyword; got 'fuzzy'"),
    (["task", "add", "--user", "u1", "--type", "deploy", "--step", "s", "--goal", "g", "--outcome",
      "done"], "--outcome", "success, failure, partial; got 'done'"),
])
def test_a_bad_choice_names_the_option_and_the_choices_on_one_line(
    root: Path, args: list[str], option: str, choices: str
) -> None:
    result = invoke([*args, "--root", str(root)])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: Invalid value for '{option}': ")
    assert f"must be one of: {choices}" in line


def test_help_and_version_are_not_errors(root: Path) -> None:
    helped = invoke(["search", "--help"])
    assert helped.exit_code == 0 and helped.stdout.startswith("Usage: ")
    versioned = invoke(["--version"])
    assert versioned.exit_code == 0 and "version" in versioned.stdout


#: A byte that is not UTF-8 in an argument (``add --subject $'\xff'``) reaches Python as the
#: lone surrogate U+DCFF, named as the byte 0xFF the user typed.
NOT_UTF8 = "caf\udcff"


@pytest.mark.parametrize(("args", "says"), [
    (["add", "--user", "u1", "--subject", NOT_UTF8, "--content", "c"],
     "error: --subject holds the byte 0xFF, which is not UTF-8 text"),
    (["add", "--user", "u1", "--subject", "s", "--content", NOT_UTF8],
     "error: --content holds the byte 0xFF, which is not UTF-8 text"),
    (["task", "add", "--user", "u1", "--type", "deploy", "--goal", NOT_UTF8, "--step", "s",
      "--outcome", "success"], "error: --goal holds the byte 0xFF, which is not UTF-8 text"),
    (["search", NOT_UTF8], "error: query: holds the byte 0xFF, which is not UTF-8 text"),
    (["search", NOT_UTF8, "--mode", "keyword"],
     "error: query: holds the byte 0xFF, which is not UTF-8 text"),
])
def test_an_argument_that_is_not_utf8_text_is_one_error_line_and_nothing_is_written(
    root: Path, args: list[str], says: str
) -> None:
    """`add` raised a bare UnicodeEncodeError halfway through the append, `search` a
    TypeError from the tokenizer: tracebacks, not an error line."""
    result = invoke([*args, "--root", str(root)])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.stderr.splitlines() == [says]
    assert not list(root.glob("*/*/users/*/*/*.md"))


@pytest.mark.parametrize(("args", "says"), [
    (["lessons", "--task-type", "../x", "--user", "u1"],
     "error: invalid task_type '../x': use 1-128 characters"),
    (["lessons", "--task-type", ""], "error: invalid task_type '': must not be empty"),
    (["briefing", "deploys", "--user", "../u"],
     "error: invalid user_id '../u': use 1-128 characters"),
])
def test_a_bad_id_in_a_shared_request_reads_as_the_api_says_it(
        root: Path, args: list[str], says: str) -> None:
    # The commands that validate through an API request model printed pydantic's wrapper:
    # "task_type: Value error, invalid task_type ...", then "task_type: invalid task_type ''",
    # the field named twice.
    result = invoke([*args, "--root", str(root)])
    assert result.exit_code == 1, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith(says), line


def test_an_error_quoting_a_path_with_a_line_break_is_still_one_line(tmp_path: Path) -> None:
    # "no memory root at <path>: …" put the path in as it was: a `--root` holding a line
    # break made the one error line two (SPEC §8), the second looking like output of its own.
    result = invoke(["status", "--root", str(tmp_path / "no\nroot")])
    assert result.exit_code == 1 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: no memory root at ") and "no\\nroot: create one" in line


def test_a_reader_that_goes_away_is_not_reported_as_an_error(root: Path) -> None:
    # `everos-reflect status --json | head -1`: the command printed "error: [Errno 32] Broken
    # pipe" on stderr, as if something had gone wrong with the memory root
    import os
    import subprocess
    import sys

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte is written
    try:
        done = subprocess.run(
            [sys.executable, "-c", "from everos_reflect.cli.main import main; main()",
             "status", "--json", "--root", str(root)],
            stdout=write_end, stderr=subprocess.PIPE, timeout=120, check=False)
    finally:
        os.close(write_end)
    assert done.stderr.decode() == ""
    assert done.returncode != 0



@pytest.mark.parametrize("args", [["trigger", "reflect_episodes", "--force"], ["strategies"]])
def test_an_invalid_ome_toml_is_said_once_and_claims_no_last_good_config(
        root: Path, args: list[str]) -> None:
    # The engine logged "<problem> (keeping the last good strategy configuration)" before the
    # command's own error: two lines for one problem, the first claiming a configuration this
    # process never had. A process of its own: the log line shows only where no logging is
    # configured (pytest configures it).
    import os
    import subprocess
    import sys

    (root / "ome.toml").write_text('[strategies.reflect_episodes]\ncron = "hello"\n')
    done = subprocess.run([sys.executable, "-m", "everos_reflect.cli.main", *args, "--root",
                           str(root)], env={**os.environ}, capture_output=True, text=True,
                          timeout=120)
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert "strategies.reflect_episodes.cron: invalid cron 'hello'" in lines[0]
    assert "last good" not in done.stderr
    # `strategies` too: no strategy runs until the file is fixed (no daemon keeps a last
    # good configuration here)
    assert done.returncode == 1, done.stderr


def test_serve_refuses_port_0(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # "Any free port": the daemon bound one, but daemon.json and the log said port 0, so
    # `trigger` never reached the daemon ("did not answer") and ran in-process beside it.
    import everos_reflect.serve

    started: list[object] = []
    monkeypatch.setattr(everos_reflect.serve, "serve", lambda *a, **k: started.append(k))
    result = invoke(["serve", "--port", "0", "--root", str(root)])
    assert result.exit_code == 2 and started == [], result.output
    assert result.stderr.startswith(
        "error: Invalid value for '--port': must be a whole number from 1 to 65535, got '0'")


def test_the_api_names_a_bad_id_once(root: Path) -> None:
    # "query.task_type: invalid task_type ''": the field named twice; then "query: invalid
    # task_type ''", where MCP said "invalid task_type ''"
    from tests.api_client import call_once

    resp = call_once(root, "GET", "/api/v1/lessons?task_type=")
    assert resp.status_code == 422
    assert resp.json()["error"]["message"] == (
        "invalid task_type '': must not be empty")
