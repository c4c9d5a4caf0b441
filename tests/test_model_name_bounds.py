"""``[llm] model`` and ``[embedding] model`` are a model's name: at most 256 characters, one
line. A 1 MB name was accepted, then sent with every call and recorded in every audit row
(``[llm]``) or with every indexed entry and vector (``[embedding]``)."""

from __future__ import annotations

import pytest

from everos_reflect.errors import ConfigError
from everos_reflect.settings import packaged_text, parse_settings

DEFAULTS = packaged_text("default.toml")
MAX_MODEL_NAME_CHARS = 256


def problems(text: str | None, env: dict[str, str] | None = None) -> list[tuple[str, str, str]]:
    with pytest.raises(ConfigError) as caught:
        parse_settings(DEFAULTS, text, env or {})
    return caught.value.problems


@pytest.mark.parametrize("section", ["llm", "embedding"])
def test_a_model_name_past_256_characters_is_refused_naming_the_key(section: str) -> None:
    name = "m" * (MAX_MODEL_NAME_CHARS + 1)
    extra = 'provider = "openai"\n' if section == "embedding" else ""
    [(file, key, reason)] = problems(f'[{section}]\n{extra}model = "{name}"\n')
    assert (file, key) == ("everos.toml", f"{section}.model")
    assert reason.startswith("must be a model's name of at most 256 characters, got 'mmm")
    assert reason.endswith("(257 characters)")


def test_a_model_name_on_two_lines_from_the_environment_is_refused() -> None:
    [(file, key, reason)] = problems(None, {"EVEROS_LLM__MODEL": "gpt-4o\n"})
    assert (file, key) == ("environment", "EVEROS_LLM__MODEL")
    assert reason == "must be a model's name on one line, got 'gpt-4o\\n'"


def test_long_real_model_names_pass() -> None:
    name = "org/" + "m" * (MAX_MODEL_NAME_CHARS - 4)
    settings = parse_settings(DEFAULTS, f'[llm]\nmodel = "{name}"\n', {})
    assert settings.llm.model == name
    assert parse_settings(DEFAULTS, None, {"EVEROS_LLM__MODEL": "meta-llama/Llama-3.3-70B-"
                                           "Instruct-Turbo"}).llm.model.endswith("Turbo")
