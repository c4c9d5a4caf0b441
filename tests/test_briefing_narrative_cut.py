"""A narrative cut to fit a briefing keeps its current state and the day the question points
at, not its oldest days (briefing/narrative.py, ``pack.cut_parts``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.briefing.build import build_briefing
from everos_reflect.briefing.narrative import narrative_parts
from everos_reflect.briefing.pack import GAP, Item, _capped, cut_parts, item_line, line_floor
from everos_reflect.briefing.tokens import default_counter
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.index.sync import Indexer
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime

COUNTER = default_counter()
REF = UserRef.of("u_andrew")

PETS = (
    "2026-09-01: Andrew has no pets yet. Now that they have a yard in Sellwood, he and Jess "
    "want to adopt a shelter dog and have started visiting the Oregon Humane Society.\n\n"
    "2026-09-04: Andrew and Jess adopted a shelter dog from the Oregon Humane Society: Toby, "
    "a three-year-old brindle lab/boxer mix and Andrew's first pet. The first night went "
    "fine, apart from Toby refusing the crate.\n\n"
    "2026-09-07: Andrew went back to the shelter and also adopted Buddy, Toby's kennel mate, "
    "a shy senior beagle mix the staff said had been pining since Toby left.\n\n"
    "Current state: Andrew now has two dogs, Toby and Buddy.")

#: a topic paragraph: one line per day, the first hard-wrapped
TOPIC = (
    "2026-03-02: Sam drives a Honda Civic to work every day and parks it\n"
    "in the garage on Elm Street.\n"
    "2026-06-10: Sam sold the Civic to a neighbour.\n"
    "2026-06-12: Sam now drives a Tesla Model 3 to work.\n\n"
    "Current state (2026-06-12): Sam drives a Tesla Model 3.")


def test_parts_rank_the_current_state_then_the_answer_then_the_latest() -> None:
    parts = narrative_parts(PETS, "crate training Toby")
    assert [text[:10] for _, text in parts] == ["2026-09-01", "2026-09-04", "2026-09-07",
                                                "Current st"]
    # the current state, the day that answers (the crate), the rest from the latest back
    assert [rank for rank, _ in parts] == [3, 1, 2, 0]
    assert " ".join(text for _, text in parts) == " ".join(PETS.split())


def test_a_topic_paragraph_is_cut_into_its_days() -> None:
    parts = narrative_parts(TOPIC, "Elm Street garage")
    assert [text for _, text in parts] == [
        "2026-03-02: Sam drives a Honda Civic to work every day and parks it in the garage "
        "on Elm Street.",
        "2026-06-10: Sam sold the Civic to a neighbour.",
        "2026-06-12: Sam now drives a Tesla Model 3 to work.",
        "Current state (2026-06-12): Sam drives a Tesla Model 3."]
    assert [rank for rank, _ in parts] == [1, 3, 2, 0]


@pytest.mark.parametrize("text", [
    "Andrew has no pets yet.\n\nHe wants a dog.",  # paragraphs, no day, no state
    "2026-09-01: Andrew has no pets yet.",  # one part
    "",
])
def test_an_entry_that_is_no_narrative_has_no_parts(text: str) -> None:
    assert narrative_parts(text, "pets") == ()


def test_a_question_of_words_the_entry_lacks_ranks_by_recency_alone() -> None:
    assert [rank for rank, _ in narrative_parts(PETS, "quantum chromodynamics")] == [3, 2, 1, 0]


def _item(content: str, query: str, subject: str = "Andrew adopted Buddy as well") -> Item:
    parts = ((-1, f"{subject}:"), *narrative_parts(content, query))
    return Item("ep_20261207_0001", "episode", f"{subject}: {content}", "2026-09-07", [],
                parts=parts)


@pytest.mark.parametrize("cap", [30, 45, 60, 80])
def test_a_cut_narrative_keeps_its_current_state_within_the_cap(cap: int) -> None:
    cut = cut_parts(_item(PETS, "pets").parts, cap, COUNTER)
    assert COUNTER.count(cut) <= cap
    assert cut.startswith("Andrew adopted Buddy as well: …")
    assert cut.endswith("Current state: Andrew now has two dogs, Toby and Buddy.")
    assert "Andrew has no pets yet" not in cut  # the oldest day goes first


def test_the_day_the_question_points_at_comes_before_later_days() -> None:
    item = _item(PETS, "crate")
    subject, _, crate, latest, state = (text for _, text in item.parts)
    cap = COUNTER.count(f"{subject} {GAP} {crate} {GAP} {state}") + 2
    assert COUNTER.count(f"{subject} {GAP} {crate} {latest} {state}") > cap
    cut = cut_parts(item.parts, cap, COUNTER)
    assert cut == f"{subject} {GAP} {crate} {GAP} {state}"  # the latest day did not fit


def test_a_part_cut_to_the_room_left_ends_at_a_word() -> None:
    item = _item(PETS, "pets")
    for cap in range(40, 120):
        cut = cut_parts(item.parts, cap, COUNTER)
        assert COUNTER.count(cut) <= cap
        whole = " ".join(item.text.split())
        for piece in cut.split(" … "):
            piece = piece.removeprefix("… ").removesuffix(" …")
            at = whole.index(piece)
            after = whole[at + len(piece): at + len(piece) + 1]
            assert not after.isalnum() and after not in ("'", "’"), (cap, piece)
        assert "… …" not in cut


def test_a_narrative_that_fits_is_whole_and_a_tiny_cap_cuts_at_the_opening() -> None:
    item = _item(PETS, "pets")
    assert cut_parts(item.parts, 10_000, COUNTER) == " ".join(item.text.split())
    # not even the current state fits beside the subject: cut at its opening, as before
    tiny = cut_parts(item.parts, 12, COUNTER)
    assert tiny == COUNTER.truncate(" ".join(item.text.split()), 12, " …")


@pytest.mark.parametrize("cap", range(24, 140, 7))
def test_the_packers_floor_stays_under_the_line_of_a_cut_narrative(cap: int) -> None:
    """``line_floor`` may leave out an item only when its line surely does not fit: for an
    item cut by its parts (whole parts, room may be left) it must stay a lower bound."""
    item = _item(TOPIC * 3, "Tesla")
    shown = item_line(_capped(item, cap, COUNTER))
    assert line_floor(item, cap, COUNTER) <= COUNTER.count(shown)


def test_parts_are_not_in_the_answer() -> None:
    assert "parts" not in _item(PETS, "pets").to_dict()


def _narrative_root(root: Path) -> Runtime:
    rt = Runtime(root, embedder=HashEmbedder())
    rt.store.append(REF, Kind.EPISODE, {
        "timestamp": "2026-09-07T17:45:00-07:00", "parent_type": "cluster",
        "parent_id": "cl_1", "sources": ["ep_a", "ep_b", "ep_c"]},
        {"Subject": "Andrew adopted Buddy as well", "Content": PETS})
    Indexer(rt).scan()
    return rt


def test_the_briefing_keeps_a_cut_narratives_current_state(tmp_path: Path) -> None:
    rt = _narrative_root(tmp_path)
    try:
        shipped = build_briefing(rt, REF, "pets", max_tokens=150, min_similarity=-1.0)
        plain = build_briefing(rt, REF, "pets", max_tokens=150, min_similarity=-1.0,
                               narrative_cuts=False)
    finally:
        rt.close()
    (line,) = [ln for ln in shipped.text.splitlines() if "ep_" in ln]
    assert "Current state: Andrew now has two dogs, Toby and Buddy." in line
    assert shipped.cut_ids == [shipped.items[0].id]
    # cut at its opening, the same narrative told only its oldest days
    (old,) = [ln for ln in plain.text.splitlines() if "ep_" in ln]
    assert "Andrew has no pets yet" in old and "two dogs" not in old


def test_a_narrative_that_fits_is_not_cut(tmp_path: Path) -> None:
    rt = _narrative_root(tmp_path)
    try:
        block = build_briefing(rt, REF, "pets", max_tokens=1000, min_similarity=-1.0)
    finally:
        rt.close()
    assert block.cut_ids == []
    assert block.items[0].text == f"Andrew adopted Buddy as well: {PETS}"


def test_a_narrative_without_a_subject_says_its_opening_was_left_out() -> None:
    parts = narrative_parts(PETS, "pets")
    cut = cut_parts(parts, 40, COUNTER)
    assert cut.startswith(f"{GAP} 2026-09-0")
    assert cut.endswith("Current state: Andrew now has two dogs, Toby and Buddy.")


def test_a_narrative_of_thousands_of_lines_is_cut_by_its_parts() -> None:
    """A person may write any number of dated lines: the parts' counts are added up, each
    part tokenized at most once (joining and counting the text at each part taken was
    quadratic: 7.3 s for 20,000 lines)."""
    content = "\n".join(f"2026-01-{1 + i % 28:02d}: Andrew fed dog number {i} today."
                        for i in range(5000)) + "\n\nCurrent state: Andrew has many dogs."
    parts = ((-1, "Dogs:"), *narrative_parts(content, "dogs"))
    for cap in (60, 600, 6000):
        cut = cut_parts(parts, cap, COUNTER)
        assert cap - 20 <= COUNTER.count(cut) <= cap
        assert cut.startswith(f"Dogs: {GAP} 2026-01-")
        assert cut.endswith("today. Current state: Andrew has many dogs.")
        assert "number 4999 today." in cut  # the latest days are the ones kept
