"""With a dead LLM (a server that never answers), ``max_wall_seconds`` bounds a revalidation
run: a call does not retry when another try could not end before the run's wall limit, where
the run's last call overshot the limit by ``timeout_seconds`` × (``max_retries`` + 1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from everos_reflect.engine.engine import Engine
from everos_reflect.index.audit import list_derivations
from everos_reflect.llm.openai_llm import OpenAILLM
from everos_reflect.strategies.revalidate import NAME
from tests.reflect_fixtures import add_episode
from tests.test_provenance import DEV, insight
from tests.test_revalidate import merged, setup

pytest_plugins = ["tests.fake_openai"]

TIMEOUT = 2.0  # one try against the server that never answers


def test_a_dead_llm_does_not_retry_past_the_runs_wall_limit(root: Path, fake_openai: Any
                                                            ) -> None:
    rt, eps, _first, _second = setup(root)
    # a second insight standing on the Episodes alone: two insights to judge, side by side
    extra = add_episode(rt, DEV, "2026-09-20T10:00:00+00:00", "Revert",
                        "The user reverted an auth change again.")
    insight(rt, "Auth changes get reverted.", [eps[0], extra])
    merged(rt, eps)  # the first Episode archived: every insight citing it is stale
    (root / "ome.toml").write_text(
        f"[strategies.{NAME}]\nenabled = true\nmax_wall_seconds = {TIMEOUT}\n")
    fake_openai.latency = 30.0  # connected, never answers in time
    rt.__dict__["llm"] = OpenAILLM(model="fake-model", base_url=fake_openai.base_url,
                                   api_key="k", timeout_seconds=TIMEOUT, max_retries=2,
                                   sleep=lambda s: None)
    outcome = Engine(rt).trigger(NAME, timeout=120)
    # one try of the first insight, which took the whole wall limit: no retry, and no
    # second insight asked about
    assert len(fake_openai.requests) == 1
    assert outcome.status == "failed"
    assert "max_wall_seconds" in (outcome.error or "")
    rows = [r for r in list_derivations(rt.db()) if r["strategy"] == NAME]
    assert [r["status"] for r in rows] == ["failed"]
    assert "gave up after 1 attempt" in rows[0]["error"]
    assert "no retry: the run's max_wall_seconds" in rows[0]["error"]
