"""What a person reads of a failure carries no Python repr or bare errno number: an
``OSError`` raised with its number alone (``OSError(28)``) is said in the system's words, where
``describe`` said ``28``; a file the Markdown parser itself failed on is said in words and
``describe``'s form for a defect, where the diagnostic held ``KeyError('between')``."""

from __future__ import annotations

import errno
import os

import pytest

from everos_reflect.errors import describe
from everos_reflect.markdown import parser


@pytest.mark.parametrize("exc", [OSError(errno.ENOSPC), PermissionError(errno.EACCES)])
def test_an_os_error_raised_with_its_number_alone_is_said_in_words(exc: OSError) -> None:
    assert describe(exc) == os.strerror(exc.args[0])
    assert not describe(exc).isdigit()


def test_an_os_error_with_a_message_keeps_it() -> None:
    assert describe(OSError("the share went away")) == "the share went away"


def test_a_parser_defect_is_a_diagnostic_in_words(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: object, entries: bool = True) -> object:
        raise KeyError("between")

    monkeypatch.setattr(parser._Parser, "parse", broken)
    log = parser.parse_log("---\ntype: episode_daily\n---\n", "u/episodes/episode-2026-10-12.md")
    [diag] = log.diagnostics
    assert diag.severity == "fatal"
    assert diag.message == ("the parser failed on this file: internal error (KeyError: "
                            "'between'); it is left as it is: please report this")
    assert "KeyError('between')" not in diag.message
