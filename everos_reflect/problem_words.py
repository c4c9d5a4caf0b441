"""How every edge says that a key is unknown or missing, or that a value is not one of a
fixed set: one set of words for ``everos.toml``, ``ome.toml``, ``fleet.toml``, the HTTP API,
MCP and the CLI.

pydantic's own words reached users of the API, MCP and the CLI ("Field required", "Extra
inputs are not permitted", "Input should be 'active' or 'stale'") where the config files
said "unknown key (did you mean 'max_retries'?)"; :func:`everos_reflect.api.ops.
validation_message` says pydantic's problems with these functions.
"""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Iterable

from everos_reflect.model import (
    empty_id,
    escaped_byte,
    json_got,
    json_type,
    must_not_be_empty,
    quoted_value,
)

__all__ = ["counted", "did_you_mean", "json_type", "lookalike", "missing", "one_of",
           "shown_number", "unknown", "unknown_named", "unknown_strategy"]


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun`` agreeing in number: ``1 entry``, ``3 entries``, ``1,204 files``.
    The summaries said "Reindexed 1 entries from 1 files" and "1 result(s)"; every edge (the
    CLI, the API, a run's reason) counts with it."""
    many = plural if plural is not None else (
        f"{noun[:-1]}ies" if noun.endswith("y") and noun[-2:-1] not in "aeiou" else f"{noun}s")
    return f"{count:,} {noun if count == 1 else many}"


#: Most digits of a whole number shown as written; past them it is shown as ``1.23e+399``.
SHOWN_DIGITS_MAX = 15


def shown_number(value: object) -> str:
    """A number read from a record a person may edit (a lesson's ``confirmations``, an
    insight's ``depth``), bounded for a line of output: YAML reads an int of up to 1,000
    digits, and ``lessons`` printed all 400 of a hand-edited count. Up to
    :data:`SHOWN_DIGITS_MAX` digits as written, longer in the form ``1e400`` is written in
    (three significant digits, cut not rounded); anything else as its text."""
    if isinstance(value, bool) or not isinstance(value, int):
        return str(value)
    digits = str(abs(value))
    if len(digits) <= SHOWN_DIGITS_MAX:
        return str(value)
    sign = "-" if value < 0 else ""
    return f"{sign}{digits[0]}.{digits[1:3]}e+{len(digits) - 1}"


def _plain(name: str) -> bool:
    """Whether ``name`` is printable ASCII without spaces, as every name we know is."""
    return all("!" <= char <= "~" for char in name)


def lookalike(name: str) -> str:
    """``its character 8 is U+0435 (CYRILLIC SMALL LETTER IE), not ASCII`` for the first
    character of ``name`` that is not printable ASCII (or is a space), else ``""``. A
    strategy or key typed with a look-alike letter or a trailing space was told "unknown
    strategy 'learn_lеssons' (did you mean 'learn_lessons'?)": the two read the same, and
    nothing said what differs."""
    for at, char in enumerate(name, start=1):
        if not "!" <= char <= "~":
            byte = escaped_byte(char)
            if byte is not None:  # it was "U+DCFF (unnamed character)": Python's inside
                return f"its character {at:,} is the byte 0x{byte:02X}, not UTF-8 text"
            # Unicode gives control characters no name: U+000A was "(unnamed character)"
            named = unicodedata.name(char, "a control character" if
                                     unicodedata.category(char) == "Cc" else "unnamed character")
            ascii_word = ", not ASCII" if not char.isascii() else ""
            return f"its character {at:,} is U+{ord(char):04X} ({named}){ascii_word}"
    return ""


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the choice closest to ``name``, else ``""``; when the
    choice is plain and ``name`` is not, what :func:`lookalike` says of ``name`` follows."""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    if not close:
        return ""
    note = lookalike(name) if _plain(close[0]) else ""
    return f" (did you mean {close[0]!r}? {note})" if note else f" (did you mean {close[0]!r}?)"


#: At most this many names are listed after "unknown …" when none is close to the one given.
FEW_CHOICES = 10


def unknown(what: str, name: str, choices: Iterable[str], *, list_few: bool = False,
            listed_by: str | None = None) -> str:
    """``unknown key (did you mean 'top_k'?)``: ``what`` is the kind of name refused. With no
    close match and ``list_few`` (a config file's key: one problem per line a person wrote),
    the names there are when they are few (``unknown key (known: host, port, token)``), else
    where they are listed (``listed_by``): 22 names after a typo nothing was close to buried
    the line, and "unknown key" alone sent a person to the source for the 3 a section takes.
    A request's keys are not listed: a client sending 3,000 unknown keys got the list 3,000
    times."""
    choices = sorted(set(choices))
    hint = did_you_mean(name, choices)
    if hint or not list_few:
        return f"unknown {what}{hint}"
    if choices and len(choices) <= FEW_CHOICES:
        return f"unknown {what} (known: {', '.join(choices)})"
    return f"unknown {what}" + (f" ({listed_by})" if listed_by else "")


def missing(what: str = "key") -> str:
    """What a required key (or parameter) left out is told."""
    return f"missing required {what}"


def one_of(choices: Iterable[str], value: object) -> str:
    """``must be one of: active, stale; got 'x'``: the choices as written, then the value
    refused, quoted short; ``""`` is said to be empty (``must not be empty (one of: active,
    stale)``), not a misspelt choice."""
    listed = ", ".join(choices)
    if value == "":
        return must_not_be_empty(f"one of: {listed}")
    # a JSON body's or a config file's list, number or null in JSON's words: a task's
    # `"outcome": ["success"]` was "got ['success']", Python's repr
    got = quoted_value(value) if isinstance(value, str) else json_got(value)
    return f"must be one of: {listed}; got {got}"


def unknown_named(what: str, name: object, known: Iterable[str]) -> str:
    """Why ``name``, not among ``known`` (listed in their order), is refused as a ``what``
    (``strategy``, ``tool``), at every edge: ``""`` is said to be empty, where ``trigger ''``
    was "unknown strategy ''" and the API's ``{"name": ""}`` "name: must not be empty"."""
    listed = ", ".join(known) or "none"
    if name == "":
        return empty_id(f"{what} name", f"known: {listed}")
    note = lookalike(name) if isinstance(name, str) else ""  # 'learn_lеssons' reads as known
    return f"unknown {what} {quoted_value(name)} (known: {listed})" + (f"; {note}" if note else "")


def unknown_strategy(name: object, known: Iterable[str]) -> str:
    """:func:`unknown_named` of a strategy (``trigger``, ``enable``, ``fleet run``), the
    known ones sorted."""
    return unknown_named("strategy", name, sorted(known))
