"""``reflect_insights`` shows no evidence it could not cite within ``max_depth``.

An insight already at ``max_depth`` (2 by default) was offered among the top 8 records of a
question: it took the place of a citable record, and every insight the model built on it was
refused ("depth 3 > max_depth 2"), the question's answer lost. It is left out of the evidence
now, as the belief tiers leave out what they could not cite; with a higher ``max_depth`` it
is shown again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from everos_reflect.llm import ScriptedLLM
from everos_reflect.llm.tasks import TaskRequest
from everos_reflect.model import Entry, Kind
from everos_reflect.runtime import Runtime
from tests.reflect_fixtures import make_runtime
from tests.test_insights import DEV, fill, run


def deep_insight(rt: Runtime) -> tuple[list[Entry], Entry, Entry]:
    """The three auth reverts, a depth-1 insight on two of them and a depth-2 one citing it."""
    reverts = [e for e in rt.store.entries(DEV, Kind.EPISODE) if e.subject.startswith("Reverted")]
    one = rt.store.append(DEV, Kind.INSIGHT, {
        "evidence": [reverts[0].id, reverts[1].id], "depth": 1, "status": "active",
        "derivation": "dw_a", "insight_type": "reflection", "importance": 9},
        {"Insight": "The user reverted auth changes twice."}, derived=True)
    two = rt.store.append(DEV, Kind.INSIGHT, {
        "evidence": [one.id, reverts[2].id], "depth": 2, "status": "active",
        "derivation": "dw_b", "insight_type": "reflection", "importance": 9},
        {"Insight": "The user reverted auth changes three times: no trust in the auth "
                    "refactor."}, derived=True)
    return reverts, one, two


def ask(llm: ScriptedLLM, cite: list[str]) -> list[list[str]]:
    """Script one question and an insight citing whichever of ``cite`` were shown; the ids
    shown are collected."""
    shown: list[list[str]] = []

    def insights(req: TaskRequest) -> dict[str, Any]:
        numbers = {r.id: n for n, r in enumerate(req.records, start=1)}
        shown.append(list(numbers))
        return {"insights": [{"insight": "Auth changes keep being reverted.",
                              "evidence": [numbers[i] for i in cite if i in numbers]}]}

    llm.queue_task("questions", {"questions": ["What does the user's auth revert history "
                                               "show?"]})
    llm.queue_task("insights", insights)
    return shown


def test_an_insight_at_max_depth_is_not_offered_as_evidence(root: Path) -> None:
    llm = ScriptedLLM()
    rt = make_runtime(root, llm)
    try:
        fill(rt)
        reverts, one, two = deep_insight(rt)
        shown = ask(llm, [two.id, one.id, reverts[2].id])
        counts = run(rt, questions=1)
        (ids,) = shown
        assert two.id not in ids and one.id in ids
        assert counts.get("written") == 1 and "refused" not in counts
        (new,) = [e for e in rt.store.entries(DEV, Kind.INSIGHT) if e.id not in (one.id, two.id)]
        assert new.meta["depth"] == 2 and two.id not in new.meta["evidence"]
    finally:
        rt.close()


def test_a_higher_max_depth_shows_it_again(root: Path) -> None:
    llm = ScriptedLLM()
    rt = make_runtime(root, llm)
    try:
        fill(rt)
        reverts, _one, two = deep_insight(rt)
        shown = ask(llm, [two.id, reverts[0].id])
        counts = run(rt, questions=1, max_depth=3)
        (ids,) = shown
        assert two.id in ids
        assert counts.get("written") == 1
    finally:
        rt.close()
