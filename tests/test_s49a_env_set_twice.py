"""Two environment variables that name one setting in different case
(``EVEROS_LLM__MAX_RETRIES`` and ``EVEROS_llm__max_retries``; the part after ``EVEROS_`` is
read in any case) are a problem naming both, as a key set twice in a TOML file is: the one
that sorted last won without a word, so which value ran depended on the spelling."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.errors import ConfigError
from everos_reflect.settings import load_settings


def test_one_setting_named_by_two_variables_is_refused_naming_both(root: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(root, env={"EVEROS_LLM__MAX_RETRIES": "2", "EVEROS_llm__max_retries": "5",
                                 "EVEROS_LLM__TIMEOUT_SECONDS": "30"})
    assert caught.value.problems == [(
        "environment", "EVEROS_llm__max_retries",
        "llm.max_retries is set by EVEROS_LLM__MAX_RETRIES too: set it by one variable")]


def test_the_same_value_twice_is_refused_too(root: Path) -> None:
    # which spelling a shell or a service manager keeps is not ours to guess
    with pytest.raises(ConfigError) as caught:
        load_settings(root, env={"EVEROS_LLM__MODEL": "m", "EVEROS_Llm__Model": "m"})
    [(_, name, reason)] = caught.value.problems
    assert name == "EVEROS_Llm__Model" and "EVEROS_LLM__MODEL too" in reason


def test_one_variable_per_setting_is_read_as_before(root: Path) -> None:
    settings = load_settings(root, env={"EVEROS_llm__max_retries": "5"})
    assert settings.llm.max_retries == 5
