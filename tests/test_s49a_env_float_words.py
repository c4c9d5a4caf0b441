"""An environment variable's number past what a float holds is named in words for a variable,
not in TOML's: ``EVEROS_LLM__TIMEOUT_SECONDS`` of 400 digits said "(… TOML reads it as inf)",
though nobody wrote TOML and "inf" is Python's word. The config files keep TOML's words."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.errors import ConfigError
from everos_reflect.settings import load_settings

PAST = "(past the largest number, about 1.8e+308: it would be read as {}infinity)"
BELOW = "(below the smallest number above 0, about 4.9e-324: it would be read as 0)"


def _env_problems(root: Path, env: dict[str, str]) -> dict[str, str]:
    with pytest.raises(ConfigError) as caught:
        load_settings(root, env=env)
    return {key: reason for _, key, reason in caught.value.problems}


def test_a_variable_past_a_float_says_what_it_would_be_read_as(root: Path) -> None:
    tiny = "0." + "0" * 400 + "1"
    problems = _env_problems(root, {
        "EVEROS_LLM__TIMEOUT_SECONDS": "1" + "0" * 400,
        "EVEROS_CLUSTERING__THRESHOLD": "-" + "9" * 320,
        "EVEROS_EMBEDDING__TIMEOUT_SECONDS": tiny})
    assert problems == {
        "EVEROS_LLM__TIMEOUT_SECONDS":
            f"must be at most 86400 (a day), got 1.00e+400 {PAST.format('')}",
        "EVEROS_CLUSTERING__THRESHOLD":
            f"must be in (0, 1], got -9.99e+319 {PAST.format('minus ')}",
        "EVEROS_EMBEDDING__TIMEOUT_SECONDS":
            f"must be greater than 0, got {tiny[:60]}… (403 characters) {BELOW}"}
    assert not any("TOML" in reason or "inf)" in reason for reason in problems.values())


def test_the_same_number_in_everos_toml_keeps_tomls_words(root: Path) -> None:
    (root / "everos.toml").write_text("[llm]\ntimeout_seconds = 1e400\n", "utf-8")
    with pytest.raises(ConfigError) as caught:
        load_settings(root, env={})
    [(_, key, reason)] = caught.value.problems
    assert key == "llm.timeout_seconds"
    assert reason.endswith("(past the largest number, about 1.8e+308: TOML reads it as inf)")
