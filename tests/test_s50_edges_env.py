"""An environment variable's number is refused as it was typed: ``EVEROS_…=-0`` for a number
that must be above 0 said "got 0", and ``-007`` "got -7", values nobody typed (``int()`` and
the shown form of a whole float keep neither the sign of a zero nor the zeros in front)."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.errors import ConfigError
from everos_reflect.settings import load_settings


def _env_problems(root: Path, env: dict[str, str]) -> dict[str, str]:
    with pytest.raises(ConfigError) as caught:
        load_settings(root, env=env)
    return {key: reason for _, key, reason in caught.value.problems}


@pytest.mark.parametrize("typed", ["-0", "-00", "-007"])
def test_a_whole_number_variable_is_refused_as_typed(root: Path, typed: str) -> None:
    problems = _env_problems(root, {"EVEROS_LIMITS__MAX_ENTRY_BYTES": typed,
                                    "EVEROS_LLM__TIMEOUT_SECONDS": typed,
                                    "EVEROS_INDEX__RECONCILE_INTERVAL_SECONDS": typed})
    assert problems == {
        "EVEROS_LIMITS__MAX_ENTRY_BYTES":
            f"must be 1,024 to 1,073,741,824 (bytes; 1 GiB), got {typed}",
        "EVEROS_LLM__TIMEOUT_SECONDS": f"must be greater than 0, got {typed}",
        "EVEROS_INDEX__RECONCILE_INTERVAL_SECONDS":
            f"must be 1 to 604,800 (seconds; a week), got {typed}"}


def test_leading_zeros_are_shown_as_typed(root: Path) -> None:
    problems = _env_problems(root, {"EVEROS_LLM__MAX_RETRIES": "0099999999",
                                    "EVEROS_LLM__TIMEOUT_SECONDS": "0099999999"})
    assert problems == {"EVEROS_LLM__MAX_RETRIES": "must be 0 to 100, got 0099999999",
                        "EVEROS_LLM__TIMEOUT_SECONDS":
                            "must be at most 86400 (a day), got 0099999999"}


def test_values_in_range_are_still_read(root: Path) -> None:
    settings = load_settings(root, env={"EVEROS_LLM__MAX_RETRIES": "-0",
                                        "EVEROS_LIMITS__MAX_ENTRY_BYTES": "0002048",
                                        "EVEROS_LLM__TIMEOUT_SECONDS": "030"})
    assert settings.llm.max_retries == 0
    assert settings.limits.max_entry_bytes == 2048
    assert type(settings.limits.max_entry_bytes) is int
    assert settings.llm.timeout_seconds == 30


def test_a_long_number_is_still_shown_short(root: Path) -> None:
    problems = _env_problems(root, {"EVEROS_LLM__MAX_RETRIES": "-" + "9" * 400})
    assert problems == {"EVEROS_LLM__MAX_RETRIES": "must be 0 to 100, got -9.99e+399"}
