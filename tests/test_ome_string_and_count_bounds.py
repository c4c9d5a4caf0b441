"""``ome.toml`` bounds what no schedule or pipeline can use: a cron expression longer than any
crontab line (200,000 characters were accepted and echoed whole by ``status --json``), and
more drafts ahead (or in one commit batch) than a model server drafts at once (``10**12``
selected every cluster the run's limits allowed up front, each held in memory)."""

from __future__ import annotations

import pytest

from everos_reflect.engine.registry import get_strategy, known_strategies, validate_ome
from everos_reflect.engine.triggers import CronTrigger
from everos_reflect.errors import ConfigError
from everos_reflect.settings import parse_ome

FILE = "/r/ome.toml"


def problems(text: str) -> list[tuple[str, str, str]]:
    with pytest.raises(ConfigError) as caught:
        validate_ome(parse_ome(text, FILE), FILE)
    return caught.value.problems


@pytest.mark.parametrize("name", known_strategies())
def test_a_cron_longer_than_1024_characters_is_refused_naming_key_and_length(name: str) -> None:
    cron = "0 2 * * 1" + " " * 200_000
    [(file, where, reason)] = problems(f'[strategies.{name}]\ncron = "{cron}"\n')
    assert (file, where) == (FILE, f"strategies.{name}.cron")
    assert reason.startswith("invalid cron '0 2 * * 1 ")
    assert reason.endswith("(200,009 characters): a cron expression is at most 1,024 "
                           "characters")


def test_a_cron_of_full_lists_in_every_field_is_still_taken() -> None:
    fields = [",".join(map(str, range(60))), ",".join(map(str, range(24))),
              ",".join(map(str, range(1, 32))), ",".join(map(str, range(1, 13))),
              ",".join(map(str, range(7)))]
    cron = " ".join(fields)
    assert len(cron) < 1_024
    CronTrigger(cron)  # raises on a refused expression
    text = f'[strategies.reflect_episodes]\ncron = "{cron}"\n'
    assert validate_ome(parse_ome(text, FILE), FILE)["reflect_episodes"]["cron"] == cron


@pytest.mark.parametrize("key", ["max_drafts_ahead", "max_commit_batch"])
def test_drafts_past_a_thousand_are_refused_naming_the_range(key: str) -> None:
    assert problems(f"[strategies.reflect_episodes]\n{key} = 1001\n") == [
        (FILE, f"strategies.reflect_episodes.{key}", "must be 1 to 1,000, got 1001")]
    assert problems(f"[strategies.reflect_episodes]\n{key} = 0\n") == [
        (FILE, f"strategies.reflect_episodes.{key}", "must be 1 to 1,000, got 0")]
    text = f"[strategies.reflect_episodes]\n{key} = 1000\n"
    assert validate_ome(parse_ome(text, FILE), FILE)["reflect_episodes"][key] == 1000
    assert get_strategy("reflect_episodes").all_settings()[key].default <= 1000
