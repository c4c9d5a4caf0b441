"""An ``EVEROS_<SECTION>__<KEY>`` boolean is ``true`` or ``false`` (any case), as in
``everos.toml`` and the HTTP API: ``1``, ``yes``, ``on``, ``0``, ``no``, ``off`` were read as
one or the other, a spelling the file and the API refuse."""

from __future__ import annotations

import pytest

from everos_reflect.errors import ConfigError
from everos_reflect.settings import packaged_text, parse_settings

DEFAULTS = packaged_text("default.toml")


@pytest.mark.parametrize("value", ["1", "0", "yes", "no", "on", "off", "y", "t", ""])
def test_an_env_boolean_other_than_true_or_false_is_refused_naming_it(value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_settings(DEFAULTS, None, {"EVEROS_EMBEDDING__LOW_MEMORY": value})
    assert caught.value.problems == [
        ("environment", "EVEROS_EMBEDDING__LOW_MEMORY",
         f"must be true or false, got {value!r}" if value else
         "must not be empty (true or false)")]


@pytest.mark.parametrize(("value", "read"), [("true", True), ("False", False), (" TRUE\n", True)])
def test_true_and_false_in_any_case_are_read(value: str, read: bool) -> None:
    settings = parse_settings(DEFAULTS, None, {"EVEROS_EMBEDDING__LOW_MEMORY": value})
    assert settings.embedding.low_memory is read
