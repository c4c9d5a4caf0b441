"""``update_worldview``'s ``threshold`` past its ``max_records`` is refused wherever either is
set: the root's ``ome.toml``, the fleet's ``[strategies]`` defaults, or one in each. The
refusal names both keys and where each is set. Checked on the root's file alone, a pair split
between the fleet's defaults and the root's file was blamed on a key the file never set."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.engine.engine import Engine
from everos_reflect.errors import ConfigError
from everos_reflect.fleet.config import parse_fleet
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings

TABLE = "[strategies.update_worldview]\n"
KEY = "strategies.update_worldview"


@pytest.fixture
def runtime(root: Path) -> Iterator[Runtime]:
    rt = Runtime(root, Settings(), embedder=HashEmbedder(16))
    yield rt
    rt.close()


def config_error(rt: Runtime, defaults: dict[str, int], own: str) -> str:
    (rt.root / "ome.toml").write_text(TABLE + own, "utf-8")
    engine = Engine(rt, ome_defaults={"update_worldview": defaults}, recover=False)
    with pytest.raises(ConfigError):
        engine.config()
    return str(engine.config_error)


def test_a_fleet_threshold_over_the_roots_max_records_blames_the_roots_key(
        runtime: Runtime) -> None:
    error = config_error(runtime, {"threshold": 40}, "max_records = 30\n")
    assert error == (
        f"invalid configuration: ome.toml: {KEY}.max_records: must be at "
        "least threshold (40, set in the fleet's [strategies] defaults: the new insights that "
        "start a run, all read by it), got 30")


def test_a_roots_threshold_over_the_fleets_max_records_says_where_that_is_set(
        runtime: Runtime) -> None:
    error = config_error(runtime, {"max_records": 30}, "threshold = 40\n")
    assert error == (
        f"invalid configuration: ome.toml: {KEY}.threshold: must be at "
        "most max_records (30, set in the fleet's [strategies] defaults: the new insights one "
        "run reads; more are never counted), got 40")


def test_a_root_overriding_both_keys_is_judged_on_its_own_pair(runtime: Runtime) -> None:
    (runtime.root / "ome.toml").write_text(TABLE + "threshold = 20\nmax_records = 25\n")
    engine = Engine(runtime, ome_defaults={"update_worldview": {"threshold": 40,
                                                                "max_records": 45}},
                    recover=False)
    assert engine.config()["update_worldview"]["threshold"] == 20


def test_the_fleets_defaults_alone_are_checked_as_a_pair() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_fleet(f'roots = ["r"]\n{TABLE}threshold = 60\n', "fleet.toml")
    assert caught.value.problems == [
        ("fleet.toml", f"{KEY}.threshold", "must be at most max_records (50, its default: the "
         "new insights one run reads; more are never counted), got 60")]
