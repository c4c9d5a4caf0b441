"""A lying model, on every derived tier: a reply cut off mid-JSON, one the server says it cut
(``finish_reason: "length"``), a 200 whose body is an error, numbers written as strings, a null
where text goes, and a citation repeated. Each is refused in words (the run counts it, its
``derivation_report`` row says why), nothing wrong is written, and nothing is lost: the same
window is sent again and a good reply is written. Through the real client and the loopback
fake server (no retries)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from everos_reflect.index.audit import list_derivations
from everos_reflect.model import Kind
from everos_reflect.runtime import Runtime
from tests.test_aside_settings import ADA, convictions, edges, episodes, insights, run, tasks
from tests.test_aside_settings import rt as rt  # the fake server's runtime

pytest_plugins = ["tests.fake_openai"]


@dataclass(frozen=True)
class Tier:
    name: str
    seed: Callable[[Runtime], list[str]]
    kind: Kind
    good: dict[str, Any]
    #: the reply with its first item's text null, and with its citations as strings
    null_text: dict[str, Any]
    string_numbers: dict[str, Any]
    settings: tuple[tuple[str, Any], ...] = ()
    #: replies before the one under test (the questions of reflect_insights)
    before: tuple[dict[str, Any], ...] = ()


TIERS = [
    Tier("update_worldview", insights, Kind.CONVICTION,
         {"convictions": [{"key": "principles", "text": "Reliability first.",
                           "evidence": [1, 2]}]},
         {"convictions": [{"key": "principles", "text": None, "evidence": [1, 2]}]},
         {"convictions": [{"key": "principles", "text": "Reliability first.",
                           "evidence": ["1", "2"]}]}),
    Tier("detect_contradictions", convictions, Kind.RELATION,
         {"contradictions": [{"between": [1, 2], "text": "Speed against reliability."}]},
         {"contradictions": [{"between": [1, 2], "text": None}]},
         {"contradictions": [{"between": ["1", "2"], "text": "Speed against reliability."}]}),
    Tier("reconcile", edges, Kind.INSIGHT,
         {"insight": "Speed wins near launches, reliability after.", "evidence": [1, 2]},
         {"insight": None, "evidence": [1, 2]},
         {"insight": "Speed wins near launches, reliability after.", "evidence": ["1", "2"]}),
    Tier("learn_lessons", tasks, Kind.LESSON,
         {"lessons": ["Retry the registry pull."], "avoid": []},
         {"lessons": [None], "avoid": []},
         {"lessons": ["Retry the registry pull."], "avoid": [1]}),
    Tier("reflect_insights", episodes, Kind.INSIGHT,
         {"insights": [{"insight": "Releases ship past review.", "evidence": [1, 2]}]},
         {"insights": [{"insight": None, "evidence": [1, 2]}]},
         {"insights": [{"insight": "Releases ship past review.", "evidence": ["1", "2"]}]},
         (("threshold", 10.0), ("min_episodes", 2), ("questions", 1)),
         ({"questions": ["What slips?"]},)),
]


def lies(tier: Tier, fake: Any) -> dict[str, Any]:
    """Each lying reply, and the words its row's error must hold."""
    text = json.dumps(tier.good)
    return {
        "cut off mid-JSON": (text[: len(text) // 2], "not valid JSON"),
        "finish_reason length": (fake.Reply(text, finish_reason="length"),
                                 "reply truncated (finish_reason=length)"),
        "a 200 with an error body": (
            fake.Status(200, body={"error": {"message": "The server is overloaded",
                                             "type": "server_error"}}),
            "The server is overloaded"),
        "numbers as strings": (json.dumps(tier.string_numbers),
                               "must be a list of strings" if tier.kind is Kind.LESSON
                               else "not a record number"),
        "a null text": (json.dumps(tier.null_text),
                        "must be a list of strings" if tier.kind is Kind.LESSON
                        else "must be a string"),
    }


def written(rt: Runtime, kind: Kind) -> list[str]:
    return sorted(e.id for e in rt.store.entries(ADA, kind))


@pytest.mark.parametrize("lie", ["cut off mid-JSON", "finish_reason length",
                                 "a 200 with an error body", "numbers as strings",
                                 "a null text"])
@pytest.mark.parametrize("tier", TIERS, ids=[t.name for t in TIERS])
def test_a_lying_reply_is_refused_in_words_writes_nothing_and_loses_nothing(
        rt: Runtime, fake_openai: Any, tier: Tier, lie: str) -> None:
    own = dict(tier.settings)
    tier.seed(rt)
    before = written(rt, tier.kind)
    reply, words = lies(tier, fake_openai)[lie]
    fake_openai.script(*tier.before, reply)
    counts = run(rt, tier.name, **own)
    assert counts.get("failed"), counts
    assert written(rt, tier.kind) == before
    [row] = [r for r in list_derivations(rt.db(), strategy=tier.name) if r["status"] == "failed"]
    assert words in str(row["error"]), row["error"]
    fake_openai.script(*tier.before, tier.good)
    counts = run(rt, tier.name, **own)
    if tier.name == "reflect_insights":
        # seed 000's circuit breaker: the window is consumed after a failed run too, so a
        # failing owner cannot spin; the Episodes stay, counted again by the next window
        assert counts == {} and fake_openai.remaining == 2
        return
    # nothing lost: the same window is asked about again, and a good reply is written
    assert not counts.get("failed"), counts
    assert len(written(rt, tier.kind)) == len(before) + 1


@pytest.mark.parametrize("tier", [t for t in TIERS if t.name != "learn_lessons"],
                         ids=[t.name for t in TIERS if t.name != "learn_lessons"])
def test_a_citation_repeated_counts_once(rt: Runtime, fake_openai: Any, tier: Tier) -> None:
    """``[1, 1]`` is one record: under the citation floor (insights, reconciliations) or no pair
    (edges) it is refused; a conviction cites it once."""
    own = dict(tier.settings)
    tier.seed(rt)
    before = written(rt, tier.kind)
    twice = json.loads(json.dumps(tier.good).replace("[1, 2]", "[1, 1]"))
    fake_openai.script(*tier.before, twice)
    counts = run(rt, tier.name, **own)
    assert not counts.get("failed"), counts
    new = sorted(set(written(rt, tier.kind)) - set(before))
    if tier.name == "update_worldview":
        [made] = new
        evidence = rt.store.get(ADA, made).meta["evidence"]
        assert len(evidence) == len(set(evidence)) == 1
    else:
        assert counts.get("refused") == 1, counts
        assert new == []


@pytest.mark.parametrize(("reply", "words"), [
    ('{"verdict": "holds", "insight": "", "evid', "not valid JSON"),
    ({"verdict": "holds", "insight": "", "evidence": ["1", "2"]}, "not a record number"),
    ({"verdict": "keep", "insight": "", "evidence": [1, 2]}, "'verdict' must be holds, revise"),
    ({"verdict": "revise", "insight": None, "evidence": [1, 2]}, "must be a string"),
    ({"verdict": "holds", "insight": "", "evidence": None}, "must be a list of record numbers"),
], ids=["cut off", "numbers as strings", "unknown verdict", "null text", "null evidence"])
def test_a_lying_verdict_fails_its_insight_which_stays_stale_and_is_asked_again(
        root: Any, fake_openai: Any, reply: Any, words: str) -> None:
    from everos_reflect.index.sync import Indexer
    from tests.test_provenance import DEV, edit_file
    from tests.test_revision_rules import revalidation_runtime

    rt, eps, first, _second = revalidation_runtime(root, fake_openai)
    try:
        edit_file(rt.store.path_for_id(DEV, eps[1].id), "on day 16", "on day 17")
        Indexer(rt).scan()
        fake_openai.script(reply if isinstance(reply, str) else json.dumps(reply))
        counts = run(rt, "revalidate_insights")
        assert counts.get("failed") == 1, counts
        [row] = [r for r in list_derivations(rt.db(), strategy="revalidate_insights")
                 if r["status"] == "failed"]
        assert words in str(row["error"]), row["error"]
        assert rt.store.get(DEV, first.id).meta["status"] == "stale"
        fake_openai.script({"verdict": "holds", "insight": "", "evidence": [1, 2]},
                           {"verdict": "holds", "insight": "", "evidence": [1, 2]})
        assert run(rt, "revalidate_insights").get("kept")  # asked again: nothing lost
        assert rt.store.get(DEV, first.id).meta["status"] == "active"
    finally:
        rt.close()
