"""reflect_insights (seed 000, SPEC §10) through the real openai client on the loopback fake."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.engine.registry import RunContext, validate_strategy_settings
from everos_reflect.index.audit import list_derivations
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.llm.openai_llm import OpenAILLM
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.insights import NAME, ReflectInsights, accumulator_due
from tests.reflect_fixtures import add_episode, make_runtime

pytest_plugins = ["tests.fake_openai"]

DEV = UserRef.of("u_dev")
REVERTS = [
    ("2026-09-02T10:00:00+00:00", "Reverted PR 41", "The user reverted PR 41: the auth token "
     "refresh broke logins."),
    ("2026-09-16T10:00:00+00:00", "Reverted PR 44", "The user reverted PR 44, another change "
     "to the auth middleware."),
    ("2026-09-30T10:00:00+00:00", "Reverted PR 47", "The user reverted PR 47 touching auth "
     "session cookies."),
]


def fill(rt: Runtime, n: int = 20, importance: int = 7) -> None:
    """``n`` ordinary Episodes of the given importance (plus the three reverts at 9)."""
    for i in range(n):
        add_episode(rt, DEV, f"2026-08-{1 + i % 28:02d}T09:00:00+00:00", f"Standup {i}",
                    f"Daily standup number {i} about the billing dashboard.",
                    importance=importance)
    for ts, subject, content in REVERTS:
        add_episode(rt, DEV, ts, subject, content, importance=9)


def openai_runtime(root: Path, fake: Any) -> Runtime:
    llm = OpenAILLM(model="fake-model", base_url=fake.base_url, api_key="k", max_retries=0,
                    sleep=lambda s: None)
    return make_runtime(root, llm)


def run(rt: Runtime, *, force: bool = False, **settings: Any) -> dict[str, int]:
    values = validate_strategy_settings(NAME, {"enabled": True, **settings}, "ome.toml")
    return ReflectInsights().run(RunContext(rt, values, "run_t", "manual", force=force))


def numbers_of(body: dict[str, Any], needle: str) -> list[int]:
    text = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return [int(n) for n, line in re.findall(r"^\[(\d+)\] (.*)$", text, re.M) if needle in line]


def cite_reverts(body: dict[str, Any]) -> str:
    return json.dumps({"insights": [{"insight": "All three reverts touched auth: the user "
                                     "has stopped trusting the auth refactor.",
                                     "evidence": numbers_of(body, "reverted PR")}]})


def insights(rt: Runtime) -> list[Any]:
    return rt.store.entries(DEV, Kind.INSIGHT)


def test_three_auth_reverts_become_one_insight_citing_all_three(root: Path, fake_openai):
    rt = openai_runtime(root, fake_openai)
    fill(rt)
    fake_openai.script({"questions": ["What does the user's revert history show?"]},
                       cite_reverts)
    counts = run(rt, questions=1)
    assert counts.get("written") == 1
    (insight,) = insights(rt)
    revert_ids = [e.id for e in rt.store.entries(DEV, Kind.EPISODE)
                  if e.subject.startswith("Reverted")]
    assert sorted(insight.meta["evidence"]) == sorted(revert_ids)
    assert insight.meta["depth"] == 1 and insight.meta["status"] == "active"
    assert insight.meta["importance"] == 9
    assert insight.meta["question"] == "What does the user's revert history show?"
    assert set(insight.meta["evidence_hash"]) == set(revert_ids)
    assert "auth" in insight.content
    questions_body, insights_body = fake_openai.chat_bodies()
    assert list(questions_body["response_format"]["json_schema"]["schema"]["properties"]) == [
        "questions"]
    assert list(insights_body["response_format"]["json_schema"]["schema"]["properties"]) == [
        "insights"]
    assert len(numbers_of(insights_body, "")) <= 8  # top 8 evidence per question
    (row,) = list_derivations(rt.db(), strategy=NAME)
    assert row["status"] == "ok" and row["outputs"] == [insight.id]
    assert row["prompt_tokens"] == 22 and row["provider"] == "openai"


def test_an_insight_citing_one_record_is_dropped_and_unseen_numbers_fail(root, fake_openai):
    rt = openai_runtime(root, fake_openai)
    fill(rt)
    fake_openai.script({"questions": ["q1?", "q2?"]},
                       {"insights": [{"insight": "Only one source.", "evidence": [1]}]},
                       {"insights": [{"insight": "Cites a ghost.", "evidence": [1, 99]}]})
    counts = run(rt, questions=2)
    assert insights(rt) == []
    assert counts.get("failed") == 1  # the unseen [99] failed that call, and so the run
    (row,) = list_derivations(rt.db(), strategy=NAME)
    assert row["status"] == "failed" and "[99]" in row["error"]


def test_an_insight_repeating_a_live_one_or_another_of_the_run_is_refused(
        root: Path, fake_openai) -> None:
    """A model answering each question with the same sentence (and each list twice, once in
    other case) wrote it nine times in one run, and again on every later run."""
    rt = openai_runtime(root, fake_openai)
    fill(rt)

    def same(body: dict[str, Any]) -> str:
        item = {"insight": "All three reverts touched auth.",
                "evidence": numbers_of(body, "reverted PR")}
        return json.dumps({"insights": [
            item, item, {**item, "insight": "  all three reverts   touched AUTH"}]})

    fake_openai.script({"questions": ["q1?", "q2?", "q3?"]}, same, same, same)
    counts = run(rt, questions=3)
    (first,) = insights(rt)
    assert first.content == "All three reverts touched auth."
    assert (counts["written"], counts["refused"]) == (1, 8)
    (row,) = list_derivations(rt.db(), strategy=NAME)  # the audit says why, five named
    assert row["status"] == "ok" and row["error"] == "; ".join(
        ["insight refused: it repeats an insight of this run"] * 5 + ["3 more refused"])
    for i in range(15):  # enough importance for another run
        add_episode(rt, DEV, f"2026-10-{i + 1:02d}T09:00:00+00:00", f"More {i}", "x",
                    importance=10)
    fake_openai.script({"questions": ["q4?"]}, same)
    counts = run(rt, questions=1)
    assert [e.id for e in insights(rt)] == [first.id]
    assert counts.get("written") is None and counts["refused"] == 3


def test_accumulator_arithmetic_floor_and_reset(root: Path, fake_openai) -> None:
    assert not accumulator_due([7] * 21, 21, threshold=150, min_episodes=20)  # 147
    assert accumulator_due([7] * 21 + [3], 22, threshold=150, min_episodes=20)  # 150
    assert not accumulator_due([10] * 19, 19, threshold=150, min_episodes=20)  # the floor
    rt = openai_runtime(root, fake_openai)
    for i in range(19):
        add_episode(rt, DEV, f"2026-08-{i + 1:02d}T09:00:00+00:00", f"Big {i}", "An outage.",
                    importance=10)
    strategy = ReflectInsights()
    settings = validate_strategy_settings(NAME, {}, "ome.toml")
    assert list(strategy.due_owners(rt, settings)) == []  # 190 but only 19 episodes
    add_episode(rt, DEV, "2026-08-25T09:00:00+00:00", "Twenty", "One more.", importance=1)
    (work,) = strategy.due_owners(rt, settings)
    assert len(work.items) == 20
    fake_openai.script({"questions": ["q?"]}, {"insights": []})
    run(rt, questions=1)
    assert list(strategy.due_owners(rt, settings)) == []  # reset, though nothing was written
    for i in range(14):
        add_episode(rt, DEV, f"2026-09-{i + 1:02d}T09:00:00+00:00", f"New {i}", "x",
                    importance=10)
    assert list(strategy.due_owners(rt, settings)) == []  # 140 since the last run
    add_episode(rt, DEV, "2026-09-20T09:00:00+00:00", "New 15", "y", importance=10)
    (work,) = strategy.due_owners(rt, settings)
    assert len(work.items) == 15  # insights never add to the sum; only new Episodes count


def test_depth_two_and_the_depth_cap(root: Path, fake_openai) -> None:
    rt = openai_runtime(root, fake_openai)
    fill(rt)
    fake_openai.script({"questions": ["q?"]}, cite_reverts)
    run(rt, questions=1)
    (first,) = insights(rt)

    def cite_insight_and_revert(text: str) -> Any:
        def reply(body: dict[str, Any]) -> str:
            ids = numbers_of(body, "insight:")[:1] + numbers_of(body, "reverted PR")[:1]
            return json.dumps({"insights": [{"insight": text, "evidence": ids}]})
        return reply

    fake_openai.script({"questions": ["q2?"]}, cite_insight_and_revert("Deeper."))
    run(rt, force=True, questions=1)
    deeper = [e for e in insights(rt) if e.id != first.id]
    assert [e.meta["depth"] for e in deeper] == [2]
    assert first.id in deeper[0].meta["evidence"]
    # a new Episode: a forced run over the same empty window counts as that window's
    # recovery (the insight written for it is found) and asks nothing
    add_episode(rt, DEV, "2026-10-01T09:00:00+00:00", "Standup", "Billing standup.")
    # (new text: a repeat of "Deeper." is refused as a repeat before its depth is looked at)
    fake_openai.script({"questions": ["q3?"]}, cite_insight_and_revert("Deeper still."))
    counts = run(rt, force=True, questions=1, max_depth=1)
    assert len(insights(rt)) == 2  # depth 2 > max_depth 1: refused, and the run says so
    assert counts.get("refused") == 1 and not counts.get("written")
    with pytest.raises(Exception, match="max_depth: must be between 1 and 3"):
        validate_strategy_settings(NAME, {"max_depth": 4}, "ome.toml")


def test_an_insight_under_the_citation_floor_is_refused_and_counted(root: Path,
                                                                    fake_openai) -> None:
    """It was dropped by the reply's parser without a count: a reply whose every insight
    cited one record made an ``ok`` run that wrote nothing and said nothing."""
    rt = openai_runtime(root, fake_openai)
    fill(rt)

    def one_good_one_thin(body: dict[str, Any]) -> str:
        reverts = numbers_of(body, "reverted PR")
        return json.dumps({"insights": [
            {"insight": "The user reverted PR 41.", "evidence": reverts[:1]},
            {"insight": "Every revert touched auth.", "evidence": reverts}]})

    fake_openai.script({"questions": ["q?"]}, one_good_one_thin)
    counts = run(rt, questions=1)
    assert (counts.get("written"), counts.get("refused")) == (1, 1)
    assert [e.content for e in insights(rt)] == ["Every revert touched auth."]

    add_episode(rt, DEV, "2026-10-01T09:00:00+00:00", "Standup", "Billing standup.")
    fake_openai.script({"questions": ["q2?"]}, lambda body: json.dumps({"insights": [
        {"insight": "Thin.", "evidence": numbers_of(body, "reverted PR")[:1]}]}))
    counts = run(rt, force=True, questions=1)
    assert counts.get("refused") == 1 and not counts.get("written")


def test_an_insight_without_text_is_refused_alone_and_the_good_one_written(
        root: Path, fake_openai) -> None:
    """An empty (or zero-width) insight failed the whole call as an unusable reply: the good
    insight beside it was lost and the owner's window failed."""
    rt = openai_runtime(root, fake_openai)
    fill(rt)
    fake_openai.script({"questions": ["q?"]}, lambda body: json.dumps({"insights": [
        {"insight": "", "evidence": numbers_of(body, "reverted PR")},
        {"insight": " \u200b ", "evidence": numbers_of(body, "reverted PR")},
        {"insight": "Every revert touched auth.", "evidence": numbers_of(body, "reverted PR")},
    ]}))
    counts = run(rt, questions=1)
    assert (counts.get("written"), counts.get("refused")) == (1, 2), counts
    assert [e.content for e in insights(rt)] == ["Every revert touched auth."]


def test_a_run_that_hits_max_llm_calls_stops_and_says_which(root: Path, fake_openai) -> None:
    from everos_reflect.engine.engine import Engine

    rt = openai_runtime(root, fake_openai)
    fill(rt)
    (root / "ome.toml").write_text(f"[strategies.{NAME}]\nquestions = 1\nmax_llm_calls = 1\n")
    outcome = Engine(rt).trigger(NAME, force=True, timeout=60)
    # an owner needs 2 calls (questions + insights): it is not started with room for 1
    assert outcome.status == "partial"
    assert outcome.error == "stopped early: max_llm_calls (1) reached"
    assert outcome.counts == {"limit_reached": 1}
    assert fake_openai.chat_bodies() == [] and insights(rt) == []
    assert list_derivations(rt.db(), strategy=NAME) == []
    strategy = ReflectInsights()
    settings = validate_strategy_settings(NAME, {}, "ome.toml")
    assert len(list(strategy.due_owners(rt, settings))) == 1  # the window waits, unconsumed
    (root / "ome.toml").write_text(f"[strategies.{NAME}]\nquestions = 1\nmax_llm_calls = 2\n")
    fake_openai.script({"questions": ["q?"]}, cite_reverts)
    outcome = Engine(rt).trigger(NAME, force=True, timeout=60)
    assert outcome.status == "ok" and outcome.counts.get("written") == 1
    assert len(fake_openai.chat_bodies()) == 2


def test_a_run_past_max_tokens_stops_before_the_next_owner(root: Path, fake_openai) -> None:
    from everos_reflect.engine.engine import Engine

    rt = openai_runtime(root, fake_openai)
    fill(rt)
    other = UserRef.of("u_other")
    for i in range(22):
        add_episode(rt, other, f"2026-08-{1 + i:02d}T09:00:00+00:00", f"Note {i}",
                    f"Another user's note {i}.", importance=8)
    (root / "ome.toml").write_text(f"[strategies.{NAME}]\nquestions = 1\nmax_tokens = 5\n")
    fake_openai.script({"questions": ["q?"]}, {"insights": []})
    outcome = Engine(rt).trigger(NAME, force=True, timeout=60)
    assert outcome.status == "partial"
    assert outcome.error == "stopped early: max_tokens (5) reached"
    assert outcome.counts == {"owners": 1, "limit_reached": 1}  # the first owner finished
    assert len(fake_openai.chat_bodies()) == 2
    rows = list_derivations(rt.db(), strategy=NAME)
    assert [r["status"] for r in rows] == ["ok"] and rows[0]["prompt_tokens"] > 5


def test_offline_insights_state_recurring_topics_with_counts_and_dates(root: Path) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    fill(rt)
    for week in range(4):
        add_episode(rt, DEV, f"2026-10-{1 + 7 * week:02d}T09:00:00+00:00", "Deploy retry",
                    "Before retrying the deploy the user asked to see the kubernetes logs.",
                    importance=8)
    run(rt)
    found = insights(rt)
    assert found, "expected at least one recurring topic"
    texts = [e.content for e in found]
    # the phrase every one of those Episodes says, not the bare word the TF-IDF weight favours
    assert "'deploy retry' comes up in 4 episodes across 4 weeks (first 2026-10-01, last " \
        "2026-10-22)." in texts
    assert "'reverted' comes up in 3 episodes across 3 weeks (first 2026-09-02, last " \
        "2026-09-30)." in texts
    for entry in found:
        assert entry.meta["provider"] == "extractive" and len(entry.meta["evidence"]) >= 2


def test_offline_a_later_count_of_a_topic_archives_the_earlier_one(root: Path) -> None:
    """"'deploy retry' comes up in 4 episodes" stayed live and served beside the "13
    episodes" of a later run: the older count was no longer true."""
    from datetime import UTC, datetime, timedelta

    rt = make_runtime(root, ExtractiveLLM())
    fill(rt)

    def deploys(weeks: range) -> None:
        for week in weeks:
            ts = datetime(2026, 10, 1, 9, tzinfo=UTC) + timedelta(weeks=week)
            add_episode(rt, DEV, ts.isoformat(), "Deploy retry", "Before retrying the deploy "
                        "the user asked to see the kubernetes logs.", importance=8)

    deploys(range(4))
    run(rt)
    (first,) = [e for e in insights(rt) if e.content.startswith("'deploy retry' comes up in 4")]
    deploys(range(4, 13))
    run(rt, force=True)
    live = [e.content for e in insights(rt)
            if e.deprecated_by is None and e.content.startswith("'deploy retry'")]
    assert live == ["'deploy retry' comes up in 13 episodes across 13 weeks (first 2026-10-01, "
                    "last 2026-12-24)."]
    (second,) = [e for e in rt.store.entries(DEV, Kind.INSIGHT) if e.content == live[0]]
    assert rt.store.get(DEV, first.id).deprecated_by == second.id
    # the other topics stand: "reverted" is still counted as it was
    assert any(e.content.startswith("'reverted' comes up in 3") and e.deprecated_by is None
               for e in insights(rt))


def test_offline_topic_names_a_phrase_only_where_every_episode_says_it() -> None:
    from everos_reflect.model import Entry, Kind
    from everos_reflect.strategies.insights_offline import recurring_topics

    def ep(n: int, day: str, content: str) -> Entry:
        return Entry(id=f"ep_2026{day.replace('-', '')}_{n:04d}", kind=Kind.EPISODE,
                     meta={"timestamp": f"2026-{day}T09:00:00+00:00"},
                     sections={"Subject": "CI", "Content": content})

    history = [ep(1, "09-01", "The checkout test flaked again on CI."),
               ep(2, "09-08", "Checkout test flaked; the rerun passed."),
               ep(3, "09-15", "The checkout test failed in the nightly run."),
               ep(4, "09-02", "Deploy the kubernetes chart to staging."),
               ep(5, "09-09", "Deploy of the kubernetes operator went fine."),
               ep(6, "09-16", "Deploy, then kubernetes rolled back by itself."),
               ep(7, "09-20", "Lunch with the team.")]
    terms = {t.term for t in recurring_topics(history, limit=5)}
    assert "checkout test" in terms and "checkout" not in terms and "test" not in terms
    # "deploy kubernetes" is a pair the vectorizer forms across dropped words: never stated
    assert not any(t.startswith("deploy ") for t in terms) and "deploy" in terms


# -- offline, without a pattern to state --------------------------------------------------------


def status_row(rt: Runtime) -> dict[str, Any]:
    from everos_reflect.engine.engine import strategies_status

    return next(r for r in strategies_status(rt) if r["name"] == NAME)


def test_offline_a_history_of_one_week_needs_an_llm_and_writes_nothing(root: Path) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    for i in range(25):  # 2026-08-03 is a Monday: every Episode falls in one ISO week
        add_episode(rt, DEV, f"2026-08-0{3 + i % 5}T{8 + i % 10:02d}:00:00+00:00",
                    f"Deploy {i}", "The user retried the deploy after reading the logs.",
                    importance=9)
    assert run(rt) == {"needs_llm": 1}
    assert insights(rt) == []
    row = status_row(rt)
    assert row["unavailable"] and "needs an LLM" in row["unavailable"]
    assert "3+ weeks" in row["unavailable"]
    assert ReflectInsights().observe(rt, None) == 0  # nothing to do, so no data trigger


def test_offline_an_owner_without_a_recurring_topic_is_skipped_and_recorded(root: Path) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    words = ["violin", "harbour", "quartz", "tulip", "glacier", "saffron", "compass", "ember",
             "lantern", "orchid", "pebble", "meadow", "falcon", "velvet", "cobalt", "thistle",
             "walnut", "marble", "canyon", "juniper", "lagoon", "mosaic"]
    for i, word in enumerate(words):  # spread over 11 weeks, no word twice
        add_episode(rt, DEV, f"2026-{6 + i // 8:02d}-{1 + (i % 8) * 3:02d}T09:00:00+00:00",
                    f"Note {i}", f"A note about {word}.", importance=8)
    counts = run(rt)
    assert counts == {"needs_llm": 1}
    assert insights(rt) == []
    assert status_row(rt)["unavailable"] is None  # the history spans weeks: offline may apply
    (row,) = list_derivations(rt.db(), strategy=NAME)
    assert row["status"] == "skipped" and row["outputs"] == []
    assert "this owner's Episodes show none" in row["error"]
    strategy = ReflectInsights()
    settings = validate_strategy_settings(NAME, {}, "ome.toml")
    assert list(strategy.due_owners(rt, settings)) == []  # the accumulator reset all the same


# -- a crash in the middle of an insight commit -------------------------------------------------


class PowerCut(BaseException):
    """Stands for the process dying at that point (not an Exception: one of those fails
    the owner alone and the run goes on)."""


def recurring_history(rt: Runtime) -> None:
    fill(rt)
    for week in range(4):
        add_episode(rt, DEV, f"2026-10-{1 + 7 * week:02d}T09:00:00+00:00", "Deploy retry",
                    "Before retrying the deploy the user asked to see the kubernetes logs.",
                    importance=8)


def indexed_insights(rt: Runtime) -> list[str]:
    return [r[0] for r in rt.db().execute(
        "SELECT id FROM entries WHERE kind = 'insight' ORDER BY id")]


@pytest.mark.parametrize("where", ["after the Markdown write", "after the index sync",
                                   "inside the cursor transaction"])
def test_a_crash_mid_commit_reruns_with_no_duplicate_and_no_half_state(
        root: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    from everos_reflect.index import audit
    from everos_reflect.strategies import belief_store
    from everos_reflect.strategies import insights as insights_mod

    rt = make_runtime(root, ExtractiveLLM())
    recurring_history(rt)

    def cut(*args: Any, **kwargs: Any) -> None:
        raise PowerCut(where)

    target = {"after the Markdown write": (insights_mod, "sync"),
              "after the index sync": (belief_store.BeliefTier, "_record"),
              "inside the cursor transaction": (audit, "insert_derivation")}[where]
    with monkeypatch.context() as patch:
        patch.setattr(*target, cut)
        with pytest.raises(PowerCut):
            run(rt)
    written = insights(rt)
    assert written, "the crash came after the Markdown write"
    assert list_derivations(rt.db(), strategy=NAME) == []  # the bookkeeping never committed
    counts = run(rt)  # the next run finds the outputs by their window key
    assert counts == {"owners": 1, "recovered": 1}
    assert [e.id for e in insights(rt)] == [e.id for e in written]  # no duplicate
    assert indexed_insights(rt) == sorted(e.id for e in written)  # and the index has them
    (row,) = list_derivations(rt.db(), strategy=NAME)
    assert row["status"] == "ok" and sorted(row["outputs"]) == sorted(e.id for e in written)
    strategy = ReflectInsights()
    settings = validate_strategy_settings(NAME, {}, "ome.toml")
    assert list(strategy.due_owners(rt, settings)) == []  # the window is consumed
