"""Numbers a person types as text (a command-line option, a query string): one reading and
one message for every edge, so ``--limit`` and ``?limit=`` accept and refuse the same values
and say the same thing about them.

Python's ``int()`` reads ``" 5"``, ``"+5"`` and ``"1_0"``, and ``float()`` reads ``"1e3"``,
``"nan"`` and ``"inf"``: the CLI took ``--limit +5`` while the API refused ``?limit=+5``, and
click named its own type in the message ("'5.0' is not a valid integer range").
"""

from __future__ import annotations

import re

from everos_reflect.model import json_got, must_not_be_empty, quoted, quoted_value, unplain_number
from everos_reflect.problem_words import shown_number

#: A whole number as a person writes it: an optional ``-`` and the digits 0-9.
_WHOLE = re.compile(r"-?[0-9]+")
#: A decimal number as a person writes it: ``5``, ``2.5``, ``.5``; no sign but ``-``, no
#: exponent, no ``nan``/``inf``, no spaces.
_DECIMAL = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")


class NumberProblem(ValueError):
    """A typed number that is not one, or out of its bounds; the message says which bounds
    (``must be a whole number from 1 to 100, got '5.0'``), with no field name: the edge adds
    it (``--top-k``, ``query.limit``)."""


def is_whole(text: str) -> bool:
    """Whether ``text`` is a whole number as a person writes it (``-5``, ``8000``): what
    :func:`whole_number` reads, before its bounds. An environment variable is read so too."""
    return _WHOLE.fullmatch(text) is not None


def is_decimal(text: str) -> bool:
    """Whether ``text`` is a decimal number as a person writes it (``2.5``, ``.5``): what
    :func:`seconds` reads, before its bounds."""
    return _DECIMAL.fullmatch(text) is not None


def whole_words(low: int, high: int) -> str:
    """What a whole number from ``low`` to ``high`` must be, as every edge says it."""
    return f"must be a whole number from {low} to {high}"


def seconds_words(low: float, high: float) -> str:
    """What a number of seconds from ``low`` to ``high`` must be, as every edge says it."""
    return f"must be a number of seconds from {low:g} to {high:g}"


def whole_value_problem(value: object, low: int, high: int) -> str | None:
    """Why ``value``, given as a value (a JSON field, a library argument), is no whole number
    from ``low`` to ``high``, in the words of the API's schema (``must be an integer, got a
    boolean: true``; ``must be a whole number from 1 to 100, got 0``), else ``None``; the edge
    names the field. ``search(top_k=0)`` said "top_k must be an integer from 1 to 100" where
    the API and ``--top-k`` said the same problem in other words."""
    if isinstance(value, bool) or not isinstance(value, int):
        return f"must be an integer, got {json_got(value)}"
    if not low <= value <= high:
        return out_of_range(value, low, high)
    return None


def out_of_range(value: object, low: int, high: int) -> str:
    """``must be a whole number from 1 to 100, got 0``: ``value`` as it was given (a JSON
    ``1e300`` is read as a whole number, and was shown as its 301 digits), a whole number of
    more than 15 digits compactly (``-9.99e+3999``, :func:`~everos_reflect.problem_words.
    shown_number`, as the config files and ``lessons`` show one): its first 60 digits and
    its length were a line of digits nobody reads."""
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{whole_words(low, high)}, got {shown_number(value)}"
    return f"{whole_words(low, high)}, got {quoted_value(value)}"


def _not_read(what: str, text: str) -> NumberProblem:
    """Why ``text`` is no number: what it must be (``what``) and what it was; ``""`` said to be
    empty (``--limit ''`` and ``?limit=`` were "must be a whole number from 1 to 1000, got
    ''")."""
    if text == "":
        return NumberProblem(must_not_be_empty(what.removeprefix("must be ")))
    hint = unplain_number(text)
    return NumberProblem(f"{what}, got {quoted(text)}" + (f" ({hint})" if hint else ""))


def whole_number(text: str, low: int, high: int) -> int:
    """``text`` read as a whole number from ``low`` to ``high``, else :class:`NumberProblem`."""
    what = whole_words(low, high)
    if not _WHOLE.fullmatch(text):
        raise _not_read(what, text)
    # read without its leading zeros, and more digits than any bound has is out of range,
    # never read: int() of 5,000 digits (zeros too) raised ValueError ("Exceeds the limit
    # (4300 digits) …"), a traceback at the CLI
    digits = text.lstrip("-").lstrip("0") or "0"
    if len(digits) > len(str(max(abs(low), abs(high)))):
        raise NumberProblem(f"{what}, got {quoted(text)}")
    number = -int(digits) if text.startswith("-") else int(digits)
    if not low <= number <= high:
        raise NumberProblem(f"{what}, got {quoted(text)}")
    return number


def seconds(text: str, low: float, high: float) -> float:
    """``text`` read as a number of seconds from ``low`` to ``high`` (a fraction allowed),
    else :class:`NumberProblem`."""
    what = seconds_words(low, high)
    if not _DECIMAL.fullmatch(text):
        raise _not_read(what, text)
    number = float(text)
    if not low <= number <= high:
        raise NumberProblem(f"{what}, got {quoted(text)}")
    return number
