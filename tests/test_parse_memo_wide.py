"""While a Reflection run reads the same hundreds of day logs at several steps (select, check,
archive), the parse memo holds them all (within its character cap), and shrinks back to its
usual size when the run ends, so a long-lived ``serve`` keeps its memory between runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.markdown import parsed
from everos_reflect.strategies import reflect
from tests.reflect_fixtures import make_runtime, run_reflection, seed_pets

pytestmark = pytest.mark.usefixtures("settle_at_once")

LOGS = parsed.MAX_HELD_LOGS + 36


def _parse_all(scope: str) -> int:
    """Parse ``LOGS`` distinct logs; the parses made (not answered from the memo)."""
    made = parsed.counts["parsed"]
    for n in range(LOGS):
        parsed.parse(f"# log {n}\n", f"users/u_x/episodes/{n}.md", scope=scope)
    return parsed.counts["parsed"] - made


def test_more_logs_than_the_usual_cap_are_held_only_inside_the_block() -> None:
    parsed.forget()
    try:
        assert _parse_all("/wide") == LOGS
        assert _parse_all("/wide") == LOGS  # the first ones were pushed out by the last
        with parsed.holding_more():
            # the last MAX_HELD_LOGS are still held; the first ones are parsed and kept too
            assert _parse_all("/wide") == LOGS - parsed.MAX_HELD_LOGS
            assert _parse_all("/wide") == 0  # every one held
            assert parsed.held_logs() >= LOGS
        assert parsed.held_logs() == parsed.MAX_HELD_LOGS
    finally:
        parsed.forget()


def test_the_memo_stays_wide_until_the_last_block_ends() -> None:
    parsed.forget()
    try:
        outer = parsed.holding_more()
        outer.__enter__()
        with parsed.holding_more():
            _parse_all("/nested")
        assert parsed.held_logs() >= LOGS  # the outer block (another run) is still open
        outer.__exit__(None, None, None)
        assert parsed.held_logs() == parsed.MAX_HELD_LOGS
    finally:
        parsed.forget()


def test_a_reflection_run_selects_and_commits_with_the_memo_wide(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wide: list[bool] = []
    select = reflect.select

    def select_noting(*args: Any, **kwargs: Any) -> Any:
        wide.append(parsed._wide > 0)
        return select(*args, **kwargs)

    monkeypatch.setattr(reflect, "select", select_noting)
    rt = make_runtime(root, ExtractiveLLM())
    try:
        seed_pets(rt)
        Indexer(rt).scan()
        assert run_reflection(rt)["merged"] == 1
    finally:
        rt.close()
    assert wide and all(wide)
    assert parsed._wide == 0
