"""A strategy, key or tool name typed with a look-alike letter (Cyrillic ``е`` for ``e``) or a
stray space is refused, and the refusal says which character differs: "unknown strategy
'learn_lеssons' (known: …, learn_lessons, …)" and "(did you mean 'learn_lessons'?)" named
two names that read the same, in ``ome.toml``, ``trigger``, ``enable``, the API and MCP."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from everos_reflect.api.models import SearchRequest
from everos_reflect.api.ops import validation_message
from everos_reflect.cli.main import cli
from everos_reflect.engine.registry import validate_ome
from everos_reflect.errors import ConfigError
from everos_reflect.problem_words import did_you_mean, lookalike, unknown_strategy

CYRILLIC = "learn_l\u0435ssons"  # U+0435 CYRILLIC SMALL LETTER IE at character 8
SAYS = "its character 8 is U+0435 (CYRILLIC SMALL LETTER IE), not ASCII"


def test_lookalike_names_the_first_character_that_is_not_plain_ascii() -> None:
    assert lookalike(CYRILLIC) == SAYS
    assert lookalike("learn_lessons ") == "its character 14 is U+0020 (SPACE)"
    assert lookalike("top\u00a0k") == "its character 4 is U+00A0 (NO-BREAK SPACE), not ASCII"
    assert lookalike("learn_lessons") == ""


def test_a_control_character_is_named_as_one() -> None:
    # Unicode names no control character: a trailing line feed was "(unnamed character)"
    assert lookalike("reflect_episodes\n") == "its character 17 is U+000A (a control character)"
    assert lookalike("x\x85") == "its character 2 is U+0085 (a control character), not ASCII"


def test_did_you_mean_says_what_differs_only_when_the_name_is_not_plain() -> None:
    assert did_you_mean(CYRILLIC, ["learn_lessons"]) == (
        f" (did you mean 'learn_lessons'? {SAYS})")
    assert did_you_mean("learn_lesons", ["learn_lessons"]) == " (did you mean 'learn_lessons'?)"


def test_ome_toml_names_the_lookalike_letter_of_a_strategy() -> None:
    with pytest.raises(ConfigError) as caught:
        validate_ome({CYRILLIC: {"enabled": True}}, "ome.toml")
    assert caught.value.problems == [
        ("ome.toml", f"strategies.{CYRILLIC}",
         f"unknown strategy (did you mean 'learn_lessons'? {SAYS})")]


def test_a_strategy_name_refused_by_name_says_what_differs() -> None:
    said = unknown_strategy(CYRILLIC, ["learn_lessons", "reconcile"])
    assert said == f"unknown strategy '{CYRILLIC}' (known: learn_lessons, reconcile); {SAYS}"
    assert unknown_strategy("nope", ["reconcile"]) == "unknown strategy 'nope' (known: reconcile)"


def test_enable_with_a_trailing_space_says_it(tmp_path: Path, no_everos_env: None) -> None:
    runner = CliRunner()
    root = str(tmp_path)
    assert runner.invoke(cli, ["init", root]).exit_code == 0
    result = runner.invoke(cli, ["enable", "learn_lessons ", "--root", root])
    assert result.exit_code != 0
    assert "its character 14 is U+0020 (SPACE)" in result.output, result.output


def test_an_api_key_with_a_lookalike_letter_says_it() -> None:
    with pytest.raises(ValidationError) as caught:
        SearchRequest.model_validate({"query": "x", "us\u0435r_id": "u1"})
    said = validation_message(caught.value.errors(), SearchRequest)
    assert said == ("us\u0435r_id: unknown key (did you mean 'user_id'? its character 3 is "
                    "U+0435 (CYRILLIC SMALL LETTER IE), not ASCII)")


def test_settings_of_a_lookalike_name_says_what_differs(no_everos_env: None) -> None:
    result = CliRunner().invoke(cli, ["settings", CYRILLIC])
    assert result.exit_code != 0
    assert result.stderr.rstrip("\n").endswith(f"; {SAYS}"), result.stderr
