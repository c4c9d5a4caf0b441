"""The tiers' counts and thresholds in ``ome.toml`` have a range each, stated in the error: a
threshold of ``10**12`` insights, recurrences or confirmations (or a summed importance of
``1e12``) was accepted, a value the strategy then never reached, so it never ran (or never
learned, or never settled a contest) with nothing saying why; a depth cap of ``10**12`` no
longer ended the belief loop. A value under the floor named neither the value nor the range
("must be >= 1")."""

from __future__ import annotations

import pytest

from everos_reflect.engine.registry import MAX_SETTING_INT, validate_ome
from everos_reflect.errors import ConfigError
from everos_reflect.settings import parse_ome

FILE = "/r/ome.toml"

#: (strategy, key, lowest, highest) of every count or threshold with a range of its own.
RANGES = [
    ("reflect_episodes", "max_clusters_per_run", 1, 1_000_000),
    ("reflect_insights", "min_episodes", 1, 100_000),
    ("reflect_insights", "questions", 1, 10),
    ("reflect_insights", "insights_per_question", 1, 10),
    ("update_worldview", "threshold", 1, 1_000),
    ("reconcile", "threshold", 1, 1_000),
    ("learn_lessons", "min_recurrence", 1, 1_000),
    ("learn_lessons", "contest_margin", 1, 1_000),
    *[(name, "max_depth", 2, 100) for name in
      ("update_worldview", "detect_contradictions", "reconcile", "learn_lessons")],
]
#: Run limits: "no limit" stays writable, so their range is the general one.
RUN_LIMITS = [
    *[(name, key) for name in ("reflect_episodes", "reflect_insights", "update_worldview",
                               "detect_contradictions", "reconcile", "learn_lessons",
                               "revalidate_insights")
      for key in ("max_llm_calls", "max_tokens")],
    ("reflect_episodes", "max_records"),
    ("reflect_insights", "max_records"),
]


def problems(text: str) -> list[tuple[str, str, str]]:
    with pytest.raises(ConfigError) as caught:
        validate_ome(parse_ome(text, FILE), FILE)
    return caught.value.problems


def taken(name: str, key: str, value: object) -> object:
    text = f"[strategies.{name}]\n{key} = {value}\n"
    if (name, key) == ("update_worldview", "threshold"):
        text += "max_records = 1000\n"  # the window must hold that many (below)
    return validate_ome(parse_ome(text, FILE), FILE)[name][key]


@pytest.mark.parametrize(("name", "key", "low", "high"), RANGES)
def test_a_count_outside_its_range_is_refused_naming_key_value_and_range(
        name: str, key: str, low: int, high: int) -> None:
    for value in (high + 1, 10**12, low - 1, -5):
        [(file, where, reason)] = problems(f"[strategies.{name}]\n{key} = {value}\n")
        assert (file, where) == (FILE, f"strategies.{name}.{key}")
        assert reason.startswith(f"must be {low:,} to {high:,}"), reason
        assert reason.endswith(f", got {value}"), reason
    assert taken(name, key, high) == high
    assert taken(name, key, low) == low


def test_the_insight_threshold_is_a_summed_importance_of_at_most_100000() -> None:
    for value in ("100001", "1e12", "0", "-1.5"):
        [(_, where, reason)] = problems(f"[strategies.reflect_insights]\nthreshold = {value}\n")
        assert where == "strategies.reflect_insights.threshold"
        assert reason.startswith("must be greater than 0 and at most 100,000 (summed "
                                 "importance"), reason
        assert reason.endswith(f", got {value}"), reason  # as typed: it said 1000000000000.0
    assert taken("reflect_insights", "threshold", 100_000) == 100_000.0


def test_the_insight_depth_cap_names_the_value_it_refuses() -> None:
    [(_, _, reason)] = problems("[strategies.reflect_insights]\nmax_depth = 4\n")
    assert reason == "must be between 1 and 3, got 4"


@pytest.mark.parametrize(("name", "key"), RUN_LIMITS)
def test_a_run_limit_under_one_names_the_value_and_the_range(name: str, key: str) -> None:
    [(_, where, reason)] = problems(f"[strategies.{name}]\n{key} = 0\n")
    assert where == f"strategies.{name}.{key}"
    assert reason.startswith(f"must be 1 to {MAX_SETTING_INT:,}"), reason
    assert reason.endswith(", got 0"), reason
    assert taken(name, key, MAX_SETTING_INT) == MAX_SETTING_INT


def test_a_worldview_threshold_past_the_window_is_refused_naming_max_records() -> None:
    # The window a run reads holds at most max_records new insights (default 50): a
    # threshold of 51 was accepted and the tier never ran on its own again.
    [(file, where, reason)] = problems("[strategies.update_worldview]\nthreshold = 51\n")
    assert (file, where) == (FILE, "strategies.update_worldview.threshold")
    assert reason.startswith("must be at most max_records (50"), reason
    assert reason.endswith(", got 51"), reason
    # raising max_records makes room for it
    text = "[strategies.update_worldview]\nthreshold = 51\nmax_records = 60\n"
    assert validate_ome(parse_ome(text, FILE), FILE)["update_worldview"]["threshold"] == 51


def test_a_worldview_window_under_the_threshold_names_the_key_that_was_written() -> None:
    [(_, where, reason)] = problems("[strategies.update_worldview]\nmax_records = 2\n")
    assert where == "strategies.update_worldview.max_records"
    assert reason.startswith("must be at least threshold (3"), reason
    assert reason.endswith(", got 2"), reason
