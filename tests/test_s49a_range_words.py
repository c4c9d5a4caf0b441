"""A whole number out of its range is shown compactly past 15 digits, as lessons, insights and
the config files show one (``problem_words.shown_number``): the message quoted the first 60
digits of a JSON number and its length ("got -99999…9 (4,001 characters)"), a line of digits
nobody reads, where ``1.23e+399`` says what was sent in a glance."""

from __future__ import annotations

import pytest

from everos_reflect.typed_numbers import out_of_range, whole_value_problem
from tests.api_client import ApiClient


@pytest.mark.parametrize(("value", "shown"), [
    (101, "101"), (0, "0"), (-5, "-5"),
    (10**15 - 1, "999999999999999"),  # 15 digits: as sent
    (10**15, "1.00e+15"), (-(10**20) * 123, "-1.23e+22"),
    pytest.param(int("9" * 4000), "9.99e+3999", id="4000-digits"),
    (1e300, "1e+300"),  # a JSON number with an exponent, as sent
])
def test_out_of_range_shows_a_long_number_compactly(value: int, shown: str) -> None:
    assert out_of_range(value, 1, 100) == f"must be a whole number from 1 to 100, got {shown}"
    if isinstance(value, int):
        assert whole_value_problem(value, 1, 100) == out_of_range(value, 1, 100)


def test_an_api_body_of_many_digits_is_named_compactly(call: ApiClient) -> None:
    body = '{"query": "q", "top_k": -' + "9" * 4000 + "}"
    resp = call("POST", "/api/v1/memory/search", content=body,
                headers={"content-type": "application/json"})
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["message"] == \
        "top_k: must be a whole number from 1 to 100, got -9.99e+3999"
