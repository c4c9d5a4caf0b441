"""A sentence that asks and then tells the deed ("Rafa asked how to fix the sink and then
fixed it.") states the deed.

It was read as a question only: the merge kept it beside "Rafa fixed the sink." as another
fact, and the coverage guard did not count it as stating that he fixed it, so an honest LLM
merge writing the two as one sentence was refused. It still states no standing fact ("Rafa
plays the guitar."), as the question alone did not.
"""

from __future__ import annotations

import sys
from datetime import date
from pathlib import Path

import pytest

from everos_reflect.embedding.local import LocalEmbedder
from everos_reflect.llm import extractive
from everos_reflect.llm.extractive import ExtractiveLLM, plain_sentences
from everos_reflect.strategies.reflect import DEFAULT_FACT_MATCH_THRESHOLD
from tests.merge_fixtures import loaded_local, narrative

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import fold_pairs


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return loaded_local()


@pytest.mark.parametrize("text, deed", [
    ("Sam asked how to fix the bike and then fixed it.", True),
    ("Sam asked how to fix the bike and fixed it.", True),
    ("Sam asked how to fix the bike, then fixed it himself.", True),
    ("Sam asked how to fix the bike and what it would cost.", False),
    ("Sam asked how to fix the bike and then asked whether it was safe.", False),
    ("Sam asked how to cook rice and bake bread.", False),
])
def test_which_questions_tell_their_deed(text: str, deed: bool) -> None:
    s = extractive._Sentence(text, date.min, 0)
    assert s.question
    assert s.deed is deed


def test_a_question_and_its_deed_restate_the_deed(local: LocalEmbedder) -> None:
    content = narrative(ExtractiveLLM(local), "Rafa fixed the sink.",
                        "Rafa asked how to fix the sink and then fixed it.")
    assert plain_sentences(content) == ["Rafa asked how to fix the sink and then fixed it."]


def test_a_question_and_its_deed_state_no_standing_fact(local: LocalEmbedder) -> None:
    content = narrative(ExtractiveLLM(local), "Rafa plays the guitar.",
                        "Rafa asked how to restring the guitar and then restrung it.")
    assert plain_sentences(content) == [
        "Rafa plays the guitar.", "Rafa asked how to restring the guitar and then restrung it."]
    assert "Current state" not in content


def test_the_guard_counts_the_deed_told_after_a_question(local: LocalEmbedder) -> None:
    both = "Rafa asked how to fix the sink and then fixed it."
    assert fold_pairs.coverage(local, ["Rafa fixed the sink.", "Rafa asked how to fix the sink."],
                               both, DEFAULT_FACT_MATCH_THRESHOLD) == 1.0
    # a second question is no deed, and the deed is no standing fact
    assert fold_pairs.coverage(local, ["Rafa fixed the sink."],
                               "Rafa asked how to fix the sink and what it would cost.",
                               DEFAULT_FACT_MATCH_THRESHOLD) == 0.0
    assert fold_pairs.coverage(local, ["Rafa plays the guitar."],
                               "Rafa asked how to restring the guitar and then restrung it.",
                               DEFAULT_FACT_MATCH_THRESHOLD) == 0.0
