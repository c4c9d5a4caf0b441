"""Offline, revalidate_insights is not fired again and again by stale insights it cannot judge."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from everos_reflect.engine.engine import strategies_status
from everos_reflect.index.sync import Indexer
from everos_reflect.strategies.revalidate import NAME, RevalidateInsights
from tests.test_provenance import DEV, edit_file
from tests.test_revalidate import merged, run, setup, with_openai

pytest_plugins = ["tests.fake_openai"]


def unavailable(rt: Any) -> str | None:
    [row] = [r for r in strategies_status(rt) if r["name"] == NAME]
    return row["unavailable"]


def test_a_stale_set_an_offline_run_could_not_judge_does_not_fire_the_strategy_again(
    root: Path, fake_openai: Any
) -> None:
    """Each offline run reported `needs_llm` and the data poll, seeing the same stale
    insight, fired the next one as soon as the cooldown was over: a run every two minutes,
    for ever, that could do nothing."""
    rt, eps, first, _second = setup(root)
    merged(rt, eps)
    # one: the depth-2 insight waits for the first, which it cites, to be judged
    assert RevalidateInsights().observe(rt, None) == 1
    assert unavailable(rt) is None  # nothing was found that needs a model yet
    assert run(rt) == {"needs_llm": 1, "waiting_on_cited": 1}

    assert RevalidateInsights().observe(rt, None) == 0  # nothing new to do offline
    reason = unavailable(rt)
    # the first, which only a model can judge, and the second, which waits for its verdict
    assert reason is not None and reason.startswith("needs an LLM") and "2 stale" in reason
    # a run (the hourly cron) still says why
    assert run(rt) == {"needs_llm": 1, "waiting_on_cited": 1}
    assert RevalidateInsights().observe(rt, None) == 0

    # its evidence edited: something new, looked at once more
    edit_file(rt.store.path_for_id(DEV, eps[1].id), "on day 16", "on day 17")
    Indexer(rt).scan()
    assert RevalidateInsights().observe(rt, None) == 1
    assert run(rt) == {"needs_llm": 1, "waiting_on_cited": 1}
    assert RevalidateInsights().observe(rt, None) == 0

    # a model configured: the insight is waiting for it
    with_openai(rt, fake_openai)
    assert RevalidateInsights().observe(rt, None) == 1
    assert unavailable(rt) is None
    assert rt.store.get(DEV, first.id).meta["status"] == "stale"


def test_the_needs_llm_note_goes_once_the_insight_is_no_longer_stale(root: Path) -> None:
    rt, eps, first, _second = setup(root)
    merged(rt, eps)
    run(rt)
    assert unavailable(rt) is not None
    rt.store.update_meta(DEV, first.id, {"status": "retired"})  # settled by other means
    Indexer(rt).scan()
    # the depth-2 insight waited for the first: judged now, one Episode left, it is retired
    assert run(rt) == {"retired": 1}
    assert rt.store.get(DEV, _second.id).meta["status"] == "retired"
    assert unavailable(rt) is None
