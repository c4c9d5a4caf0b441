"""A long key of ``ome.toml`` is named once, quoted short with its true length: the problems of
one strategy's table, gathered into the file's error, were quoted a second time, so a
100,028-character key was said to be 84 characters; an unknown prompt name lost its opening
quote and was counted with the table's name."""

from __future__ import annotations

import pytest

from everos_reflect.engine.registry import validate_ome
from everos_reflect.errors import ConfigError
from everos_reflect.model import shown_key
from everos_reflect.settings import parse_ome

FILE = "/r/ome.toml"
LONG = "k" * 100_000
SHOWN = f"'{'k' * 60}…' (100,000 characters)"


def problems(text: str) -> list[tuple[str, str, str]]:
    with pytest.raises(ConfigError) as caught:
        validate_ome(parse_ome(text, FILE), FILE)
    return caught.value.problems


def test_an_unknown_setting_with_a_long_name_is_named_with_its_true_length() -> None:
    [(file, where, reason)] = problems(f"[strategies.reflect_episodes]\n{LONG} = 1\n")
    assert file == FILE
    assert where == f"'strategies.reflect_episodes.{'k' * 32}…' (100,028 characters)"
    assert reason == ("unknown setting (reflect_episodes takes 22: `everos-reflect settings "
                      "reflect_episodes` lists them)")


@pytest.mark.parametrize("name", ["reflect_episodes", "learn_lessons"])
def test_an_unknown_prompt_with_a_long_name_is_named_whole_and_short(name: str) -> None:
    [(file, where, reason)] = problems(f'[strategies.{name}.prompts]\n{LONG} = "x"\n')
    assert (file, where) == (FILE, f"strategies.{name}.prompts")
    assert reason.startswith(f"{SHOWN}: unknown prompt (known: ")


@pytest.mark.parametrize("name", ["reflect_episodes", "learn_lessons"])
def test_a_prompt_problem_still_names_its_prompt(name: str) -> None:
    key, needs = (("merge_init", "$episodes") if name == "reflect_episodes"
                  else ("lessons", "$records"))
    assert problems(f'[strategies.{name}.prompts]\n{key} = "no data"\n') == [
        (FILE, f"strategies.{name}.prompts", f"{key}: missing placeholder {needs}")]


def test_a_key_shown_once_is_shown_the_same_again() -> None:
    once = shown_key(LONG)
    assert once == SHOWN
    assert shown_key(once) == once
    assert shown_key(shown_key("llm.model")) == "llm.model"
