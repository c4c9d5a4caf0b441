"""The API's "not blank" pattern is built from the characters :func:`blank` calls blank: the
table ``api.models`` computes at import tests each code point inline (calling ``blank`` for
every one of them slowed each start of ``serve``, ``mcp`` and the CLI's reads), so this pins
the two equal."""

from __future__ import annotations

from everos_reflect.api import models
from everos_reflect.model import blank


def test_the_blank_characters_of_the_schema_are_those_blank_refuses() -> None:
    assert [c for c in range(0x110000) if blank(chr(c))] == models._BLANK
    assert len(models._BLANK) > 100  # white space and the Unicode Cf characters
