"""The fact-coverage guard: how many of the sources' facts a merge still states (HashEmbedder:
similar = shared words), and a run that rejects a lossy merge writes nothing."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.engine.registry import validate_strategy_settings
from everos_reflect.errors import ConfigError
from everos_reflect.llm import ExtractiveLLM, ScriptedLLM
from everos_reflect.llm.base import Usage
from everos_reflect.model import Entry, Kind
from everos_reflect.strategies.consolidate import (
    Coverage,
    Draft,
    Selection,
    attribute,
    measure_coverage,
    source_facts,
)
from everos_reflect.strategies.reflect import DEFAULT_MIN_FACT_COVERAGE
from tests.reflect_fixtures import (
    ANDREW,
    add_fact,
    all_entries,
    make_runtime,
    reports,
    run_reflection,
    seed_pets,
)

FACTS = [
    "Andrew has no pets.",
    "Andrew adopted a dog named Toby.",
    "Andrew adopted another dog named Buddy.",
    "Andrew moved to Portland in August.",
]


def a_draft(content: str, facts: list[str]) -> Draft:
    sel = Selection(ANDREW, "cl_000000000000", "init", (), None, 0)
    return Draft(sel, "T", content, facts, "scripted", "m", Usage(), 0.0)


def test_every_fact_stated_verbatim_is_full_coverage() -> None:
    got = measure_coverage(HashEmbedder(64), FACTS, a_draft(" ".join(FACTS), FACTS),
                           match_threshold=0.75)
    assert got.score == 1.0 and got.missing == [] and got.source_facts == 4


def test_half_the_facts_missing_is_half_coverage_and_names_them() -> None:
    kept = FACTS[:2]
    got = measure_coverage(HashEmbedder(64), FACTS, a_draft(" ".join(kept), kept),
                           match_threshold=0.75)
    assert got.score == 0.5 and got.missing == FACTS[2:]
    message = got.explain(0.6)
    assert message.startswith("fact coverage 0.50 < floor 0.60; missing: ")
    assert '"Andrew moved to Portland in August."' in message


def test_a_narrative_sentence_counts_even_when_the_facts_omit_it() -> None:
    got = measure_coverage(HashEmbedder(64), FACTS, a_draft(" ".join(FACTS), FACTS[:1]),
                           match_threshold=0.75)
    assert got.score == 1.0


def test_nothing_to_keep_is_full_coverage_and_nothing_stated_is_none() -> None:
    assert measure_coverage(HashEmbedder(64), [], a_draft("", []),
                            match_threshold=0.75).score == 1.0
    empty = measure_coverage(HashEmbedder(64), FACTS, a_draft("", []), match_threshold=0.75)
    assert empty.score == 0.0 and empty.missing == FACTS


def test_explain_quotes_at_most_three_missing_facts() -> None:
    cov = Coverage(0.0, 5, [f"fact number {i}" for i in range(5)])
    assert cov.explain(0.6).endswith('"fact number 2"; and 2 more')


def test_source_facts_prefer_atomic_facts_and_fall_back_to_sentences(root: Path) -> None:
    rt = make_runtime(root, ExtractiveLLM())
    sources = seed_pets(rt)
    sel = Selection(ANDREW, "cl_000000000000", "init", tuple(sources), None, 0)

    wanted = source_facts(sel, {sources[1].id: ["Toby is a lab mix."]})

    assert "Toby is a lab mix." in wanted
    assert "Andrew has no pets: his Denver apartment does not allow a dog." in wanted
    assert not any("three-year-old" in w for w in wanted)  # replaced by its atomic fact
    assert "Andrew adopted another dog named Buddy." in wanted


def test_a_lossy_merge_is_rejected_and_writes_nothing(root: Path) -> None:
    lossy = ("Andrew's dogs", "Andrew has a dog.")
    rt = make_runtime(root, ScriptedLLM([lossy], [["Andrew has a dog."]]))
    sources = seed_pets(rt)
    add_fact(rt, ANDREW, sources[2], "Andrew now has two dogs, Toby and Buddy.")
    before = {p: p.read_bytes() for p in rt.store.iter_files()}

    counts = run_reflection(rt)

    assert counts["rejected"] == 1 and "merged" not in counts
    assert {p: p.read_bytes() for p in rt.store.iter_files()} == before
    [report] = reports(rt)
    assert report["status"] == "rejected" and report["merged_entry_id"] is None
    assert report["fact_coverage"] < DEFAULT_MIN_FACT_COVERAGE
    assert report["error"].startswith("fact coverage ")
    assert "Andrew now has two dogs, Toby and Buddy." in report["error"]
    assert all(e.deprecated_by is None for e in all_entries(rt).values())


def test_a_lower_floor_lets_the_same_merge_through(root: Path) -> None:
    rt = make_runtime(root, ScriptedLLM([("Andrew's dogs", "Andrew has a dog.")],
                                        [["Andrew has a dog."]]))
    seed_pets(rt)

    counts = run_reflection(rt, min_fact_coverage=0.0)

    assert counts["merged"] == 1
    assert reports(rt)[0]["fact_coverage"] < 0.5


@pytest.mark.parametrize(("key", "value", "reason"), [
    ("min_fact_coverage", 1.5, "between 0 and 1"),
    ("fact_match_threshold", -0.1, "between 0 and 1"),
    ("max_sources_per_merge", 0, "must be 2 to 1,000"),
    # a merge takes two Episodes: at 1 each first merge archived a single Episode for a
    # narrative of one source (19 of them on the example root), merging nothing
    ("max_sources_per_merge", 1, "must be 2 to 1,000"),
    ("prompts", {"merge_init": "no placeholder"}, "merge_init: missing placeholder"),
    ("max_narrative_ratio", 0.0, "must be greater than 0 and at most 100, got 0"),
    # with a prompt budget every cluster's estimate overflowed: every run failed
    ("max_narrative_ratio", 1e308, "must be greater than 0 and at most 100, got 1e+308"),
    ("max_narrative_ratio", float("inf"), "must be greater than 0 and at most 100, got inf"),
])
def test_invalid_guard_and_limit_settings_name_the_key(key: str, value: object,
                                                       reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate_strategy_settings("reflect_episodes", {key: value}, "ome.toml")
    assert f"strategies.reflect_episodes.{key}" in str(info.value)
    assert reason in str(info.value)


class _Recording:
    """An embedder that remembers every text it was asked to embed."""

    name, dim = "recording", 64

    def __init__(self) -> None:
        self.inner = HashEmbedder(64)
        self.texts: list[str] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.texts.extend(texts)
        return self.inner.embed(texts)


def test_the_guard_reuses_the_indexed_vectors_of_source_facts(tmp_path: Path) -> None:
    from everos_reflect.embedding import CachingEmbedder
    from everos_reflect.index.sync import Indexer

    recording = _Recording()
    rt = make_runtime(tmp_path, ExtractiveLLM(), embedder=CachingEmbedder(recording))
    sources = seed_pets(rt)
    fact = "Toby is a three-year-old lab mix from the Denver shelter."
    add_fact(rt, ANDREW, sources[1], fact)
    Indexer(rt).scan()
    assert recording.texts.count(fact) == 1  # embedded once, by the indexer
    rt.embedder.__dict__["_cache"].clear()  # a later run in a fresh process: nothing cached

    run_reflection(rt)

    assert recording.texts.count(fact) == 1  # the guard took the stored vector
    assert [r["status"] for r in reports(rt)] == ["ok"]


class SameVector:
    """Every text at cosine 1 to every other: what MiniLM nearly does for "Mia is allergic to
    peanuts." and "Mia's brother is allergic to peanuts." (0.91)."""

    name, dim = "same", 4

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.tile(np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32), (len(texts), 1))


MIA = ["Mia is allergic to peanuts.", "Mia's brother is allergic to peanuts."]


def test_a_fact_about_someone_s_brother_is_not_stated_by_one_about_them() -> None:
    # an LLM merge writing one sentence for both facts passed at coverage 1.00
    got = measure_coverage(SameVector(), MIA, a_draft(MIA[0], [MIA[0]]), match_threshold=0.75)
    assert got.score == 0.5 and got.missing == [MIA[1]]
    her = measure_coverage(SameVector(), [*MIA, "Mia carries an EpiPen."],
                           a_draft("Her brother is allergic to peanuts.", []),
                           match_threshold=0.75)
    assert her.missing == [MIA[0], "Mia carries an EpiPen."]


def test_a_sentence_naming_both_holders_states_both_facts() -> None:
    both = "Mia and her brother are both allergic to peanuts."
    assert measure_coverage(SameVector(), MIA, a_draft(both, []),
                            match_threshold=0.75).score == 1.0
    severe = ["Mia is severely allergic to peanuts."]
    assert measure_coverage(SameVector(), severe,
                            a_draft("Mia's allergy to peanuts is severe.", []),
                            match_threshold=0.75).score == 1.0


def test_prose_is_attributed_to_the_source_about_its_holder() -> None:
    sources = tuple(
        Entry(f"ep_2026010{i + 1}_0001", Kind.EPISODE,
              {"timestamp": f"2026-01-0{i + 1}T10:00:00+00:00"},
              {"Subject": "Allergies", "Content": text})
        for i, text in enumerate(MIA))
    sel = Selection(ANDREW, "cl_000000000000", "init", sources, None, 0)
    prose = Draft(sel, "T", f"{MIA[0]} {MIA[1]}", [], "scripted", "m", Usage(), 0.0)
    assert attribute(SameVector(), prose, threshold=0.75) == (
        ("ep_20260101_0001",), ("ep_20260102_0001",))
    # a sentence only other holders' sentences come near keeps its best match
    alone = replace(prose, content="Her brother is allergic to peanuts.",
                    selection=replace(sel, sources=sources[:1]))
    assert attribute(SameVector(), alone, threshold=0.75) == (("ep_20260101_0001",),)


@pytest.mark.parametrize("fact, sentence", [
    ("Olga's landlord raised the rent again.",
     "Olga's kitchen sink keeps leaking, and her landlord raised the rent again."),
    ("Elif installed Linux on her old desktop.",
     "Elif's laptop screen cracked, so she installed Linux on her old desktop."),
    ("Aiko's e-reader ran out of storage.",
     "Aiko reads a chapter before bed every night, but her e-reader ran out of storage."),
])
def test_two_facts_a_model_writes_in_one_sentence_are_both_stated(fact: str,
                                                                  sentence: str) -> None:
    assert measure_coverage(SameVector(), [fact], a_draft(sentence, []),
                            match_threshold=0.75).score == 1.0


@pytest.mark.parametrize("fact, sentence", [
    ("Mia's planning a trip to Japan in April.", "Mia plans a trip to Japan in April."),
    ("Mia's learning the guitar.", "Mia is taking guitar lessons."),
    ("Mia's moving to Berlin in May.", "Mia relocates to Berlin in May."),
    ("Mia's got a new job at Acme.", "Mia has a new job at Acme."),
])
def test_a_contracted_is_or_has_is_no_possessive(fact: str, sentence: str) -> None:
    # "Mia's planning ..." is "Mia is planning ...": read as Mia's "planning", an LLM merge
    # restating it about Mia lost the fact and was rejected as lossy
    assert measure_coverage(SameVector(), [fact], a_draft(sentence, []),
                            match_threshold=0.75).score == 1.0


def test_a_thing_in_ing_is_still_held() -> None:
    got = measure_coverage(SameVector(), ["Mia's wedding is in June."],
                           a_draft("Mia is in Rome in June.", []), match_threshold=0.75)
    assert got.missing == ["Mia's wedding is in June."]


@pytest.mark.parametrize("facts", [
    ["O'Brien is allergic to peanuts.", "O'Brien's brother is allergic to peanuts."],
    ["Sean O’Brien is allergic to peanuts.", "Sean O’Brien’s brother is allergic to peanuts."],
    ["Mia Wong is allergic to peanuts.", "Mia Wong's brother is allergic to peanuts."],
])
def test_a_named_owner_with_an_apostrophe_or_a_surname_holds_too(facts: list[str]) -> None:
    got = measure_coverage(SameVector(), facts, a_draft(facts[0], []), match_threshold=0.75)
    assert got.missing == [facts[1]]
