"""A root path (or any name a log line quotes) holding a line break was logged as two lines by
``serve``, the second looking like a record of its own (log injection), and ``init`` printed
such a root over two lines. Each is now one line, the break written as an escape."""

from __future__ import annotations

import logging
from pathlib import Path

from click.testing import CliRunner

from everos_reflect.cli.common import UTCFormatter
from everos_reflect.cli.main import cli


def _line(message: str, *args: object) -> str:
    formatter = UTCFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    record = logging.LogRecord("everos_reflect.serve", logging.INFO, __file__, 1, message,
                               args, None)
    return formatter.format(record)


def test_a_root_with_a_line_break_is_logged_on_one_line() -> None:
    root = Path("/tmp/a\n2026-12-05T00:00:00.000+00:00 ERROR forged: b")
    line = _line("serving %s on http://%s:%s", root, "127.0.0.1", 8000)
    assert "\n" not in line
    assert line.endswith(r"serving /tmp/a\n2026-12-05T00:00:00.000+00:00 ERROR forged: b on "
                         "http://127.0.0.1:8000")


def test_terminal_escapes_and_separators_are_escaped_but_other_text_kept() -> None:
    line = _line("file %s", "caf\u00e9\x1b[31m\r\u2028x\ty")
    assert line.endswith(r"file café\x1b[31m\r\u2028x\ty")


def test_a_traceback_still_follows_its_line() -> None:
    formatter = UTCFormatter("%(message)s")
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", (),
                                   sys.exc_info())
    text = formatter.format(record)
    assert text.startswith("failed\nTraceback (most recent call last):")


def test_init_shows_a_root_with_a_line_break_on_one_line(tmp_path: Path) -> None:
    root = tmp_path / "a\nb"
    result = CliRunner().invoke(cli, ["init", str(root)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 3, lines
    assert lines[0] == "Initialized memory root " + str(root).replace("\n", "\\n")
    assert (root / "everos.toml").is_file()
