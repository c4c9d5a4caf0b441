"""Hostile command-line values: every one is refused with one line on stderr and a non-zero
exit, never a traceback (SPEC §8)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from everos_reflect.cli.main import cli


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def assert_refused(result: Result, fragment: str) -> None:
    """A usage error (2) or a domain error (1) naming ``fragment``, without a traceback."""
    assert result.exit_code in (1, 2), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert fragment in result.stderr


def test_reports_limit_too_large_for_sqlite_is_a_usage_error(root: Path) -> None:
    # Was accepted (no upper bound), then SQLite raised OverflowError binding it: a traceback.
    assert_refused(run("reports", "--root", str(root), "--limit", "99999999999999999999"),
                   "--limit")
    assert run("reports", "--root", str(root), "--limit", "1000").exit_code == 0


def test_trigger_timeout_must_be_finite_and_within_the_api_bound(root: Path) -> None:
    # inf was an OverflowError traceback from the thread wait; nan (which FloatRange lets
    # through) "timed out" at once; the API refuses more than 86400 s, so the CLI does too.
    for value in ("inf", "nan", "86401"):
        assert_refused(run("trigger", "reflect_episodes", "--root", str(root), "--timeout",
                           value), "--timeout")


def test_lessons_bad_ids_are_one_line_like_briefing(root: Path) -> None:
    # Was pydantic's ValidationError escaping as a traceback (briefing already caught it).
    for args, fragment in ((["--task-type", "a/b"], "invalid task_type "),
                           (["--task-type", "deploy", "--user", "../x"], "invalid user_id ")):
        result = run("lessons", "--root", str(root), *args)
        assert_refused(result, fragment)
        assert result.stderr.startswith("error: ") and len(result.stderr.splitlines()) == 1


def test_numbers_with_separators_or_other_digits_are_refused(root: Path) -> None:
    # int() and float() read "1_0" as 10 and Arabic-Indic or full-width digits as ASCII:
    # `reports --limit 1_0` listed ten reports, `--top-k ١٠` ten hits
    for args, value in [(("reports", "--limit"), "1_0"),
                        (("search", "q", "--top-k"), "\u0661\u0660"),
                        (("briefing", "q", "--user", "u1", "--max-tokens"), "\uff15"),
                        (("trigger", "reflect_episodes", "--timeout"), "1_0.5")]:
        result = run(*args, value, "--root", str(root))
        assert_refused(result, args[-1])
        assert "must be a whole number" in result.stderr or "must be a number" in result.stderr
        assert "digits 0-9" in result.stderr or "without '_'" in result.stderr
    assert run("reports", "--root", str(root), "--limit", "10").exit_code == 0
