"""A fact re-extracted from a narrative takes the time it was said (the day of the narrative's
line that states it), not the narrative's: "Andrew has no pets" (August) was a fact of
September, served beside "Andrew now has two dogs" as that day's news."""

from __future__ import annotations

import json
import random
from datetime import date, datetime, time
from pathlib import Path

import pytest

from everos_reflect.index.snippet import terms
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.llm.extractive import narrative_sentences
from everos_reflect.model import Kind
from everos_reflect.runtime import Runtime
from everos_reflect.strategies import journal
from everos_reflect.strategies.consolidate import FACT_LINE_OVERLAP, said_when
from tests.reflect_fixtures import (
    ANDREW,
    PETS,
    crash_run_at,
    make_runtime,
    run_reflection,
    seed_pets,
)

pytestmark = pytest.mark.usefixtures("settle_at_once")

LATEST = datetime.fromisoformat("2026-09-07T10:00:00-07:00")
NARRATIVE = (
    "2026-08-02: Andrew has no pets: his Denver apartment does not allow a dog.\n\n"
    "2026-09-04: Andrew has a pet now: he adopted a dog named Toby, a three-year-old lab mix.\n\n"
    "2026-09-07: Andrew adopted another dog named Buddy.\n\n"
    "Current state: Andrew now has two dogs, Toby and Buddy.")


def test_each_fact_takes_the_time_of_the_line_that_states_it(tmp_path: Path) -> None:
    rt = make_runtime(tmp_path, ExtractiveLLM())
    try:
        sources = seed_pets(rt)
    finally:
        rt.close()
    facts = ["Andrew has no pets: his Denver apartment does not allow a dog.",
             "He adopted a dog named Toby, a three-year-old lab mix.",  # reworded: still 09-04
             "Andrew now has two dogs, Toby and Buddy.",  # the current state: the latest
             "Andrew likes jazz."]  # no line states it: the narrative's time
    got = said_when(facts, NARRATIVE, sources, LATEST)
    assert got == [datetime.fromisoformat(PETS[0][0]), datetime.fromisoformat(PETS[1][0]),
                   LATEST, LATEST]


def test_a_day_no_replaced_entry_is_of_takes_its_start_and_never_passes_the_latest() -> None:
    text = ("2026-06-01: Sam drives a Honda Civic to work.\n\n"
            "2026-09-30: Sam sold the Honda Civic.")  # a line dated after the narrative's time
    got = said_when(["Sam drives a Honda Civic to work.", "Sam sold the Honda Civic."], text,
                    [], LATEST)
    assert got == [datetime.fromisoformat("2026-06-01T00:00:00-07:00"), LATEST]


def test_a_dated_current_state_label_dates_its_facts() -> None:
    text = ("2026-06-01: Sam drives a Honda Civic to work.\n\n"
            "Current state (2026-06-12): Sam drives a Tesla Model 3.")
    got = said_when(["Sam drives a Tesla Model 3."], text, [], LATEST)
    assert got == [datetime.fromisoformat("2026-06-12T00:00:00-07:00")]


def _facts(rt: Runtime) -> dict[str, str]:
    """Live facts of the narrative: text -> timestamp as the Markdown has it."""
    return {f.content: f.timestamp.isoformat() for f in rt.store.entries(ANDREW, Kind.ATOMIC_FACT)
            if f.deprecated_by is None and f.timestamp is not None}


def _indexed(rt: Runtime) -> dict[str, str]:
    rows = rt.db().execute(
        "SELECT id, timestamp FROM entries WHERE kind = 'atomic_fact'").fetchall()
    return {str(r[0]): str(r[1]) for r in rows}


def _reflected(root: Path) -> Runtime:
    """A runtime on ``root`` seeded with Andrew's pets, indexed and reflected once."""
    rt = make_runtime(root, ExtractiveLLM())
    seed_pets(rt)
    Indexer(rt).scan()
    run_reflection(rt)
    return rt


def test_a_reflection_run_writes_each_fact_at_its_own_time(tmp_path: Path) -> None:
    rt = _reflected(tmp_path)
    try:
        facts = _facts(rt)
        indexed = _indexed(rt)
        Indexer(rt).reindex()
        rebuilt = _indexed(rt)
    finally:
        rt.close()
    assert facts["Andrew has no pets: his Denver apartment does not allow a dog."] == \
        "2026-08-02T19:00:00-07:00"
    assert facts["Andrew now has two dogs, Toby and Buddy."] == "2026-09-07T10:00:00-07:00"
    assert len(set(facts.values())) == 3  # the three days, not one time for all
    assert indexed == rebuilt  # the times are the Markdown's: a rebuild gives the same


def test_a_merge_recovered_after_a_kill_writes_the_same_times(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = _reflected(tmp_path / "whole")
    try:
        expected = _facts(rt)
    finally:
        rt.close()
    killed = tmp_path / "killed"
    rt = make_runtime(killed, ExtractiveLLM())
    try:
        seed_pets(rt)
        Indexer(rt).scan()
        crash_run_at(monkeypatch, rt, "narrative")  # the facts are written by the recovery
        run_reflection(rt)
        assert _facts(rt) == expected
    finally:
        rt.close()


def test_a_journal_row_written_before_facts_had_times_gives_each_the_narratives() -> None:
    plan = journal.Plan(
        id="rj_1", run_id="run", app="default_app", project="default_project",
        user_id="u_andrew", cluster_id="cl_1", mode="init", day="2026-12-07", title="Pets",
        content=NARRATIVE, facts=["Andrew has no pets."], timestamp="2026-09-07T10:00:00-07:00",
        sources=[], existing_id=None, hashes={}, fact_ids=[], provider="extractive",
        model="extractive-v2")
    row = {k: v for k, v in json.loads(plan.to_json()).items() if k != "fact_times"}
    old = journal.Plan.from_json(json.dumps(row))
    assert journal.fact_meta(old, 0)["timestamp"] == "2026-09-07T10:00:00-07:00"


def _read_every_sentence(facts: list[str], content: str, latest: datetime) -> list[datetime]:
    """The rule read plainly (the sentence the fact is word for word, else the one sharing
    most, ties to the later), every fact against every sentence: what ``said_when`` must
    answer with its index of terms."""
    said = narrative_sentences(content)
    bags = [terms(s.text) for s in said]
    out = []
    for fact in facts:
        same = [i for i, s in enumerate(said)
                if " ".join(s.text.split()) == " ".join(fact.split())]
        best = (1.0, same[-1]) if same else None
        for i, bag in [] if same else enumerate(bags):
            shared = len(terms(fact) & bag)
            share = shared / min(len(terms(fact)), len(bag)) if shared else 0.0
            if share >= FACT_LINE_OVERLAP and (best is None or share >= best[0]):
                best = (share, i)
        day = said[best[1]].day if best is not None else None
        out.append(latest if day is None else min(
            datetime.combine(date.fromisoformat(day), time(), latest.tzinfo), latest))
    return out


def test_the_index_of_terms_answers_as_reading_every_sentence() -> None:
    stories = json.loads((Path(__file__).parent.parent / "bench" / "state_stories.json")
                         .read_text(encoding="utf-8"))["stories"]
    pool = [ep["text"] for s in stories for ep in s["episodes"]]
    rng = random.Random(50)
    latest = datetime.fromisoformat("2026-12-31T12:00:00+01:00")
    checked = 0
    for _ in range(300):
        sentences = rng.sample(pool, rng.randint(2, 40))
        content = "\n\n".join(f"2026-03-{1 + n * 27 // len(sentences):02d}: {s}"
                              for n, s in enumerate(sentences))
        facts = []
        for _ in range(rng.randint(1, 12)):
            words = rng.choice(sentences + pool[:30]).split()
            if rng.random() < 0.4:
                words = [w for w in words if rng.random() > 0.25] or words
            if rng.random() < 0.3:
                words[0] = "They"
            facts.append(" ".join(words))
        assert said_when(facts, content, [], latest) == \
            _read_every_sentence(facts, content, latest), (content, facts)
        checked += len(facts)
    assert checked > 1000


def test_a_narrative_of_thousands_of_sentences_dates_each_fact() -> None:
    """Every fact is compared with the sentences sharing its rarest terms, not with every
    sentence (3,000 facts of a 3,000-sentence narrative took 10 s)."""
    lines = [f"2026-01-{1 + n % 28:02d}: Andrew fed dog number {n + 10} in the park today."
             for n in range(3000)]
    facts = [line.split(": ", 1)[1].replace("Andrew", "He") for line in lines]
    got = said_when(facts, "\n".join(lines), [], LATEST)
    assert [t.day for t in got] == [1 + n % 28 for n in range(3000)]
