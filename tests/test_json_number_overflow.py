"""A JSON number past what a float holds (``1e400``) is a 422 naming it: it was read as
infinity, which the API refuses when written ``Infinity``, and reached the fields as one."""

from __future__ import annotations

import pytest
from starlette.exceptions import HTTPException

from everos_reflect.api.json_body import parse_json_body


@pytest.mark.parametrize(("raw", "shown"), [
    (b'{"name": "x", "timeout": 1e400}', "'1e400'"),
    (b'{"query": "x", "top_k": -1.5E+999}', "'-1.5E+999'"),
    (b'[' + b"9" * 400 + b'.5]', "'" + "9" * 60 + "…'"),
])
def test_a_number_past_a_float_is_refused_naming_it(raw: bytes, shown: str) -> None:
    with pytest.raises(HTTPException) as caught:
        parse_json_body(raw)
    assert caught.value.status_code == 422
    assert caught.value.detail == (f"request body is not valid JSON: the number {shown} is "
                                   "too large to be read (past 1.798e+308)")


def test_numbers_a_float_holds_are_read_as_before() -> None:
    assert parse_json_body(b'{"a": 1.7e308, "b": 1e-400, "c": 2.5, "d": 10}') == {
        "a": 1.7e308, "b": 0.0, "c": 2.5, "d": 10}
