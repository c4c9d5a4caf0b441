"""The cursor rows of ``detect_contradictions`` stay bounded: a pair row (``pair:<a>+<b>``)
is dropped, in the commit that writes the cursor, once either of its convictions is no longer
current in that text (a new version, a retirement, a hand edit). Kept, the rows grew by every
pair of every version ever written; dropped, nothing the detector decides changes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.engine.engine import Engine
from everos_reflect.engine.registry import get_strategy
from everos_reflect.index import cursors
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ScriptedLLM
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from everos_reflect.strategies.belief_store import BeliefState
from everos_reflect.strategies.contradictions import PAIR, pair_row, stale_pairs

ADA = UserRef.of("ada")
NAME = "detect_contradictions"


@pytest.fixture
def llm() -> ScriptedLLM:
    return ScriptedLLM()


@pytest.fixture
def rt(root: Path, llm: ScriptedLLM) -> Iterator[Runtime]:
    (root / "ome.toml").write_text(
        f"[strategies.{NAME}]\nenabled = true\ncooldown_seconds = 0\n")
    runtime = Runtime(root, Settings(), embedder=HashEmbedder(32), llm=llm)
    yield runtime
    runtime.close()


def write(rt: Runtime, key: str, text: str, minute: int) -> str:
    """A conviction of ``key``; the newest of its key is current (the run archives the rest)."""
    (made,) = rt.store.append_many(ADA, Kind.CONVICTION, [(
        {"timestamp": f"2026-10-01T{minute // 60:02d}:{minute % 60:02d}:00+00:00", "key": key,
         "evidence": [], "depth": 2, "status": "active"}, {"Conviction": text})])
    return made.id


def pair_rows(rt: Runtime) -> set[tuple[str, str]]:
    return {r for r in cursors.consumed(rt.db(), NAME, ADA) if r[0].startswith(PAIR)}


def expected_rows(rt: Runtime) -> set[tuple[str, str]]:
    """Every pair of the current convictions in their current texts."""
    state = BeliefState.load(rt, ADA)
    entries = state.by_id()
    now = sorted((c.id, entries[c.id].text_hash) for c in state.worldview().current.values())
    return {pair_row(a, ah, b, bh) for n, (a, ah) in enumerate(now) for b, bh in now[n + 1:]}


def settle(rt: Runtime, llm: ScriptedLLM) -> int:
    """Run the detector until nothing is due; how many runs that took."""
    runs = 0
    while get_strategy(NAME).observe(rt, None) and runs < 5:
        llm.queue_task("contradictions", {"contradictions": []})
        assert Engine(rt).trigger(NAME, timeout=60).status == "ok"
        runs += 1
    return runs


def test_pair_rows_stay_those_of_the_current_convictions_after_many_edits(
        rt: Runtime, llm: ScriptedLLM) -> None:
    for n, key in enumerate(("identity", "strategy", "risks", "principles")):
        write(rt, key, f"First {key}.", n)
    assert settle(rt, llm) == 1
    assert len(pair_rows(rt)) == 6

    minute = 10
    for round_ in range(12):  # a new version of one key each time: its 3 pairs are new
        key = ("identity", "strategy", "risks")[round_ % 3]
        minute += 1
        write(rt, key, f"Version {round_} of {key}.", minute)
        assert settle(rt, llm) == 1
        assert pair_rows(rt) == expected_rows(rt)
    assert len(pair_rows(rt)) == 6  # kept, 6 + 12 * 3 = 42

    # a hand edit of the current "principles" conviction: a new text, new pairs
    principles = next(c for c in BeliefState.load(rt, ADA).worldview().current.values()
                      if c.key == "principles")
    path = rt.store.path_for_id(ADA, principles.id)
    path.write_text(path.read_text().replace("First principles.", "Edited principles."))
    Indexer(rt).scan()
    assert settle(rt, llm) == 1
    assert pair_rows(rt) == expected_rows(rt) and len(pair_rows(rt)) == 6

    # retired: its pairs go with it, and the others' pairs stay
    rt.store.update_meta(ADA, principles.id, {"status": "retired"})
    write(rt, "identity", "Last identity.", minute + 1)  # a write, so the detector runs
    assert settle(rt, llm) == 1
    assert pair_rows(rt) == expected_rows(rt) and len(pair_rows(rt)) == 3
    assert settle(rt, llm) == 0  # nothing kept is needed again: no run shows it twice


def test_a_pair_row_is_stale_unless_both_sides_are_current_in_those_texts() -> None:
    a, b, c = "wv_20261001_0001", "wv_20261001_0002", "wv_20261001_0003"
    current = {a: "ha", b: "hb"}
    rows = [pair_row(a, "ha", b, "hb"), pair_row(a, "old", b, "hb"), pair_row(a, "ha", c, "hc"),
            (a, "ha"), (c, "hc")]  # entry rows are never pair rows
    assert stale_pairs(rows, current) == [rows[1], rows[2]]
    assert stale_pairs([pair_row(b, "hb", a, "ha")], current) == []  # either order written
