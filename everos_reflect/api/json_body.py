"""Request bodies read as strict JSON, with an error that names what is wrong.

FastAPI reads a body with ``json.loads``, which takes what RFC 8259 leaves undefined or does not
allow: a key given twice in one object (the last one silently wins, so ``{"user_id": "alice",
..., "user_id": "bob"}`` writes to bob), and ``NaN`` / ``Infinity``. What it cannot read came
back as "There was an error parsing the body" (bytes that are not UTF-8, a number of thousands
of digits, arrays nested thousands deep) or "9: JSON decode error", neither of which says what
is wrong. SPEC §7 wants every bad request answered with a 4xx naming the problem.

Every route of the API uses :class:`StrictJSONRoute`, so its body goes through
:func:`parse_json_body`; a problem is a 422 ``invalid_request`` like a misspelt field.
"""

from __future__ import annotations

import email.message
import json
import math
import sys
from collections.abc import Callable, Coroutine
from typing import Any, NoReturn

from fastapi import Request, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException

from everos_reflect.model import quoted

#: Characters of an offending key or token quoted back in an error.
_QUOTE_CHARS = 60


def _quoted(text: str) -> str:
    return repr(text if len(text) <= _QUOTE_CHARS else text[:_QUOTE_CHARS] + "…")


def _refuse(problem: str) -> NoReturn:
    raise HTTPException(422, f"request body is not valid JSON: {problem}")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            _refuse(f"the key {_quoted(key)} is given twice in one object")
        seen[key] = value
    return seen


class NotAJSONNumber(ValueError):
    """A number JSON has no words for (``NaN``, ``Infinity``) or one past what a float holds
    (``1e400``), named as written; the HTTP API and MCP refuse it alike."""


def _no_constant(name: str) -> NoReturn:
    raise NotAJSONNumber(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    """A JSON number with a fraction or exponent, refused when it is past what a float holds:
    ``1e400`` was read as infinity, the value ``Infinity`` is refused as, and reached the
    fields as one (``"timeout": 1e400`` answered "less than or equal to 86400" of a number
    nobody sent)."""
    value = json_float(text)
    if math.isinf(value):
        raise NotAJSONNumber(f"the number {_quoted(text)} is too large to be read (past "
                             f"{sys.float_info.max:.4g})")
    return value


def json_float(text: str) -> float:
    """A JSON number token with a fraction or an exponent as a float, kept with ``text``
    (:class:`WrittenJSONFloat`) when Python writes it otherwise; the HTTP API's bodies and
    MCP's lines read it alike."""
    value = float(text)
    return value if repr(value) == text else WrittenJSONFloat(text)


class WrittenJSONFloat(float):
    """A JSON number with a fraction or an exponent that Python writes otherwise (``1e3`` is
    ``1000.0``, ``10.50`` is ``10.5``), shown as the client wrote it: ``"top_k": 1e3`` was
    refused "got 1000.0", a value nobody sent. Only a token Python writes otherwise is made
    one (a Python call per such number, which :func:`_finite_float` is already). Its text is
    the token of the body (bounded by ``limits.max_request_bytes``); a message quoting it
    cuts it as every value quoted back is (:func:`~everos_reflect.model.quoted_value`)."""

    written: str

    def __new__(cls, text: str) -> WrittenJSONFloat:
        value = super().__new__(cls, text)
        value.written = text
        return value

    def __repr__(self) -> str:
        return self.written

    __str__ = __repr__


class NegativeZero(int):
    """The JSON number ``-0``: the int 0, shown as the client wrote it. ``json`` reads ``-0``
    as ``0``, and ``"top_k": -0`` was refused "got 0", a value nobody sent. pydantic makes a
    plain int of it once it is valid, so it goes no further than an error message."""

    def __repr__(self) -> str:
        return "-0"

    __str__ = __repr__


_NEGATIVE_ZERO = NegativeZero(0)


def json_int(text: str) -> int:
    """A JSON integer token as an int; ``-0`` as :class:`NegativeZero`. JSON writes no other
    integer two ways (no ``+``, no leading zero), so every other token is its int."""
    return _NEGATIVE_ZERO if text == "-0" else int(text)


def int_hook(text: str) -> Any:
    """``json.loads``'s ``parse_int`` for ``text``: :func:`json_int` when ``text`` may hold a
    ``-0`` token, else ``None`` (json's own conversion, in C): the hook is a Python call per
    integer of the body, and most bodies have no ``-0`` in them at all."""
    return json_int if "-0" in text else None


def number_problem(text: str) -> str | None:
    """Why the JSON ``text`` holds a number it may not (:class:`NotAJSONNumber`), else
    ``None`` (also when it is no JSON at all: that is another problem)."""
    try:
        json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    except NotAJSONNumber as exc:
        return str(exc)
    except (ValueError, RecursionError):
        return None
    return None


def parse_json_body(raw: bytes) -> Any:
    """``raw`` as JSON, or an ``HTTPException`` 422 naming the problem.

    Stricter than ``json.loads`` where the standard is: UTF-8 only (RFC 8259 §8.1), a key once
    per object, no ``NaN`` / ``Infinity``, nor a number that overflows to it (``1e400``). A
    number too long for Python to convert and nesting deeper than the parser's recursion limit
    are named as such instead of a generic 400.
    """
    try:
        # a byte-order mark first is ignored, as RFC 8259 §8.1 lets a parser do and MCP's
        # lines and the config files do: it was "Unexpected UTF-8 BOM (decode using
        # utf-8-sig)", Python's advice to its own programmer
        text = raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        _refuse(f"it is not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})")
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant,
                          parse_float=_finite_float, parse_int=int_hook(text))
    except NotAJSONNumber as exc:
        _refuse(str(exc))
    except json.JSONDecodeError as exc:
        # json's "Invalid control character at" and "Unterminated string starting at" end
        # in "at": they read "… at at line 1, column 13", naming no character
        what = exc.msg.removesuffix(" at")
        if what == "Invalid control character" and exc.pos < len(text):
            code = ord(text[exc.pos])
            what = (f"the control character U+{code:04X} stands in a string unescaped "
                    f"(write it as \\u{code:04x})")
        _refuse(f"{what} at line {exc.lineno}, column {exc.colno}")
    except RecursionError:
        _refuse("arrays or objects nest too deeply")
    except ValueError:  # int() past the interpreter's digit limit (CVE-2020-10735's guard)
        _refuse(f"a number has more than {sys.get_int_max_str_digits():,} digits")


class _StrictJSONRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = parse_json_body(await self.body())
        return self._json


def _is_json(content_type: str) -> bool:
    """``application/json`` or ``application/*+json`` (parameters aside): the types FastAPI
    reads a body as JSON for."""
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json"))


class StrictJSONRoute(APIRoute):
    """An API route whose JSON body is read by :func:`parse_json_body` (FastAPI's documented
    way to change how a route reads its request: a custom ``Request`` class).

    A body sent with another ``Content-Type``, or none, is a 415 naming it: FastAPI passes
    such a body on as bytes, refused as "body: Input should be a valid dictionary", which
    names no problem the client can see (``curl -d`` sends
    ``application/x-www-form-urlencoded``)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        takes_body = self.body_field is not None

        async def strict_handler(request: Request) -> Response:
            strict = _StrictJSONRequest(request.scope, request.receive)
            content_type = strict.headers.get("content-type")
            # no Content-Type at all (Python's requests with data=, a bare http.client) is
            # refused as FastAPI refuses it, but named: it answered "body: Input should be a
            # valid dictionary" of a body that is one
            if takes_body and not (content_type and _is_json(content_type)) \
                    and await strict.body():
                got = quoted(content_type) if content_type else "no Content-Type"
                raise HTTPException(415, "the request body must be JSON, sent with Content-Type: "
                                         f"application/json; got {got}")
            # nothing here decodes a compressed body: read as it came, a gzip body was "not
            # UTF-8 (byte 0x8b at offset 1)", which names no problem the client can find
            encoding = strict.headers.get("content-encoding", "").strip()
            if takes_body and encoding and encoding.lower() != "identity" \
                    and await strict.body():
                raise HTTPException(415, "the request body must be sent uncompressed; got "
                                         f"Content-Encoding: {quoted(encoding)}")
            return await handler(strict)

        return strict_handler
