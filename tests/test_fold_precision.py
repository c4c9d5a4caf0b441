"""The extractive merge folds restatements, never two different facts about one subject.

With the bundled MiniLM, short sentences about one entity sit close: "Andrew adopted a dog named
Rex." and "Andrew's dog Rex learned to sit and fetch." at cosine 0.774. At the 0.75 the provider
shipped with, the merge kept the first and the tricks left live memory; the coverage guard,
counting a fact as kept at the same cosine, passed it at coverage 1.00.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from everos_reflect.embedding.local import LocalEmbedder
from everos_reflect.llm.base import MergeMember, MergeRequest
from everos_reflect.llm.extractive import ExtractiveLLM, plain_sentences

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import fold_pairs


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    embedder = LocalEmbedder(batch_size=16, threads=1)
    embedder.load()
    return embedder


def merged(llm: ExtractiveLLM, *texts: str) -> list[str]:
    members = [MergeMember(f"ep_202611{10 + 2 * i}_0001",
                           datetime(2026, 11, 10 + 2 * i, 10, tzinfo=UTC), "Rex", text)
               for i, text in enumerate(texts)]
    return plain_sentences(llm.merge(MergeRequest("init", members)).content)


def test_two_facts_about_one_dog_both_stay(local: LocalEmbedder) -> None:
    kept = merged(ExtractiveLLM(local), "Andrew adopted a dog named Rex.",
                  "Andrew's dog Rex had a vet visit; Rex is healthy.",
                  "Andrew's dog Rex learned to sit and fetch.")
    assert kept == ["Andrew adopted a dog named Rex.",
                    "Andrew's dog Rex had a vet visit; Rex is healthy.",
                    "Andrew's dog Rex learned to sit and fetch."]


def test_a_restatement_is_still_folded(local: LocalEmbedder) -> None:
    kept = merged(ExtractiveLLM(local), "Andrew adopted a dog named Rex.",
                  "Andrew got a dog called Rex.")
    assert len(kept) == 1


def test_the_shipped_threshold_folds_no_distinct_pair_of_the_bench(local: LocalEmbedder) -> None:
    rows = fold_pairs.load_pairs()
    llm = ExtractiveLLM(local)
    lost = [r["texts"] for r in rows
            if r["label"] == "distinct" and fold_pairs.folded(llm, r["texts"])]
    assert lost == []
    # and it does fold: most restatements keep one sentence
    restates = [r for r in rows if r["label"] == "restates"]
    assert sum(fold_pairs.folded(llm, r["texts"]) for r in restates) >= len(restates) // 2


def test_the_bench_chooses_the_lowest_value_clean_on_the_calibration_half() -> None:
    table = {"0.7": {"calibration": {"distinct_folded": 2}},
             "0.78": {"calibration": {"distinct_folded": 0}},
             "0.85": {"calibration": {"distinct_folded": 0}}}
    assert fold_pairs.choose(table) == "0.78"
    assert fold_pairs.choose({"0.7": {"calibration": {"distinct_folded": 1}}}) is None
