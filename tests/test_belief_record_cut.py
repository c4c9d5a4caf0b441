"""``max_records`` in ``detect_contradictions`` and ``reconcile``: what a call cannot show is
never consumed unseen. The detector shows the changed convictions first, then the most recent
others; the reconciler takes whole edges with the convictions they join. What is past the cut
waits for the next run, which picks it up, and the run counts it (``deferred_records``: window
records left for a later run; ``unshown_records``: current records a call could not show).
Through the real ``openai`` client and the loopback fake server."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.engine.engine import Engine
from everos_reflect.engine.registry import get_strategy
from everos_reflect.index import cursors
from everos_reflect.llm.openai_llm import OpenAILLM
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from everos_reflect.strategies import belief_views

pytest_plugins = ["tests.fake_openai"]

ADA = UserRef.of("ada")


@pytest.fixture
def rt(root: Path, fake_openai: Any) -> Iterator[Runtime]:
    (root / "ome.toml").write_text("".join(
        f"[strategies.{n}]\nenabled = true\ncooldown_seconds = 0\nmax_records = 3\n"
        for n in ("detect_contradictions", "reconcile")))
    llm = OpenAILLM(model="fake-model", base_url=fake_openai.base_url, api_key="k",
                    max_retries=0, timeout_seconds=10, sleep=lambda s: None)
    runtime = Runtime(root, Settings(), embedder=HashEmbedder(32), llm=llm)
    yield runtime
    runtime.close()


def convictions(rt: Runtime, *texts: str, start: int = 1) -> list[str]:
    """One conviction per text, each of its own key, a day apart (ids in that order)."""
    made = rt.store.append_many(ADA, Kind.CONVICTION, [(
        {"timestamp": f"2026-10-{start + n:02d}T09:00:00+00:00", "key": f"k{start + n}",
         "evidence": [], "depth": 2, "status": "active"}, {"Conviction": t})
        for n, t in enumerate(texts)])
    return [e.id for e in made]


def shown(body: dict[str, Any]) -> dict[str, int]:
    """``{text: n}`` of the numbered records of a request."""
    text = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return {t: int(n) for n, t in re.findall(r"^\[(\d+)\] \S+ [^:]+: (.*)$", text, re.M)}


def changed_lines(body: dict[str, Any]) -> list[str]:
    text = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return [line for line in text.splitlines()
            if line.startswith("[") and "just changed" in line]


def consumed(rt: Runtime, name: str) -> set[str]:
    """The entry ids ``name`` consumed (not the detector's notes of pairs shown)."""
    return {i for i, _ in cursors.consumed(rt.db(), name, ADA) if not i.startswith("pair:")}


NOTHING = {"contradictions": []}


def test_a_changed_conviction_past_the_id_order_cut_is_shown_and_compared(
        rt: Runtime, fake_openai: Any) -> None:
    old = convictions(rt, "Ship weekly.", "Serve enterprises.", "Keep the team small.")
    fake_openai.script(NOTHING)
    assert Engine(rt).trigger("detect_contradictions", timeout=60).status == "ok"
    (new,) = convictions(rt, "Stop all enterprise work.", start=4)  # the newest id

    def edge(body: dict[str, Any]) -> dict[str, Any]:
        n = shown(body)
        return {"contradictions": [{"between": [n["Stop all enterprise work."],
                                                n["Serve enterprises."]],
                                    "text": "Enterprise work both served and stopped."}]}

    fake_openai.script(edge)
    outcome = Engine(rt).trigger("detect_contradictions", timeout=60)

    assert outcome.status == "ok", outcome
    body = fake_openai.chat_bodies()[-1]
    # the changed one is shown, with the most recent others; the oldest waits
    assert set(shown(body)) == {"Stop all enterprise work.", "Keep the team small.",
                                "Serve enterprises."}
    assert len(changed_lines(body)) == 1 and "Stop all" in changed_lines(body)[0]
    assert outcome.counts == {"owners": 1, "written": 1, "unshown_records": 1}
    (rel,) = belief_views.relations(rt, ADA)
    assert set(rel["between"]) == {new, old[1]}
    # not consumed: its pair with the oldest was not shown yet
    assert consumed(rt, "detect_contradictions") == set(old)
    assert get_strategy("detect_contradictions").observe(rt, None) == 1

    fake_openai.script(NOTHING)
    outcome = Engine(rt).trigger("detect_contradictions", timeout=60)
    assert outcome.counts == {"owners": 1}
    body = fake_openai.chat_bodies()[-1]
    assert set(shown(body)) == {"Stop all enterprise work.", "Ship weekly."}
    assert consumed(rt, "detect_contradictions") == {*old, new}
    assert get_strategy("detect_contradictions").observe(rt, None) == 0


def test_changed_convictions_past_max_records_wait_for_the_next_run_and_are_counted(
        rt: Runtime, fake_openai: Any) -> None:
    ids = convictions(rt, "One.", "Two.", "Three.", "Four.")
    fake_openai.script(NOTHING)
    outcome = Engine(rt).trigger("detect_contradictions", timeout=60)
    assert outcome.counts == {"owners": 1, "deferred_records": 1}
    assert consumed(rt, "detect_contradictions") == set(ids[:3])
    assert get_strategy("detect_contradictions").observe(rt, None) == 1  # the fourth waits

    fake_openai.script(NOTHING)
    outcome = Engine(rt).trigger("detect_contradictions", timeout=60)
    assert outcome.counts == {"owners": 1, "unshown_records": 1}
    assert changed_lines(fake_openai.chat_bodies()[-1])[0].endswith("Four.")
    assert consumed(rt, "detect_contradictions") == set(ids[:3])  # "Four." meets "One." next

    fake_openai.script(NOTHING)
    outcome = Engine(rt).trigger("detect_contradictions", timeout=60)
    assert outcome.counts == {"owners": 1}
    assert set(shown(fake_openai.chat_bodies()[-1])) == {"One.", "Four."}
    assert consumed(rt, "detect_contradictions") == set(ids)


def relations(rt: Runtime, *pairs: tuple[str, str]) -> list[str]:
    made = rt.store.append_many(ADA, Kind.RELATION, [(
        {"relation_type": "self_contradiction", "between": list(pair), "evidence": list(pair),
         "depth": 3, "status": "active"}, {"Relation": f"{pair[0]} against {pair[1]}"})
        for pair in pairs])
    return [e.id for e in made]


def test_reconcile_takes_whole_edges_and_leaves_the_rest_for_the_next_run(
        rt: Runtime, fake_openai: Any) -> None:
    c1, c2, c3, c4 = convictions(rt, "Ship weekly.", "Review everything.", "Serve enterprises.",
                                 "Stop enterprise work.")
    e1, e2 = relations(rt, (c1, c2), (c3, c4))

    def reconcile(body: dict[str, Any]) -> dict[str, Any]:
        # each its own text: a reconciliation repeating a live insight is refused
        first = min(shown(body))
        return {"insight": f"Reconciles {first}.", "evidence": sorted(shown(body).values())}

    fake_openai.script(reconcile)
    outcome = Engine(rt).trigger("reconcile", timeout=60)

    assert outcome.status == "ok", outcome
    assert outcome.counts == {"owners": 1, "written": 1, "deferred_records": 1}
    # the first edge with both its convictions: nothing of the other edge, nothing cut
    assert set(shown(fake_openai.chat_bodies()[-1])) == {
        f"{c1} against {c2}", "Ship weekly.", "Review everything."}
    assert consumed(rt, "reconcile") == {e1}
    assert get_strategy("reconcile").observe(rt, None) == 1  # e2 waits, still unreconciled

    fake_openai.script(reconcile)
    outcome = Engine(rt).trigger("reconcile", timeout=60)
    assert outcome.counts == {"owners": 1, "written": 1}
    assert set(shown(fake_openai.chat_bodies()[-1])) == {
        f"{c3} against {c4}", "Serve enterprises.", "Stop enterprise work."}
    assert consumed(rt, "reconcile") == {e1, e2}


def test_past_fifty_keys_every_pair_with_a_changed_conviction_is_shown_in_some_run(
        rt: Runtime, fake_openai: Any) -> None:
    """With more current convictions than ``max_records`` (50 by default) one call cannot
    show them all. The cut was always the same (the most recent others), so a changed
    conviction was consumed without ever meeting the oldest ones. A changed one now stays in
    the window, and each run (one call, at most ``max_records`` records) shows it beside the
    ones it has not met yet, until every pair was shown."""
    (rt.root / "ome.toml").write_text(
        "[strategies.detect_contradictions]\nenabled = true\ncooldown_seconds = 0\n")
    texts = [f"Conviction number {n}." for n in range(1, 56)]
    rt.store.append_many(ADA, Kind.CONVICTION, [(
        {"timestamp": f"2026-10-01T09:{n:02d}:00+00:00", "key": f"k{n}", "evidence": [],
         "depth": 2, "status": "active"}, {"Conviction": t}) for n, t in enumerate(texts)])
    met: set[frozenset[str]] = set()

    def settle() -> int:
        runs = 0
        while get_strategy("detect_contradictions").observe(rt, None) and runs < 10:
            fake_openai.script(NOTHING)
            assert Engine(rt).trigger("detect_contradictions", timeout=60).status == "ok"
            on_show = list(shown(fake_openai.chat_bodies()[-1]))
            assert 2 <= len(on_show) <= 50
            met.update(frozenset((a, b)) for a in on_show for b in on_show if a != b)
            runs += 1
        return runs

    assert settle() == 3  # the first 50 (every pair of them), then the 5 left: 45 + 5
    assert len(met) == 55 * 54 // 2

    met.clear()
    edited = rt.store.path_for_id(ADA, rt.store.entries(ADA, Kind.CONVICTION)[0].id)
    edited.write_text(edited.read_text().replace("Conviction number 1.", "Changed number 1."))
    from everos_reflect.index.sync import Indexer

    Indexer(rt).scan()
    assert settle() == 2  # 49 of the 54 others beside it, then the 5 left
    assert {pair for pair in met if "Changed number 1." in pair} == {
        frozenset(("Changed number 1.", t)) for t in texts[1:]}
