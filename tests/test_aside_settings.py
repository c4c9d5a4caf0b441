"""Every tier keys what it sets aside on the prompts and the model, as Reflection does.

A call the server refused for good (HTTP 400, 413, 422) sets its records aside. The tiers kept
them under their text alone: a person who rewrote the tier's prompt, or picked a bigger model or
another server, to get past the refusal still had them left aside until someone edited them.
Each tier here, through the real client and the loopback fake server: unchanged settings keep
the records aside (nothing is sent), another task's prompt keeps them aside, and a changed
prompt or model sends them again once (refused again, they are aside under the new key).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.engine.registry import RunContext, get_strategy, validate_strategy_settings
from everos_reflect.llm.tasks import get_task
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import LLMSettings, Settings

pytest_plugins = ["tests.fake_openai"]

ADA = UserRef.of("ada")
_runs = itertools.count()


def openai_settings(base_url: str, model: str = "model-a") -> Settings:
    return Settings(llm=LLMSettings(provider="openai", model=model, base_url=base_url,
                                    api_key="k", max_retries=0, timeout_seconds=10))


def use_model(rt: Runtime, model: str) -> None:
    """Open the root with another ``[llm] model`` (the client is built again from it)."""
    rt.settings = replace(rt.settings, llm=replace(rt.settings.llm, model=model))
    rt.__dict__.pop("llm", None)


def run(rt: Runtime, name: str, **settings: Any) -> dict[str, int]:
    values = validate_strategy_settings(
        name, {"enabled": True, "cooldown_seconds": 0, **settings}, "ome.toml")
    ctx = RunContext(rt, values, f"run_aside_{next(_runs)}", "manual")
    return {k: v for k, v in get_strategy(name).run(ctx).items() if v}


def brief(task: str) -> dict[str, str]:
    """A ``prompts`` table that rewrites ``task``'s template (its default, one line added)."""
    return {task: "Be brief.\n" + get_task(task).template}


def user_text(body: dict[str, Any]) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


# -- what each tier needs to be due ------------------------------------------------------------


def episodes(rt: Runtime, n: int = 3) -> list[str]:
    made = rt.store.append_many(ADA, Kind.EPISODE, [(
        {"timestamp": f"2026-10-{d:02d}T09:00:00+00:00", "parent_type": "memcell",
         "parent_id": f"mc_{d}", "importance": 9},
        {"Subject": f"Release {d}", "Content": f"Shipped release {d} past review."})
        for d in range(1, n + 1)])
    return [e.id for e in made]


def insights(rt: Runtime) -> list[str]:
    eps = episodes(rt, 2)
    made = rt.store.append_many(ADA, Kind.INSIGHT, [(
        {"evidence": eps, "depth": 1, "status": "active", "insight_type": "reflection"},
        {"Insight": t}) for t in ("Reviews get skipped.", "Launch dates win.", "Ops is tired.")])
    return [e.id for e in made]


def convictions(rt: Runtime) -> list[str]:
    ins = insights(rt)
    made = rt.store.append_many(ADA, Kind.CONVICTION, [(
        {"evidence": ins[:2], "depth": 2, "status": "active", "key": key}, {"Conviction": text})
        for key, text in (("principles", "Reliability before velocity."),
                          ("risks", "Shipping fast past review."))])
    return [e.id for e in made]


def edges(rt: Runtime) -> list[str]:
    a, b = convictions(rt)
    made = rt.store.append_many(ADA, Kind.RELATION, [(
        {"evidence": [a, b], "depth": 3, "status": "active",
         "relation_type": "self_contradiction", "between": [a, b]}, {"Relation": text})
        for text in ("Speed contradicts reliability.", "Skipped reviews contradict it.")])
    return [e.id for e in made]


def tasks(rt: Runtime) -> list[str]:
    from everos_reflect.procedural.tasks import new_task

    made = []
    for day in (1, 2):
        t = new_task(ADA, task_type="deploy", goal="Deploy the web service", steps=["deploy"],
                     outcome="failure", errors=["registry timeout"],
                     timestamp=f"2026-10-{day:02d}T10:00:00+00:00")
        made.append(rt.store.append(ADA, Kind.TASK, t.meta, t.sections, day=t.day).id)
    return made


@dataclass(frozen=True)
class Tier:
    name: str
    seed: Callable[[Runtime], list[str]]
    task: str  # the prompt rewritten to get past the refusal (the tier's first call)
    aside: int  # records a refusal sets aside
    settings: tuple[tuple[str, Any], ...] = ()


TIERS = [
    Tier("update_worldview", insights, "worldview", 3),
    Tier("detect_contradictions", convictions, "contradictions", 2),
    Tier("reconcile", edges, "reconciliation", 2),
    Tier("learn_lessons", tasks, "lessons", 2),
    Tier("reflect_insights", episodes, "questions", 3,
         (("threshold", 10.0), ("min_episodes", 2), ("questions", 1))),
]


@pytest.fixture
def rt(root: Path, fake_openai: Any) -> Iterator[Runtime]:
    runtime = Runtime(root, openai_settings(fake_openai.base_url), embedder=HashEmbedder(32))
    yield runtime
    runtime.close()


@pytest.mark.parametrize("tier", TIERS, ids=[t.name for t in TIERS])
def test_a_changed_prompt_or_model_sends_a_set_aside_window_again_once(
        rt: Runtime, fake_openai: Any, tier: Tier) -> None:
    own = dict(tier.settings)
    prompt = brief(tier.task)
    refused = {"failed": 1, "set_aside": tier.aside}
    tier.seed(rt)
    fake_openai.script(413)
    assert run(rt, tier.name, **own) == refused
    # unchanged settings, or a prompt of a task the tier never sends: nothing is sent (an
    # unscripted request would be answered 418 and fail the run)
    assert run(rt, tier.name, **own) == {}
    assert run(rt, tier.name, **own, prompts={"merge_init": "Other.\n$episodes"}) == {}
    assert len(fake_openai.chat_bodies()) == 1

    fake_openai.script(413)
    assert run(rt, tier.name, **own, prompts=prompt) == refused
    assert user_text(fake_openai.chat_bodies()[-1]).startswith("Be brief.\n")
    assert run(rt, tier.name, **own, prompts=prompt) == {}  # once: aside under the new key
    assert len(fake_openai.chat_bodies()) == 2

    use_model(rt, "model-b")
    fake_openai.script(422)
    assert run(rt, tier.name, **own, prompts=prompt) == refused
    assert fake_openai.chat_bodies()[-1]["model"] == "model-b"
    assert run(rt, tier.name, **own, prompts=prompt) == {}
    assert len(fake_openai.chat_bodies()) == 3


def test_a_changed_prompt_or_model_asks_about_a_set_aside_stale_insight_again_once(
        root: Path, fake_openai: Any) -> None:
    from everos_reflect.index.sync import Indexer
    from everos_reflect.strategies.revalidate import NAME
    from tests.test_provenance import DEV, edit_file, setup

    rt, eps, _first, _second = setup(root)
    try:
        rt.settings = openai_settings(fake_openai.base_url)
        rt.__dict__.pop("llm", None)  # setup's offline client: built again from [llm]
        edit_file(rt.store.path_for_id(DEV, eps[1].id), "on day 16", "on day 17")
        Indexer(rt).scan()
        fake_openai.script(413)
        # the depth-2 insight cites the first, still stale: it waits for its verdict
        waits = {"waiting_on_cited": 1}
        assert run(rt, NAME) == {"failed": 1, "set_aside": 1, **waits}
        assert run(rt, NAME) == waits
        assert run(rt, NAME, prompts=brief("lessons")) == waits
        assert len(fake_openai.chat_bodies()) == 1

        prompt = brief("revalidation")
        fake_openai.script(400)
        assert run(rt, NAME, prompts=prompt) == {"failed": 1, "set_aside": 1, **waits}
        assert user_text(fake_openai.chat_bodies()[-1]).startswith("Be brief.\n")
        assert run(rt, NAME, prompts=prompt) == waits

        use_model(rt, "model-b")
        fake_openai.script(413)
        assert run(rt, NAME, prompts=prompt) == {"failed": 1, "set_aside": 1, **waits}
        assert fake_openai.chat_bodies()[-1]["model"] == "model-b"
        assert run(rt, NAME, prompts=prompt) == waits
        assert len(fake_openai.chat_bodies()) == 3
    finally:
        rt.close()


def test_an_injected_client_keys_what_it_sets_aside_on_its_own_model(
        root: Path, fake_openai: Any) -> None:
    from everos_reflect.llm.openai_llm import OpenAILLM

    def client(model: str) -> OpenAILLM:
        return OpenAILLM(model=model, base_url=fake_openai.base_url, api_key="k",
                         max_retries=0, timeout_seconds=10, sleep=lambda s: None)

    # the root's [llm] names no server or model of these: the client is handed in
    rt = Runtime(root, embedder=HashEmbedder(32), llm=client("model-a"))
    try:
        tasks(rt)
        refused = {"failed": 1, "set_aside": 2}
        fake_openai.script(413)
        assert run(rt, "learn_lessons") == refused
        assert run(rt, "learn_lessons") == {}
        rt.__dict__["llm"] = client("model-b")
        fake_openai.script(422)
        assert run(rt, "learn_lessons") == refused  # sent once more, to the other model
        assert fake_openai.chat_bodies()[-1]["model"] == "model-b"
        assert run(rt, "learn_lessons") == {}
        assert len(fake_openai.chat_bodies()) == 2
    finally:
        rt.close()
