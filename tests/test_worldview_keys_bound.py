"""``update_worldview``'s ``keys`` lists at most 100 conviction slots: every key is shown in
each call's prompt, whose values are cut past 20,000 characters, so with some 300 long keys
those past the cut were never shown, never written, and nothing said why."""

from __future__ import annotations

import pytest

from everos_reflect.engine.registry import validate_strategy_settings
from everos_reflect.errors import ConfigError


def test_more_than_100_keys_is_a_config_error_naming_the_count() -> None:
    keys = [f"k{i}" for i in range(101)]
    with pytest.raises(ConfigError) as caught:
        validate_strategy_settings("update_worldview", {"keys": keys}, "ome.toml")
    assert caught.value.problems == [
        ("ome.toml", "strategies.update_worldview.keys",
         "must list at most 100 keys (each call's prompt shows every one), got 101")]


def test_100_keys_of_the_longest_form_fit_one_prompt_value() -> None:
    from everos_reflect.llm.tasks import MAX_VALUE_PROMPT_CHARS

    keys = [f"k{i:03d}" + "x" * 60 for i in range(100)]
    values = validate_strategy_settings("update_worldview", {"keys": keys}, "ome.toml")
    assert values["keys"] == keys
    assert len(", ".join(keys)) <= MAX_VALUE_PROMPT_CHARS
