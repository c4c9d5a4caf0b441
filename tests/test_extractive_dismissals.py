"""A person let go, laid off or fired has lost the job an earlier sentence says they hold.

"Bea works at Arup." / "Bea was let go." kept no current state: "let go" named nothing that
ended (no object follows it), so Arup read as still her employer. What ended is the subject's
place of work, told without naming it; "Her flat in Leeds was let go." stays the end of the
flat (a noun phrase's thing, not a person).
"""

from __future__ import annotations

import pytest

from everos_reflect.embedding.local import LocalEmbedder
from everos_reflect.llm.extractive import ExtractiveLLM, plain_sentences
from tests.merge_fixtures import kept_both, loaded_local, narrative, read_sentence


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return loaded_local()


@pytest.mark.parametrize("first, second", [
    ("Bea works at Arup.", "Bea was let go."),
    ("Bea works for the council.", "Bea was laid off."),
    ("Bea has a job at the museum.", "Bea got fired."),
    ("Bea works at Arup.", "Bea was made redundant last week."),
    ("Bea works at Arup.", "Bea was let go from Arup."),
    ("Bea works at Arup.", "She was let go."),
    # left of her own accord, told without an object: Arup read as still her employer
    ("Bea works at Arup.", "Bea retired."),
    ("Bea works for the council.", "Bea resigned last week."),
    ("Bea has a job at the museum.", "Bea retired in May."),
    ("Bea works at Arup.", "Bea retired from Arup."),
    # no one-off departure: "early" says when in her life, not for how long
    ("Bea works at Arup.", "Bea retired early."),
    # "as" after a retirement names the work left; after a layoff it does not
    ("Bea works as a teacher at the school.", "Bea retired as a teacher."),
    ("Bea works at Arup.", "Bea was laid off as part of the cuts."),
])
def test_a_dismissal_is_the_current_state_of_the_job(local: LocalEmbedder, first: str,
                                                    second: str) -> None:
    for llm in (ExtractiveLLM(local), ExtractiveLLM()):
        content = narrative(llm, first, second)
        assert len(plain_sentences(content)) == 2
        assert content.split("\n\n")[-1].startswith("Current state (2026-11-12): ")
        assert content.split("\n\n")[-1].endswith(second[second.index(" ") + 1:])


@pytest.mark.parametrize("first, second", [
    # nothing said of a job: the dismissal ends none of these
    ("Bea has a flat in Leeds.", "Bea was let go."),
    ("Bea sings in a choir.", "Bea was laid off."),
    # another person's dismissal
    ("Bea works at Arup.", "Tom was let go."),
    # the flat's end is no end of her job
    ("Bea works at Arup.", "Her flat in Leeds was let go."),
    # let go of somebody else's place: "from" names where
    ("Bea works at Arup.", "Bea was let go from the choir."),
    # no dismissal: "fired up" is eager; a layoff for a month is temporary
    ("Bea works at Arup.", "Bea was fired up about the project."),
    ("Bea works at Arup.", "Bea was laid off for a month."),
    # a retirement ends no choir, and no job with an object after it
    ("Bea sings in a choir.", "Bea retired."),
    ("Bea works at Arup.", "Bea retired the old laptop."),
    ("Bea works at Arup.", "Tom resigned."),
    # a role left, not her job
    ("Bea works at Arup.", "Bea resigned as chair of the club."),
])
def test_a_dismissal_ends_no_state_but_a_job(local: LocalEmbedder, first: str,
                                             second: str) -> None:
    for content in kept_both(local, first, second):
        assert "Current state" not in content


def test_a_thing_let_go_is_still_the_end_of_the_thing() -> None:
    s = read_sentence("Her flat in Leeds was let go.")
    assert (s.undergone, s.ended) == ("flat", frozenset({"flat", "leed"}))


def test_a_dismissal_told_twice_is_one_sentence(local: LocalEmbedder) -> None:
    content = narrative(ExtractiveLLM(local), "Bea was let go last week.",
                        "Last week Bea was let go.")
    assert len(plain_sentences(content)) == 1
