"""A run that went fine and did nothing says why (``reason``): no new records since the last
run, below the threshold (how far), or needs an LLM; ``trigger`` says it after "nothing to
do", and the API's trigger answer carries it. "nothing to do" alone did not say whether to
wait, add data or configure a provider."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from everos_reflect.cli.engine_cmds import outcome_line
from everos_reflect.embedding import HashEmbedder
from everos_reflect.engine.engine import Engine
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.runtime import Runtime
from everos_reflect.settings import LLMSettings, Settings
from tests.api_client import ApiClient
from tests.reflect_fixtures import ANDREW, make_runtime, seed_pets

#: an LLM configured (never called: nothing here is due); the tiers run only with one
OPENAI = Settings(llm=LLMSettings(provider="openai", base_url="http://127.0.0.1:9/v1"))


@pytest.fixture
def rt(root: Path) -> Iterator[Runtime]:
    runtime = make_runtime(root, ExtractiveLLM())
    yield runtime
    runtime.close()


@pytest.fixture
def with_llm(root: Path) -> Iterator[Runtime]:
    runtime = Runtime(root, OPENAI, embedder=HashEmbedder(16))
    yield runtime
    runtime.close()


def test_a_second_reflection_run_says_there_are_no_new_episodes(rt: Runtime) -> None:
    seed_pets(rt)
    engine = Engine(rt)
    assert engine.trigger("reflect_episodes", force=True).counts["merged"] == 1
    again = engine.trigger("reflect_episodes", force=True)
    assert (again.status, again.reason) == ("ok", (
        "no new Episodes to merge: no cluster of 2 or more live Episodes was formed or "
        "joined by a new Episode since the last merge"))
    assert f"— nothing to do: {again.reason} [in-process]" in outcome_line(again, "in-process")


def test_a_run_that_did_something_gives_no_reason(rt: Runtime) -> None:
    seed_pets(rt)
    out = Engine(rt).trigger("reflect_episodes", force=True)
    assert (out.counts["merged"], out.reason) == (1, None)
    assert "nothing to do" not in outcome_line(out, "in-process")


def test_a_tier_below_its_threshold_says_how_far_it_is(with_llm: Runtime) -> None:
    seed_pets(with_llm)
    (with_llm.root / "ome.toml").write_text("[strategies.reflect_insights]\nenabled = true\n")
    out = Engine(with_llm).trigger("reflect_insights")
    assert out.status == "ok" and not any(out.counts.values()), out
    assert out.reason is not None
    lead = f"below the threshold: {ANDREW}: importance "
    assert out.reason.startswith(lead), out.reason
    assert out.reason.endswith(" of 150 from 3 new Episodes, 3 of 20 live Episodes")


def test_a_tier_with_nothing_new_says_so(with_llm: Runtime) -> None:
    (with_llm.root / "ome.toml").write_text("[strategies.update_worldview]\nenabled = true\n")
    out = Engine(with_llm).trigger("update_worldview")
    assert (out.status, out.reason) == ("ok", "no new insights since the last run")


def test_a_tier_that_needs_an_llm_says_so_in_the_answer(rt: Runtime) -> None:
    out = Engine(rt).trigger("update_worldview", force=True)
    assert out.counts == {"needs_llm": 1}
    assert out.reason is not None and out.reason.startswith("needs an LLM: "), out.reason
    assert f"— nothing to do: {out.reason}" in outcome_line(out, "in-process")


def test_revalidation_with_nothing_stale_says_so(rt: Runtime) -> None:
    out = Engine(rt).trigger("revalidate_insights", force=True)
    assert out.reason == ("no stale insight to judge: no record an insight cites was "
                          "archived, edited or deleted since it was last judged")


def test_the_api_trigger_answer_carries_the_reason(rt: Runtime) -> None:
    seed_pets(rt)
    call = ApiClient(rt)
    first = call("POST", "/api/v1/ome/trigger", json={"name": "reflect_episodes",
                                                      "force": True})
    assert first.status_code == 200 and first.json()["reason"] is None, first.text
    again = call("POST", "/api/v1/ome/trigger", json={"name": "reflect_episodes",
                                                      "force": True}).json()
    assert again["status"] == "ok"
    assert again["reason"].startswith("no new Episodes to merge: "), again
